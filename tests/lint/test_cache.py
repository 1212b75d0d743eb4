"""The result cache: reused when nothing changed, never when something the result depends on did."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from gpudoctor.cli import main
from gpudoctor.lint.cache import FOLDER, Cache
from gpudoctor.lint.engine import LintResult, lint_paths
from gpudoctor.lint.rules._registry import all_rules
from gpudoctor.lint.selection import build_selection
from gpudoctor.lint.settings import Settings

MAIN = """\
import multiprocessing as mp

import cupy as cp
from helpers import prepare


def work(i):
    return float(cp.arange(i).sum())


if __name__ == "__main__":
    prepare()
    with mp.Pool(2) as pool:
        pool.map(work, range(4))
"""
HARMLESS = "def prepare():\n    return None\n"  # the parent never touches the GPU
GPU_INIT = "import cupy as cp\n\n\ndef prepare():\n    cp.ones(3)\n"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "main.py").write_text(MAIN)
    (tmp_path / "helpers.py").write_text(HARMLESS)
    return tmp_path


def run(root: Path, minor: int = 12) -> LintResult:
    codes = [r.code for r in all_rules()]
    settings = Settings(build_selection(codes, ["GD101"]), minor, "linux", root)
    cache = Cache(root, f"py3{minor}|linux|{root}")
    files = sorted(root.glob("*.py"))
    return lint_paths(files, settings, cache=cache)


def codes(result: LintResult) -> set[tuple[str, str, int]]:
    return {(f.code, Path(f.site.path).name, f.site.row) for f in result.findings}


def test_second_run_reuses_every_result(project: Path) -> None:
    (project / "helpers.py").write_text(GPU_INIT)
    first = run(project)
    second = run(project)
    assert (first.analysed, first.cached) == (1, 0)
    assert (second.analysed, second.cached) == (0, 1)
    assert codes(first) == codes(second) == {("GD101", "main.py", 13)}
    assert second.findings == first.findings  # messages, related sites, fixes: all of it
    # The init is in another file: the message names it by file, not by a bare line number.
    assert "(cupy.ones, helpers.py:5)" in first.findings[0].message


def test_a_changed_dependency_invalidates_the_result(project: Path) -> None:
    assert codes(run(project)) == set()
    (project / "helpers.py").write_text(GPU_INIT)  # main.py itself is unchanged
    again = run(project)
    assert again.analysed == 1
    assert codes(again) == {("GD101", "main.py", 13)}
    (project / "helpers.py").write_text(HARMLESS)
    assert codes(run(project)) == set()


def test_a_new_module_that_changes_what_an_import_means_invalidates(project: Path) -> None:
    (project / "helpers.py").unlink()
    (project / "pkg").mkdir()
    (project / "main.py").write_text(MAIN.replace("from helpers import", "from pkg.helpers import"))
    assert codes(run(project)) == set()  # pkg.helpers does not exist: nothing known
    (project / "pkg" / "helpers.py").write_text(GPU_INIT)
    assert codes(run(project)) == {("GD101", "main.py", 13)}


def test_settings_that_change_the_analysis_have_their_own_results(project: Path) -> None:
    (project / "helpers.py").write_text(GPU_INIT)
    assert codes(run(project, minor=12)) == {("GD101", "main.py", 13)}
    on_314 = run(project, minor=14)  # forkserver by default: another answer, not the cached one
    assert on_314.analysed == 1 and "GD101" not in {c for c, _, _ in codes(on_314)}


def test_the_cache_folder_is_ignored_by_git_and_tagged(project: Path) -> None:
    assert main(["lint", "--select", "GD101", "."]) == 0
    folder = project / FOLDER
    assert (folder / ".gitignore").read_text() == "*\n"
    assert (folder / "CACHEDIR.TAG").read_text().startswith("Signature: 8a477f597d28d172789f06886806bc55")
    stores = list(folder.glob("*/*.json"))
    assert stores and all(json.loads(p.read_text()) is not None for p in stores)  # JSON, not pickle


def test_no_cache_reads_and_writes_nothing(project: Path) -> None:
    assert main(["lint", "--no-cache", "--select", "GD101", "."]) == 0
    assert not (project / FOLDER).exists()


def test_cache_dir_option(project: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    elsewhere = tmp_path_factory.mktemp("cache")
    assert main(["lint", "--cache-dir", str(elsewhere), "--select", "GD101", "."]) == 0
    assert (elsewhere / ".gitignore").exists() and not (project / FOLDER).exists()


def test_selection_is_applied_after_the_cache(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / "helpers.py").write_text(GPU_INIT)
    assert main(["lint", "--select", "GD101", "."]) == 1
    assert main(["lint", "--select", "GD3", "."]) == 0  # the same cached results, other rules shown
    assert main(["lint", "--select", "GD101", "."]) == 1
    assert capsys.readouterr().out.count("GD101") == 2


def test_a_damaged_cache_is_rebuilt(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / "helpers.py").write_text(GPU_INIT)
    assert main(["lint", "."]) == 1
    for store in (project / FOLDER).glob("*/*.json"):
        store.write_text("{not json")
    assert main(["lint", "."]) == 1
    assert capsys.readouterr().out.count("GD101") == 2


@pytest.mark.parametrize("damage", ["[]", '{"a": 1}', '{"settings": null, "files": []}', '{"x": [1, 2]}'])
def test_a_cache_of_the_wrong_shape_is_rebuilt(project: Path, capsys: pytest.CaptureFixture[str],
                                               damage: str) -> None:
    """Valid JSON that is not what gpudoctor wrote (an older layout, a hand edit)."""
    (project / "helpers.py").write_text(GPU_INIT)
    assert main(["lint", "."]) == 1
    capsys.readouterr()
    for store in (project / FOLDER).glob("*/*.json"):
        store.write_text(damage)
    assert main(["lint", "."]) == 1
    assert capsys.readouterr().out.count("GD101") == 1
    for store in (project / FOLDER).glob("*/results-*.json"):  # right shape, entries wrong
        data = json.loads(store.read_text())
        data["files"] = {path: {"called_elsewhere": 3} for path in data["files"]}
        data["plan"] = {"key": data["plan"]["key"], "files": 1}
        store.write_text(json.dumps(data))
    assert main(["lint", "."]) == 1
    assert capsys.readouterr().out.count("GD101") == 1


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write to a read-only folder")
def test_an_unwritable_cache_is_a_warning(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / FOLDER).mkdir()
    (project / FOLDER).chmod(0o500)
    try:
        assert main(["lint", "--select", "GD101", "."]) == 0
    finally:
        (project / FOLDER).chmod(0o700)
    assert "cannot write the cache" in capsys.readouterr().err


def test_an_unwritable_cache_location_is_a_warning(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blocker = project / "not-a-folder"
    blocker.write_text("a file where the cache folder should go\n")
    assert main(["lint", "--cache-dir", str(blocker / "cache"), "--select", "GD101", "."]) == 0
    err = capsys.readouterr().err
    assert "cannot write the cache" in err and "--no-cache" in err


RUN_POOL = """\
import multiprocessing as mp

