"""``render(findings, options)`` for every output format, from findings built by hand (no
linting), and the exit code of a lint run."""

from __future__ import annotations

import json

import pytest

from gpudoctor.exit_codes import EXIT_ERROR, EXIT_FINDINGS, EXIT_OK
from gpudoctor.lint.findings import ERROR, WARNING, Edit, Finding, Fix, Related, Site
from gpudoctor.lint.options import OUTPUT_FORMATS
from gpudoctor.lint.reporters import ReportOptions, render
from gpudoctor.lint.runner import exit_code

SOURCE = "import cupy as cp\nx = cp.arange(4)\npool = mp.Pool(2)\n"
FORK = Finding("GD101", "fork-after-gpu-init", "the Pool forks after CuPy initialized CUDA", ERROR,
               Site("app.py", 3, 7, 3, 17), (Related(Site("app.py", 2, 4, 2, 16), "GPU runtime initialized here"),),
               'Use the spawn start method: multiprocessing.get_context("spawn")',
               Fix("Use spawn", "unsafe", (Edit('mp.get_context("spawn").Pool', (3, 7), (3, 14)),)))
THREADS = Finding("GD102", "fork-after-thread-start", "forked while a thread runs", WARNING,
                  Site("b.py", 5, 0, 5, 4), fix_hint="Use the spawn start method", fix=Fix("Safe", "safe", ()))
SOURCES = {"app.py": SOURCE}


def test_every_output_format_renders() -> None:
    for name in OUTPUT_FORMATS:
        assert render([FORK, THREADS], ReportOptions(name, sources=SOURCES)), name


def test_concise_is_one_line_per_finding_then_the_summary() -> None:
    text = render([FORK, THREADS], ReportOptions("concise"))
    assert text == ("app.py:3:8: GD101 the Pool forks after CuPy initialized CUDA\n"
                    "b.py:5:1: GD102 [warning] forked while a thread runs\n"
                    "Found 2 findings (1 error, 1 warning).\n")
    assert render([], ReportOptions("concise")) == "All checks passed!\n"
    assert render([FORK], ReportOptions("concise", summary=False)).count("\n") == 1


def test_a_warning_is_marked_after_its_code_and_counted_in_the_summary() -> None:
    # The code stays the first word after the position (matchers written for ruff's lines
    # read it); "[warning]" follows it, and the summary says how the findings split.
    line = render([THREADS], ReportOptions("concise")).splitlines()
    assert line == ["b.py:5:1: GD102 [warning] forked while a thread runs", "Found 1 finding (a warning)."]
    assert render([THREADS, THREADS], ReportOptions("concise")).endswith("Found 2 findings (all warnings).\n")
    assert render([FORK, FORK], ReportOptions("concise")).endswith("Found 2 findings.\n")
    assert render([FORK, FORK, THREADS], ReportOptions("concise")).endswith(
        "Found 3 findings (2 errors, 1 warning).\n")
    colored = render([FORK, THREADS], ReportOptions("concise", color=True)).splitlines()
    assert "\x1b[1;31mGD101\x1b[0m" in colored[0] and "\x1b[1;33mGD102 [warning]\x1b[0m" in colored[1]


def test_full_shows_the_frame_the_related_line_and_the_help() -> None:
    text = render([FORK], ReportOptions("full", sources=SOURCES))
    assert text.splitlines()[:5] == [
        "GD101 [error] the Pool forks after CuPy initialized CUDA",
        " --> app.py:3:8",
        "  |",
        "3 | pool = mp.Pool(2)",
        "  |        ^^^^^^^^^^ fork-after-gpu-init",
    ]
    assert "2 | x = cp.arange(4)" in text and "GPU runtime initialized here" in text
    assert '  = help: Use the spawn start method: multiprocessing.get_context("spawn")' in text
    assert text.endswith("\nFound 1 finding.\n")


