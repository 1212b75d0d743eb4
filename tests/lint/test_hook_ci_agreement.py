"""The pre-commit hook and CI must agree: a file linted alone (the hook names the changed
files) reports the findings located in it that linting the whole project reports.

Findings in a file come from its own analysis and from the analyses of the files that use
it (a caller's start method, the CUDA it initialized, what it passes): a run naming some
files analyses those callers too, for their context (gpudoctor/lint/callers.py). And a
function's findings do not depend on who imports it: an import or a re-export is not a
call.

Two differences are right, and are the only ones allowed:

- **Re-homed findings** (rehoming.py): a finding the linted file's analysis makes in a
  module that is not linted is shown at the call or import in the linted file that
  reaches it ("this call reaches pools.py:5: ..."; its first related location says
  "where it happens, reached through ..."). The whole-project run shows it in that module.
- **An unparseable module reached by an import** (file_analysis.py): GD000 at the import in the
  linted file ("helpers.py cannot be parsed, so gpudoctor cannot follow this import"),
  whose first related location is the module. The whole-project run reports GD000 in the
  module itself, once, and not at the import.
"""

from __future__ import annotations

import textwrap
from dataclasses import replace
from pathlib import Path

import pytest

from gpudoctor.lint import callers
from gpudoctor.lint.analysis.project import Project
from gpudoctor.lint.cache import Cache
from gpudoctor.lint.engine import LintResult, lint_paths
from gpudoctor.lint.findings import Finding
from gpudoctor.lint.limits import DEFAULT_LIMITS, Limits
from gpudoctor.lint.rules._registry import all_rules
from gpudoctor.lint.selection import build_selection
from gpudoctor.lint.settings import Settings
from tests.lint.expectations import FIXTURES, Case, settings_for

PROJECTS = sorted(p for p in (FIXTURES / "projects").iterdir() if p.is_dir())


def _key(finding: Finding) -> tuple[object, ...]:
    """A finding as text, its places as real paths (each run writes them as it was named)."""
    return (finding.code, str(Path(finding.site.path).resolve()), finding.site.row, finding.site.col,
            finding.message, finding.severity,
            tuple((str(Path(r.site.path).resolve()), r.site.row, r.site.col, r.message) for r in finding.related))


def _allowed(finding: Finding) -> bool:
    """One of the two documented differences of a run that does not name every file."""
    first = finding.related[0].message if finding.related else ""
    rehomed = first.startswith("where it happens, reached through the ")
    unparseable_import = finding.code == "GD000" and "so gpudoctor cannot follow this import" in finding.message
    return rehomed or unparseable_import


def _in(findings: list[Finding], files: list[Path]) -> list[tuple[object, ...]]:
    wanted = {str(f.resolve()) for f in files}
    return sorted(_key(f) for f in findings if str(Path(f.site.path).resolve()) in wanted and not _allowed(f))


def _checked(files: list[Path], case: Case) -> LintResult:
    result = lint_paths(files, settings_for(case))
    assert not result.internal_errors, result.internal_errors
    assert not result.warnings, result.warnings  # no context left out: fixtures are small
    return result


@pytest.mark.parametrize("root", PROJECTS, ids=[p.name for p in PROJECTS])
def test_each_file_alone_reports_what_the_project_run_reports_in_it(root: Path) -> None:
    case = Case(root)
    whole = _checked(case.files, case)
    for file in case.files:
        alone = _checked([file], case)
        assert _in(alone.findings, [file]) == _in(whole.findings, [file]), case.name_of(file)


@pytest.mark.parametrize("root", PROJECTS, ids=[p.name for p in PROJECTS])
def test_all_files_but_one_report_what_the_project_run_reports_in_them(root: Path) -> None:
    """The hook names several changed files; the one left out is a caller or a callee."""
    case = Case(root)
    whole = _checked(case.files, case)
    for left_out in case.files:
        named = [f for f in case.files if f != left_out]
        if named:
            assert _in(_checked(named, case).findings, named) == _in(whole.findings, named), case.name_of(left_out)


# -- the mechanism, on small projects ---------------------------------------------------------

WORK = """\
import multiprocessing as mp
import torch


def shard(i):
    return torch.ones(i, device="cuda").sum().item()


def run():
    torch.cuda.is_available()
    with mp.Pool(2) as pool:  # noqa: GD101
        return pool.map(shard, range(4))
"""
SPAWN_CALLER = """\
import multiprocessing as mp
from pkg.work import run

if __name__ == "__main__":
    mp.set_start_method("spawn")
    run()
"""
FORK_CALLER = """\
from pkg.work import run

if __name__ == "__main__":
    run()
"""


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")


