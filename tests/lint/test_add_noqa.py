"""``gpudoctor lint --add-noqa``: a noqa on the line of each finding, so that the next run is
clean; merged into the comments already there, never where no comment can go."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from gpudoctor.lint.fixes.add_noqa import annotate
from tests.lint.cli_run import FINDING, lint_main
from tests.lint.test_cli import BAD

POOL = "    with mp.Pool(2) as pool:"  # BAD's line 10, where its one finding (GD101) is
NOTEBOOKS = Path(__file__).resolve().parents[2] / "fixtures" / "notebooks"


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _clean(capsys: pytest.CaptureFixture[str], *paths: str) -> bool:
    code, out, _ = lint_main(capsys, *paths)
    return code == 0 and out == "All checks passed!\n"


# -- end to end ------------------------------------------------------------------------------

def test_after_add_noqa_the_lint_is_clean_and_a_second_run_changes_nothing(
        bad_project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = lint_main(capsys, "--add-noqa")
    assert (code, out, err) == (0, "", "Added 1 noqa directive in 1 file.\n")
    assert (bad_project / "bad.py").read_text() == BAD.replace(POOL, POOL + "  # noqa: GD101")
    assert _clean(capsys)
    before = _files(bad_project)
    assert lint_main(capsys, "--add-noqa") == (0, "", "No noqa directive to add.\n")
    assert _files(bad_project) == before


def test_a_second_code_on_a_line_joins_its_noqa(bad_project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """GD102 (a thread runs at the fork) comes to a line whose noqa names GD101 only."""
    source = BAD.replace("import cupy as cp\n", "import cupy as cp\nimport threading\n").replace(
        "x = cp.arange(4)\n", "x = cp.arange(4)\nthreading.Thread(target=print).start()\n").replace(
        POOL, POOL + "  # noqa: GD101")
    (bad_project / "bad.py").write_text(source)
    assert lint_main(capsys, "--add-noqa")[0] == 0
    assert POOL + "  # noqa: GD101, GD102\n" in (bad_project / "bad.py").read_text()
    assert _clean(capsys)


def test_crlf_stays_crlf(bad_project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (bad_project / "bad.py").write_bytes(BAD.replace("\n", "\r\n").encode())
    assert lint_main(capsys, "--add-noqa")[0] == 0
    expected = BAD.replace(POOL, POOL + "  # noqa: GD101").replace("\n", "\r\n").encode()
    assert (bad_project / "bad.py").read_bytes() == expected
    assert _clean(capsys)


def test_a_call_over_several_lines_gets_it_on_the_finding_row(bad_project: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    (bad_project / "bad.py").write_text(BAD.replace(POOL, "    with mp.Pool(\n        2\n    ) as pool:"))
    assert lint_main(capsys, "--add-noqa")[0] == 0
    assert "    with mp.Pool(  # noqa: GD101\n        2\n    ) as pool:\n" in (bad_project / "bad.py").read_text()
    assert _clean(capsys)


CLASS = """\
import multiprocessing as mp

import cupy as cp


def work(i):
    return float(cp.sum(cp.arange(i)))


class Trainer:
    def run(self):
        x = cp.arange(4)
        with mp.Pool(2) as pool:
            pool.map(work, range(3))