def test_colour_only_adds_escape_sequences() -> None:
    for name in ("concise", "full"):
        plain = render([FORK], ReportOptions(name, sources=SOURCES))
        painted = render([FORK], ReportOptions(name, color=True, sources=SOURCES))
        assert "\x1b[" in painted and "\x1b[" not in plain
        assert painted.replace("\x1b[0m", "").replace("\x1b[1m", "").replace("\x1b[1;31m", "") \
            .replace("\x1b[31m", "").replace("\x1b[36m", "").replace("\x1b[32m", "") == plain


def test_json_carries_the_contract_fields() -> None:
    (entry,) = json.loads(render([FORK], ReportOptions("json")))
    assert entry["code"] == "GD101" and entry["location"] == {"row": 3, "column": 8}
    assert entry["related"][0]["location"] == {"row": 2, "column": 5}
    assert entry["fix"]["applicability"] == "unsafe"


def test_sarif_and_github_name_the_rule() -> None:
    document = json.loads(render([FORK], ReportOptions("sarif")))
    (result,) = document["runs"][0]["results"]
    assert result["ruleId"] == "GD101" and result["relatedLocations"]
    line = render([THREADS], ReportOptions("github"))
    assert line.startswith("::warning file=b.py,line=5,col=1,")
    assert line.endswith("::GD102 forked while a thread runs\n")


def test_statistics_replace_the_findings_in_text_and_json() -> None:
    assert render([FORK, FORK, THREADS], ReportOptions("concise", statistics=True)) == \
        "    2\tGD101\tfork-after-gpu-init\n    1\tGD102\tfork-after-thread-start\n"
    counts = json.loads(render([FORK, THREADS], ReportOptions("json", statistics=True)))
    assert [(c["code"], c["count"], c["fixable"]) for c in counts] == [("GD101", 1, True), ("GD102", 1, True)]


@pytest.mark.parametrize("name", OUTPUT_FORMATS)
def test_the_fix_hint_ends_the_human_formats_only(name: str) -> None:
    hinted = render([FORK, THREADS], ReportOptions(name, fix_hint=True, sources=SOURCES))
    plain = render([FORK, THREADS], ReportOptions(name, sources=SOURCES))
    if name in ("concise", "full"):
        assert hinted == plain + ("1 fixable with `--fix`.\n1 more fixable with `--fix --unsafe-fixes` "
                                  "(may change behaviour; preview with `--diff --unsafe-fixes`).\n")
    else:
        assert hinted == plain
    assert render([FORK], ReportOptions(name, statistics=True, fix_hint=True)) == \
        render([FORK], ReportOptions(name, statistics=True))


def test_the_fix_hint_speaks_of_what_fix_left() -> None:
    after_fix = render([FORK, THREADS], ReportOptions("concise", summary=False, fix_hint=True, fixing=True))
    assert after_fix.endswith("\n1 more fixable with `--fix --unsafe-fixes` (may change behaviour; "
                              "preview with `--diff --unsafe-fixes`).\n")
    unsafe_asked = render([FORK], ReportOptions("concise", summary=False, fix_hint=True, unsafe_fixes=True))
    assert unsafe_asked.endswith("\n1 fixable with `--fix --unsafe-fixes`.\n")
    in_notebook = Finding(**{**FORK.__dict__, "site": Site("nb.ipynb", 1, 0, 1, 1, cell=2)})
    assert render([in_notebook], ReportOptions("concise", summary=False, fix_hint=True)).count("\n") == 1


def test_exit_code_errors_win_and_exit_zero_forgives_findings_only() -> None:
    assert exit_code(findings=False) == EXIT_OK == 0
    assert exit_code(findings=True) == EXIT_FINDINGS == 1
    assert exit_code(findings=True, exit_zero=True) == EXIT_OK
    assert exit_code(findings=True, errors=True) == EXIT_ERROR == 2
    assert exit_code(findings=False, errors=True, exit_zero=True) == EXIT_ERROR
