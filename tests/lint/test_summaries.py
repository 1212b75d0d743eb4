"""Module summaries kept in the cache: a run after an edit of one file reads the modules it
imports from their summaries, with the same findings as a run that walks them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpudoctor.lint import cache as cache_module
from gpudoctor.lint.cache import Cache
from gpudoctor.lint.engine import LintResult, lint_paths
from gpudoctor.lint.frontend import parsed as parsing
from gpudoctor.lint.rules._registry import all_rules
from gpudoctor.lint.selection import build_selection
from gpudoctor.lint.settings import Settings
from tests.lint.test_cache import (
    home,  # noqa: F401  (autouse: the cache key is made in a home of the test's own)
    reseal,
)

MAIN = """\
import multiprocessing as mp

import cupy as cp
from helpers import DEVICE, Holder, prepare


def work(i):
    return float(cp.arange(i).sum())


if __name__ == "__main__":
    prepare()
    Holder().run(DEVICE)
    with mp.Pool(2) as pool:
        pool.map(work, range(4))
"""
# Only names of helpers are read: its summary is enough, helpers.py is not parsed.
READER = """\
import multiprocessing as mp

from helpers import DEVICE


def work(i):
    return i


if __name__ == "__main__":
    print(DEVICE)
    with mp.Pool(2) as pool:
        pool.map(work, range(4))
"""
HELPERS = """\
import os

import cupy as cp

os.environ["CUDA_VISIBLE_DEVICES"] = "0"
DEVICE = "cuda"


def prepare():
    cp.ones(3)


class Holder:
    def run(self, device):
        return device
"""
HARMLESS = HELPERS.replace("    cp.ones(3)\n", "    return None\n")


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "main.py").write_text(MAIN)
    (tmp_path / "reader.py").write_text(READER)
    (tmp_path / "helpers.py").write_text(HELPERS)
    return tmp_path


def run(root: Path, name: str = "main.py", cached: bool = True) -> LintResult:
    codes = [r.code for r in all_rules()]
    settings = Settings(build_selection(codes, codes), 12, "linux", root)
    cache = Cache(root, f"py312|linux|{root}") if cached else None
    return lint_paths([root / name], settings, cache=cache)


def shown(result: LintResult) -> list[tuple[str, str, int, int, str]]:
    return [(f.code, Path(f.site.path).name, f.site.row, f.site.col, f.message) for f in result.findings]


def edit(path: Path) -> None:
    """An edit that changes the file's bytes and none of its findings."""
    path.write_text(path.read_text() + "# edited\n")


def walks_store(root: Path) -> Path:
    """The file of helpers.py's summaries."""
    (store,) = [p for p in root.glob(".gpudoctor_cache/*/walks-*.json") if "helpers.py" in p.read_text()]
    return store