"""


def test_a_finding_in_a_method(bad_project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (bad_project / "bad.py").write_text(CLASS)
    assert lint_main(capsys, "--add-noqa")[0] == 0
    assert (bad_project / "bad.py").read_text() == CLASS.replace(
        "        with mp.Pool(2) as pool:", "        with mp.Pool(2) as pool:  # noqa: GD101")
    assert _clean(capsys)


@pytest.mark.parametrize(("pool", "why"), [
    ('    with mp.Pool(int("""2\n""")) as pool:', "its line ends inside a multi-line string"),
    ("    with mp.Pool(2) as \\\n            pool:", "its line ends with a backslash continuation"),
])
def test_a_line_no_comment_can_end_is_left_and_listed(bad_project: Path, capsys: pytest.CaptureFixture[str],
                                                      pool: str, why: str) -> None:
    (bad_project / "bad.py").write_text(BAD.replace(POOL, pool))
    before = _files(bad_project)
    code, out, err = lint_main(capsys, "--add-noqa")
    assert code == 1 and out == ""
    assert err.startswith("gpudoctor: 1 finding could not be given a noqa (the next run still reports it):\n"
                          f"bad.py{FINDING}{why}, where no comment can go\n")
    assert err.endswith("\nNo noqa directive added.\n")
    assert _files(bad_project) == before
    code, out, _ = lint_main(capsys)
    assert code == 1 and f"bad.py{FINDING}" in out  # exactly what was listed


def test_a_file_level_finding_is_listed_never_given_a_noqa(bad_project: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    (bad_project / "broken.py").write_text("import multiprocessing\ndef broken(:\n    pass\n")
    code, _, err = lint_main(capsys, "--add-noqa")
    assert code == 1
    assert "broken.py:2:" in err and " GD000 it says a file could not be analysed" in err
    assert (bad_project / "broken.py").read_text() == "import multiprocessing\ndef broken(:\n    pass\n"
    assert err.endswith("Added 1 noqa directive in 1 file.\n")  # bad.py's


def test_an_unused_noqa_is_never_given_one(bad_project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (bad_project / "ok.py").write_text("import multiprocessing as mp\nmp.get_context('spawn')  # noqa: GD101\n")
    code, _, err = lint_main(capsys, "--add-noqa", "ok.py")
    assert code == 1 and "ok.py:2:26: GD001 it concerns a noqa comment" in err
    assert (bad_project / "ok.py").read_text().count("noqa") == 1


def test_a_notebook_is_not_written_and_its_findings_are_listed(bad_project: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """--fix does not write notebooks (fixes/apply.py): neither does --add-noqa."""
    shutil.copy(NOTEBOOKS / "cuda_init_then_pool.ipynb", bad_project / "nb.ipynb")
    before = _files(bad_project)
    code, _, err = lint_main(capsys, "--add-noqa", "nb.ipynb")
    assert code == 1
    assert ("nb.ipynb:cell 4:2:6: GD101 noqa comments are not added to Jupyter notebooks (gpudoctor does not "
            "write them); add it to the cell's line by hand\n") in err
    assert _files(bad_project) == before


@pytest.mark.parametrize("options", [
    ["--fix"], ["--diff"], ["--stdin-filename", "bad.py"], ["-"], ["--statistics"], ["-o", "report.txt"],
    ["--show-files"], ["--show-settings"],
])
def test_options_it_cannot_be_combined_with_are_one_usage_line(bad_project: Path,
                                                               capsys: pytest.CaptureFixture[str],
                                                               options: list[str]) -> None:
    before = _files(bad_project)
    code, out, err = lint_main(capsys, "--add-noqa", *options)
    assert code == 2 and out == ""
    named = "- (stdin)" if options == ["-"] else "--output-file" if options[0] == "-o" else options[0]
    assert err.startswith(f"gpudoctor: error: --add-noqa cannot be combined with {named}")
    assert err.count("\n") == 1
    assert _files(bad_project) == before


def test_files_excluded_or_not_named_are_not_touched(bad_project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("excluded.py", "other.py", "sub/deep.py"):
        (bad_project / name).parent.mkdir(exist_ok=True)
        (bad_project / name).write_text(BAD)
    with (bad_project / "pyproject.toml").open("a") as config:
        config.write('[tool.gpudoctor]\nexclude = ["excluded.py"]\n')
    assert lint_main(capsys, "--add-noqa", "--extend-exclude", "sub", ".")[2] == "Added 2 noqa directives in 2 files.\n"
    for name in ("excluded.py", "sub/deep.py"):
        assert (bad_project / name).read_text() == BAD
    assert lint_main(capsys, "--add-noqa", "--force-exclude", "excluded.py")[2] == (
        "gpudoctor: warning: no Python files found under the given paths\nNo noqa directive to add.\n")
    (bad_project / "bad.py").write_text(BAD)
    assert lint_main(capsys, "--add-noqa", "bad.py")[2] == "Added 1 noqa directive in 1 file.\n"
    assert (bad_project / "excluded.py").read_text() == BAD


def test_the_selection_decides_what_gets_a_noqa(bad_project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert lint_main(capsys, "--add-noqa", "--ignore", "GD101") == (0, "", "No noqa directive to add.\n")
    assert (bad_project / "bad.py").read_text() == BAD


def test_a_read_only_file_is_refused_as_fix_refuses_it(bad_project: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    (bad_project / "bad.py").chmod(0o444)
    code, out, err = lint_main(capsys, "--add-noqa")
    assert (code, out) == (1, "")
    assert err == ("gpudoctor: not adding noqa to bad.py: it is read-only\n"
                   "gpudoctor: 1 finding could not be given a noqa (the next run still reports it):\n"
                   f"bad.py{FINDING}its file was not written\n"
                   "No noqa directive added.\n")
    assert (bad_project / "bad.py").read_text() == BAD


def test_findings_from_the_cache_get_their_noqa(bad_project: Path, capsys: pytest.CaptureFixture[str],
                                                tmp_path_factory: pytest.TempPathFactory) -> None:
    from gpudoctor.cli import main

    cache = ["--cache-dir", str(tmp_path_factory.mktemp("cache"))]
    assert main(["lint", *cache]) == 1
    capsys.readouterr()
    assert main(["lint", "--add-noqa", "-v", *cache]) == 0
    err = capsys.readouterr().err
    assert "0 analysed in this process, 1 from the cache" in err and "Added 1 noqa directive in 1 file." in err
    assert main(["lint", *cache]) == 0


def test_fixing_the_code_later_lets_fix_take_the_noqa_out(bad_project: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert lint_main(capsys, "--add-noqa")[0] == 0
    # The code is fixed (spawn workers, which do not inherit the parent's CUDA): the noqa is
    # now unused (GD001), and GD001's fix takes it out, spaces and all.
    spawn = '    mp.set_start_method("spawn")\n'
    fixed = (bad_project / "bad.py").read_text().replace(POOL, spawn + POOL)
    (bad_project / "bad.py").write_text(fixed)
    code, out, _ = lint_main(capsys)
    assert code == 1 and "bad.py:11:31: GD001 [warning] unused noqa directive for GD101" in out
    assert lint_main(capsys, "--fix", "--unsafe-fixes")[0] == 0
    assert (bad_project / "bad.py").read_text() == BAD.replace(POOL, spawn + POOL)


# -- merging with what the line holds --------------------------------------------------------

@pytest.mark.parametrize(("line", "codes", "expected"), [
    ("f()", {"GD101"}, "f()  # noqa: GD101"),
    ("f()   \t", {"GD101"}, "f()  # noqa: GD101"),
    ("f()", {"GD102", "GD101"}, "f()  # noqa: GD101, GD102"),
    ("f()  # noqa: GD101", {"GD102"}, "f()  # noqa: GD101, GD102"),
    ("f()  # noqa: E501", {"GD101"}, "f()  # noqa: E501, GD101"),
    ("f()  # noqa:E501,W291", {"GD101"}, "f()  # noqa:E501, GD101, W291"),
    ("f()  # NOQA: GD102, E501, GD102", {"GD101"}, "f()  # NOQA: E501, GD101, GD102"),
    ("f()  # noqa: E501 the URL is long", {"GD101"}, "f()  # noqa: E501, GD101 the URL is long"),
    ("f()  # type: ignore  # noqa: E501", {"GD101"}, "f()  # type: ignore  # noqa: E501, GD101"),
    ("f()  # type: ignore", {"GD101"}, "f()  # type: ignore  # noqa: GD101"),
    ("f()  # noqa: fork-safe", {"GD101"}, "f()  # noqa: GD101 fork-safe"),  # named no code: now one
    ("f()  # noqa:", {"GD101"}, "f()  # noqa: GD101"),
    ("f()  # noqa: # why", {"GD101"}, "f()  # noqa: GD101 # why"),
    ("f()  # noqa", {"GD101"}, "f()  # noqa"),  # a bare noqa suppresses everything already
    ("f()  # noqa: gd101", {"GD101"}, "f()  # noqa: gd101"),  # any case, as the engine reads it
    ("f(a,", {"GD101"}, "f(a,  # noqa: GD101"),
])
def test_merging(line: str, codes: set[str], expected: str) -> None:
    text = f"import os\n{line}\n  b)\n" if line.endswith(",") else f"import os\n{line}\nprint(1)\n"
    done = annotate(text, {2: codes})
    assert done.text.split("\n")[1] == expected and not done.refused
    assert done.rows == (frozenset() if expected == line else {2})


def test_only_the_rows_asked_for_change_with_their_line_endings() -> None:
    text = "a = 1\r\nb = 2\rc = 3\n"
    done = annotate(text, {2: {"GD101"}})
    assert done.text == "a = 1\r\nb = 2  # noqa: GD101\rc = 3\n"
    assert annotate("x = 1", {1: {"GD101"}}).text == "x = 1  # noqa: GD101"  # no newline at the end


def test_where_no_comment_can_go() -> None:
    text = 's = f("""\n{1}\n""")\nt = 1 + \\\n    2\nu = """\nv\n'
    done = annotate(text, {1: {"GD101"}, 2: {"GD101"}, 3: {"GD101"}, 4: {"GD101"}, 5: {"GD101"}, 6: {"GD101"},
                           7: {"GD101"}, 9: {"GD101"}})
    assert done.text == text.replace('""")\n', '""")  # noqa: GD101\n').replace("    2\n", "    2  # noqa: GD101\n")
    assert "multi-line string" in done.refused[1] and "multi-line string" in done.refused[2]
    assert "backslash" in done.refused[4]
    assert "tokenizer stops" in done.refused[6] and "tokenizer stops" in done.refused[7]
    assert "not in the file" in done.refused[9]