import cupy as cp


def run_pool(fn):
    with mp.Pool(2) as pool:
        return pool.map(fn, range(2))
"""
CALLER = """\
import multiprocessing as mp

import cupy as cp
from helpers import run_pool


def work(i):
    return float(cp.ones(i).sum())


if __name__ == "__main__":
    mp.set_start_method("spawn")
    cp.ones(1)
    run_pool(work)
"""


def test_a_function_another_linted_file_imports_is_judged_in_its_callers_context(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "helpers.py").write_text(RUN_POOL)
    (tmp_path / "main.py").write_text(CALLER)
    # main.py sets spawn before calling run_pool: the pool in helpers.py is fine there.
    assert main(["lint", "."]) == 0
    # Once nothing imports run_pool, it is judged on its own: a default (fork) pool next
    # to CuPy. The cached result of helpers.py must not survive that change in main.py.
    (tmp_path / "main.py").write_text(CALLER.replace("from helpers import run_pool", "run_pool = print"))
    assert main(["lint", "."]) == 1
    assert "helpers.py:7:10: GD103" in capsys.readouterr().out


def _analysed_alone(root: Path, name: str) -> int:
    """Lint only ``root/name`` (as pre-commit does), with the cache: 1 if it was analysed
    or its result reused, 0 if the gate left it out."""
    codes = [r.code for r in all_rules()]
    settings = Settings(build_selection(codes, codes), 12, "linux", root)
    result = lint_paths([root / name], settings, cache=Cache(root, "key"))
    return result.analysed + result.cached


def test_the_plan_follows_a_module_outside_the_linted_files(tmp_path: Path) -> None:
    # Only a.py is linted (as pre-commit does). Whether it is worth analysing depends on
    # b.py, which it imports: the cached plan must notice when b.py starts a pool.
    (tmp_path / "a.py").write_text("import cupy as cp\n\nfrom b import run\n\n\n"
                                   "def work(i):\n    return float(cp.ones(i).sum())\n\n\nrun(work)\n")
    (tmp_path / "b.py").write_text("def run(f):\n    return [f(i) for i in range(3)]\n")

    def analysed() -> int:
        return _analysed_alone(tmp_path, "a.py")

    assert analysed() == 0
    assert analysed() == 0
    (tmp_path / "b.py").write_text("import multiprocessing as mp\n\n\ndef run(f):\n"
                                   "    with mp.Pool(2) as pool:\n        return pool.map(f, range(3))\n")
    assert analysed() == 1


def test_a_run_with_nothing_new_writes_nothing(project: Path) -> None:
    (project / "helpers.py").write_text(GPU_INIT)
    run(project)
    stores = sorted((project / FOLDER).glob("*/*.json"))
    before = [p.stat().st_mtime_ns for p in stores]
    assert run(project).cached == 1
    assert [p.stat().st_mtime_ns for p in stores] == before  # pre-commit runs leave the disk alone


def test_a_module_reached_through_a_package_init_invalidates(tmp_path: Path) -> None:
    """``import pkg`` runs pkg/kernels.py through pkg/__init__.py: editing kernels.py so
    that it initializes CuPy must change the cached result of main.py."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("from . import kernels\n")
    (tmp_path / "pkg" / "kernels.py").write_text("X = 1\n")
    (tmp_path / "main.py").write_text(
        "import multiprocessing as mp\nimport cupy as cp\nimport pkg\n\n\n"
        "def work(x):\n    return float(cp.sum(cp.asarray(x)))\n\n\n"
        "if __name__ == '__main__':\n    with mp.Pool(2) as pool:\n        pool.map(work, [1])\n")
    assert "GD101" not in {code for code, _, _ in codes(run(tmp_path))}
    (tmp_path / "pkg" / "kernels.py").write_text("import cupy as cp\n\ncp.ones(1)\n")
    assert "GD101" in {code for code, _, _ in codes(run(tmp_path))}