def _lint(root: Path, named: list[str], cache: Cache | None = None, limits: Limits = DEFAULT_LIMITS) -> LintResult:
    codes = [r.code for r in all_rules()]
    result = lint_paths([root / n for n in named], Settings(build_selection(codes, codes), 12, "linux", root),
                        cache=cache, limits=limits)
    assert not result.internal_errors, result.internal_errors
    return result


def _codes(result: LintResult) -> list[tuple[str, str, int]]:
    return [(f.code, Path(f.site.path).name, f.site.row) for f in result.findings]


def test_an_import_or_a_re_export_is_not_a_use(tmp_path: Path) -> None:
    _write(tmp_path, {
        "pkg/__init__.py": "from pkg.work import run\n",  # hands it on, never calls it
        "pkg/work.py": WORK,
        "main.py": "from pkg import run\n\nif __name__ == '__main__':\n    run()\n",  # calls it
        "other.py": "from pkg.work import shard\n",  # imports, never uses
    })
    project = Project(tmp_path)
    work, init = project.real(tmp_path / "pkg/work.py"), project.real(tmp_path / "pkg/__init__.py")
    files = [project.real(tmp_path / n) for n in ("pkg/__init__.py", "pkg/work.py", "main.py", "other.py")]
    used = callers.used_names(project, [work, init], files)
    assert used[work] == {"run"}  # main.py's call through the package, not other.py's import
    assert used[init] == {"run"}



def test_uses_only_from_a_ring_of_functions_are_not_uses(tmp_path: Path) -> None:
    """a.run and b.run call each other and nothing else calls them: no analysis would run
    them as called, so each stays with its own module. c.run is called by d.run, which
    main.py calls at its top level: both are run by main's analysis."""
    _write(tmp_path, {
        "a.py": "import b\n\n\ndef run():\n    b.run()\n",
        "b.py": "import a\n\n\ndef run():\n    a.run()\n",
        "c.py": "import d\n\n\ndef run():\n    d.run()\n",
        "d.py": "import c\n\n\ndef run():\n    c.run()\n",
        "main.py": "import d\n\nd.run()\n",
    })
    project = Project(tmp_path)
    files = [project.real(tmp_path / f"{n}.py") for n in ("a", "b", "c", "d", "main")]
    used = callers.used_names(project, files, files)
    a, b, c, d, _ = (used[f] for f in files)
    assert "run" not in a | b and "run" in c and "run" in d  # (any name d reads counts: c is one)


def test_a_function_no_file_calls_is_analysed_on_its_own(tmp_path: Path) -> None:
    """A library function: the target's default start method (fork on Linux up to 3.13)."""
    _write(tmp_path, {"pkg/__init__.py": "", "pkg/work.py": WORK.replace("  # noqa: GD101", "")})
    assert _codes(_lint(tmp_path, ["pkg/work.py"])) == [("GD101", "work.py", 11)]


def test_a_new_caller_that_chooses_spawn_is_seen_through_the_cached_plan(tmp_path: Path) -> None:
    """The plan of a run naming some files depends on every file of the project: a caller
    added since the last run is found (the folder listing changed)."""
    _write(tmp_path, {"pkg/__init__.py": "", "pkg/work.py": WORK.replace("  # noqa: GD101", "")})
    assert _codes(_lint(tmp_path, ["pkg/work.py"], Cache(tmp_path, "key"))) == [("GD101", "work.py", 11)]
    _write(tmp_path, {"main.py": SPAWN_CALLER})
    assert _codes(_lint(tmp_path, ["pkg/work.py"], Cache(tmp_path, "key"))) == []
    _write(tmp_path, {"bench.py": FORK_CALLER})  # a second caller that does not choose
    result = _lint(tmp_path, ["pkg/work.py"], Cache(tmp_path, "key"))
    assert _codes(result) == [("GD101", "work.py", 11)]
    assert result.context == 2
    assert _codes(_lint(tmp_path, ["pkg/work.py"], Cache(tmp_path, "key"))) == [("GD101", "work.py", 11)]


def test_context_over_the_budget_is_said_and_makes_up_nothing(tmp_path: Path) -> None:
    """Past the budget some callers are not analysed: the run says so, reports no unused
    noqa (the finding it was written for may come from a caller left out), and runs no
    function those callers use on its own (that could make up a finding)."""
    _write(tmp_path, {"pkg/__init__.py": "", "pkg/work.py": WORK,
                      "a_main.py": SPAWN_CALLER, "z_bench.py": FORK_CALLER})
    assert _codes(_lint(tmp_path, ["pkg/work.py"])) == []  # GD101 from z_bench.py, under its noqa
    result = _lint(tmp_path, ["pkg/work.py"], limits=replace(DEFAULT_LIMITS, max_context_chars=1))
    assert result.context == 1  # a_main.py, the nearest by name
    assert _codes(result) == []  # neither GD101 made up nor GD001 for the noqa
    assert any("not all analysed for their context" in w for w in result.warnings)