@pytest.fixture
def parsed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The files parsed with libcst from now on, by name."""
    names: list[str] = []
    real = parsing.parse

    def counting(path: str, *args: object, **kwargs: object) -> object:
        names.append(Path(path).name)
        return real(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(parsing, "parse", counting)
    return names


def test_round_trip_gives_the_findings_of_a_walk(project: Path, parsed: list[str]) -> None:
    walked = shown(run(project, cached=False))
    assert any(code == "GD101" for code, *_ in walked)  # prepare() initializes CUDA before the pool
    assert shown(run(project)) == walked  # summaries made
    edit(project / "main.py")
    parsed.clear()
    assert shown(run(project)) == walked  # summaries read back; prepare's body parsed when called
    assert parsed == ["main.py", "helpers.py"]


def test_a_module_only_read_by_name_is_not_parsed(project: Path, parsed: list[str]) -> None:
    walked = shown(run(project, "reader.py", cached=False))
    run(project, "reader.py")
    edit(project / "reader.py")
    parsed.clear()
    assert shown(run(project, "reader.py")) == walked
    assert parsed == ["reader.py"]


def test_a_module_walked_again_keeps_what_it_imports_unparsed(project: Path, parsed: list[str]) -> None:
    # reader -> middle -> helpers: after an edit of middle, helpers is still read back
    # from its summary, for middle's walk and for middle's new summary.
    (project / "middle.py").write_text("import cupy\nfrom helpers import DEVICE, Holder, prepare\n")
    (project / "reader.py").write_text(READER.replace("from helpers import DEVICE", "from middle import DEVICE"))
    walked = shown(run(project, "reader.py", cached=False))
    run(project, "reader.py")
    edit(project / "middle.py")
    parsed.clear()
    assert shown(run(project, "reader.py")) == walked
    assert sorted(parsed) == ["middle.py", "reader.py"]
    edit(project / "reader.py")
    parsed.clear()
    assert shown(run(project, "reader.py")) == walked
    assert parsed == ["reader.py"]


def test_a_change_in_an_imported_module_is_seen(project: Path) -> None:
    assert any(code == "GD101" for code, *_ in shown(run(project)))
    (project / "helpers.py").write_text(HARMLESS)
    edit(project / "main.py")
    after = shown(run(project))
    assert after == shown(run(project, cached=False))
    assert not any(code == "GD101" for code, *_ in after)


def test_a_foreign_summary_is_ignored(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    walked = shown(run(project, cached=False))
    run(project)
    store = walks_store(project)
    data = json.loads(store.read_bytes().split(b"\n", 1)[1])
    for entry in data["entries"]:
        entry["state"] = {"env": [["x", [["no such value"]]]]}
        entry["effects"] = "junk"
    reseal(store, data)
    edit(project / "main.py")
    assert shown(run(project)) == walked
    (project / "main.py").write_text(MAIN + "# again\n")
    store.write_bytes(b"not sealed\n{}")
    assert shown(run(project)) == walked
    assert "ignoring a module summary" in capsys.readouterr().err


def test_the_store_is_bounded(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for index in range(6):
        (project / f"extra{index}.py").write_text(f"import cupy\nDEVICE = {index}\n")
        user = READER.replace("from helpers import DEVICE", f"from extra{index} import DEVICE")
        (project / f"use{index}.py").write_text(user)
    monkeypatch.setattr(cache_module, "MAX_SUMMARY_FILES", 3)
    for index in range(6):
        run(project, f"use{index}.py")
    kept = [json.loads(p.read_bytes().split(b"\n", 1)[1])["key"].split("\0")[0]
            for p in project.glob(".gpudoctor_cache/*/walks-*.json")]
    assert sorted(Path(p).name for p in kept) == ["extra3.py", "extra4.py", "extra5.py"]  # the latest runs'


def test_a_run_of_many_files_writes_no_summaries(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cache_module, "SUMMARY_MAX_FILES", 0)
    run(project)
    assert not list(project.glob(".gpudoctor_cache/*/walks-*.json"))


def test_a_run_that_reuses_every_result_loads_no_parser(project: Path) -> None:
    # The warm whole-project run: neither libcst nor the analysis is imported.
    code = ("import sys; from gpudoctor.cli import main; main(['lint', '--exit-zero', 'main.py']);"
            "print('LIBCST', 'libcst' in sys.modules)")
    subprocess.run([sys.executable, "-c", code], cwd=project, capture_output=True, text=True, check=True)
    warm = subprocess.run([sys.executable, "-c", code], cwd=project, capture_output=True, text=True, check=True)
    assert warm.stdout.strip().endswith("LIBCST False"), warm.stdout + warm.stderr


@pytest.mark.skipif(sys.platform == "win32", reason="symbolic links need privileges on Windows")
def test_a_link_pointed_elsewhere_is_seen(project: Path) -> None:
    # main -> middle -> link.py, a link: pointing it to another file changes what middle
    # imports while every name listed and every file read stays the same.
    (project / "main.py").write_text(MAIN.replace("from helpers import DEVICE, Holder, prepare",
                                                  "from middle import DEVICE, Holder, prepare"))
    (project / "middle.py").write_text("import cupy\nfrom link import DEVICE, Holder, prepare\n")
    (project / "harmless.py").write_text(HARMLESS)
    (project / "link.py").symlink_to("helpers.py")
    assert any(code == "GD101" for code, *_ in shown(run(project)))
    (project / "link.py").unlink()
    (project / "link.py").symlink_to("harmless.py")
    after = shown(run(project))  # main.py unchanged: its result is not reused either
    assert after == shown(run(project, cached=False))
    assert not any(code == "GD101" for code, *_ in after)
    edit(project / "main.py")
    assert shown(run(project)) == after


def test_an_exclusion_changes_the_callers_looked_at(project: Path) -> None:
    # pools.py alone has a finding only through main.py, its caller: excluding main.py (an
    # ``exclude`` added to pyproject.toml) changes the plan though no file it read changed.
    (project / "pools.py").write_text("import multiprocessing as mp\n\n\ndef make_pool():\n    return mp.Pool(2)\n")
    (project / "main.py").write_text(MAIN.replace("mp.Pool(2)", "make_pool()").replace(
        "from helpers", "from pools import make_pool\nfrom helpers"))
    codes = [r.code for r in all_rules()]

    def lint(exclude: tuple[str, ...], cached: bool = True) -> list[tuple[str, str, int, int, str]]:
        settings = Settings(build_selection(codes, codes), 12, "linux", project, exclude=exclude)
        cache = Cache(project, f"py312|linux|{project}") if cached else None
        return shown(lint_paths([project / "pools.py"], settings, cache=cache))

    assert any(code == "GD101" for code, *_ in lint(()))
    assert lint(("main.py",)) == lint(("main.py",), cached=False) == []
    assert lint(()) == lint((), cached=False)


def _pools_called_from_main(project: Path) -> None:
    (project / "pools.py").write_text("import multiprocessing as mp\n\n\ndef make_pool():\n    return mp.Pool(2)\n")
    (project / "main.py").write_text(MAIN.replace("mp.Pool(2)", "make_pool()").replace(
        "from helpers", "from pools import make_pool\nfrom helpers"))


def test_a_gitignore_changes_the_callers_looked_at(project: Path) -> None:
    # A .gitignore (none before) that lists main.py: pools.py's only caller is no longer
    # the project's.
    _pools_called_from_main(project)
    assert any(code == "GD101" for code, *_ in shown(run(project, "pools.py")))
    (project / ".gitignore").write_text("main.py\n")
    assert shown(run(project, "pools.py")) == shown(run(project, "pools.py", cached=False)) == []


def test_a_new_notebook_caller_is_seen(project: Path) -> None:
    _pools_called_from_main(project)
    caller = (project / "main.py").read_text()
    (project / "main.py").unlink()
    assert shown(run(project, "pools.py")) == []
    cell = {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
            "source": caller.splitlines(keepends=True)}
    (project / "caller.ipynb").write_text(json.dumps({"cells": [cell], "metadata": {}, "nbformat": 4,
                                                      "nbformat_minor": 5}))
    after = shown(run(project, "pools.py"))
    assert after == shown(run(project, "pools.py", cached=False))
    assert any(code == "GD101" for code, *_ in after)