def test_the_plan_notices_a_handed_on_function_that_starts_processes(tmp_path: Path) -> None:
    """a.py imports ``run`` from package pkg, whose ``__init__`` takes it from pkg/impl.py.
    Whether a.py is worth analysing depends on both: the cached plan must notice when
    impl.py's ``run`` starts a pool, and when the ``__init__`` hands on another ``run``."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("from .impl import run\n")
    (tmp_path / "pkg" / "impl.py").write_text("import multiprocessing\n\n\ndef run(f):\n"
                                              "    return [f(i) for i in range(3)]\n")
    (tmp_path / "pkg" / "other.py").write_text("def run(f):\n    return [f(i) for i in range(3)]\n")
    (tmp_path / "a.py").write_text("import cupy as cp\n\nfrom pkg import run\n\n\n"
                                   "def work(i):\n    return float(cp.ones(i).sum())\n\n\nrun(work)\n")

    def analysed() -> int:
        return _analysed_alone(tmp_path, "a.py")

    assert analysed() == 0
    (tmp_path / "pkg" / "impl.py").write_text("import multiprocessing as mp\n\n\ndef run(f):\n"
                                              "    with mp.Pool(2) as pool:\n        return pool.map(f, range(3))\n")
    assert analysed() == 1
    assert analysed() == 1
    (tmp_path / "pkg" / "__init__.py").write_text("from .other import run\n")
    assert analysed() == 0
