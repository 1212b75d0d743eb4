"""The result cache: reused when nothing changed, never when something the result depends on did."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest

from gpudoctor.cli import main
from gpudoctor.lint import cache_seal
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


@pytest.fixture(autouse=True)
def home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home of the test's own: the cache key is made there, never in the real user's."""
    folder = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(folder))
    monkeypatch.setenv("XDG_CACHE_HOME", str(folder / ".cache"))
    return folder


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "main.py").write_text(MAIN)
    (tmp_path / "helpers.py").write_text(HARMLESS)
    return tmp_path


def body(store: Path) -> bytes:
    """A store file's JSON, without the seal line in front of it."""
    return store.read_bytes().split(b"\n", 1)[1]


def reseal(store: Path, data: object) -> None:
    """Write ``data`` into ``store`` sealed with this user's key, as gpudoctor would."""
    key = cache_seal.user_key()
    assert isinstance(key, bytes)
    store.write_bytes(cache_seal.seal(key, f"{store.parent.name}/{store.name}", json.dumps(data).encode()))


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
    assert stores and all(json.loads(body(p)) is not None for p in stores)  # JSON, not pickle


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
        data = json.loads(body(store))
        data["files"] = {path: {"called_elsewhere": 3} for path in data["files"]}
        data["plan"] = {"key": data["plan"]["key"], "files": 1}
        reseal(store, data)  # as if gpudoctor had written it: the entries are checked too
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


def ones(i):
    return float(cp.ones(i).sum())


def run_pool():
    with mp.Pool(2) as pool:
        return pool.map(ones, range(2))
"""
CALLER = """\
import multiprocessing as mp

import cupy as cp
from helpers import run_pool


if __name__ == "__main__":
    mp.set_start_method("spawn")
    cp.ones(1)
    run_pool()
"""


def test_a_function_another_linted_file_imports_is_judged_in_its_callers_context(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "helpers.py").write_text(RUN_POOL)
    (tmp_path / "main.py").write_text(CALLER)
    # main.py sets spawn before calling run_pool: the pool in helpers.py is fine there.
    assert main(["lint", "."]) == 0
    # Once nothing imports run_pool, it is judged on its own: a default (fork) pool
    # whose workers use CuPy. The cached result of helpers.py must not survive that change in main.py.
    (tmp_path / "main.py").write_text(CALLER.replace("from helpers import run_pool", "run_pool = print"))
    assert main(["lint", "."]) == 1
    assert "helpers.py:11:10: GD103" in capsys.readouterr().out


TRAINER = """\
import multiprocessing as mp

import torch


def square(x):
    return float(torch.ones(1).cuda() * x)


class Trainer:
    def fit(self):
        torch.zeros(1).cuda()
        with mp.Pool(2) as pool:
            return pool.map(square, range(4))
"""
# Uses Trainer, and reaches Trainer.fit only through a name known at run time.
LAUNCH = """\
import sys

import torch

from trainer import Trainer

if __name__ == "__main__":
    torch.zeros(1).cuda()
    getattr(Trainer(), sys.argv[1])()
"""


def test_a_method_no_caller_reaches_is_found_warm_as_cold_and_follows_the_callers_edits(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "trainer.py").write_text(TRAINER)
    (tmp_path / "launch.py").write_text(LAUNCH)
    codes = [r.code for r in all_rules()]
    settings = Settings(build_selection(codes, ["GD101"]), 12, "linux", tmp_path)

    def lint() -> LintResult:
        files = sorted(tmp_path.glob("*.py"))
        return lint_paths(files, settings, cache=Cache(tmp_path, "key"))

    # No analysis of launch.py reaches Trainer.fit: trainer.py analyses it on its own.
    cold, warm = lint(), lint()
    assert [(f.code, Path(f.site.path).name, f.site.row) for f in cold.findings] == [("GD101", "trainer.py", 13)]
    assert warm.findings == cold.findings and (warm.analysed, warm.cached) == (0, 2)
    # launch.py now calls it, after choosing spawn: judged there, no finding; and back.
    spawned = LAUNCH.replace("    getattr(Trainer(), sys.argv[1])()",
                             '    mp.set_start_method("spawn")\n    Trainer().fit()')
    (tmp_path / "launch.py").write_text("import multiprocessing as mp\n" + spawned)
    assert lint().findings == []
    (tmp_path / "launch.py").write_text(LAUNCH)
    assert lint().findings == cold.findings


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


# -- what the cache may delete and write: only what gpudoctor can prove it made ------------

def user_tree(top: Path) -> None:
    """Folders a user cares about: a project's, or a cache folder of other tools."""
    for name, text in {"src/pkg/__init__.py": "X = 1\n", "tests/test_x.py": "def test(): pass\n",
                       ".git/HEAD": "ref: refs/heads/main\n", ".git/objects/ab/cdef": "blob",
                       ".gitignore": "build/\n", "README": "my project\n", "notes/CACHEDIR.TAG": "mine\n",
                       # named like a version folder of gpudoctor's, holding what its versions hold
                       "0.0.1-0123456789abcdef/facts.json": "{}"}.items():
        (top / name).parent.mkdir(parents=True, exist_ok=True)
        (top / name).write_text(text)
    (top / "src" / "link").symlink_to(top / "tests")


def snapshot(top: Path) -> dict[str, tuple[str, object, int]]:
    """Every entry under ``top`` (links as links): kind, content or target, mode."""
    found: dict[str, tuple[str, object, int]] = {}
    for folder, dirs, files in os.walk(top):  # does not descend into linked folders
        for name in dirs + files:
            path = Path(folder) / name
            info = path.lstat()
            where = str(path.relative_to(top))
            if stat.S_ISLNK(info.st_mode):
                found[where] = ("link", os.readlink(path), 0)
            elif stat.S_ISDIR(info.st_mode):
                found[where] = ("folder", None, info.st_mode)
            else:
                found[where] = ("file", path.read_bytes(), info.st_mode)
    return found


def assert_kept(before: dict[str, tuple[str, object, int]], top: Path, new_under: str | None) -> None:
    """Nothing of ``before`` changed or went; anything new is under ``new_under``."""
    after = snapshot(top)
    assert {k: v for k, v in after.items() if k in before} == before
    assert set(before) <= set(after)
    added = set(after) - set(before)
    assert all(new_under is not None and (a == new_under or a.startswith(new_under + os.sep))
               for a in added), sorted(added)


def test_cache_dir_dot_keeps_every_user_file(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / "helpers.py").write_text(GPU_INIT)
    user_tree(project)
    before = snapshot(project)
    assert main(["lint", "--cache-dir", ".", "--select", "GD101", "."]) == 1
    assert_kept(before, project, FOLDER)
    err = capsys.readouterr().err
    assert f"--cache-dir . holds files that are not gpudoctor's: keeping the cache in {project / FOLDER}" in err
    # The cache works there, silently, and still touches nothing else.
    assert main(["lint", "--cache-dir", ".", "--select", "GD101", "."]) == 1
    assert capsys.readouterr().err == "" and list((project / FOLDER).glob("*/results-*.json"))
    assert_kept(before, project, FOLDER)


def test_cache_dir_naming_a_folder_of_other_caches_keeps_them(project: Path, tmp_path_factory: pytest.TempPathFactory,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    caches = tmp_path_factory.mktemp("dot-cache")  # like ~/.cache
    for name in ("pip/http/a/b/c", "huggingface/hub/models--x/blobs/1", "CACHEDIR.TAG"):
        (caches / name).parent.mkdir(parents=True, exist_ok=True)
        (caches / name).write_text("Signature: 8a477f597d28d172789f06886806bc55\n")  # pip's own tag, say
    before = snapshot(caches)
    for _ in range(2):
        assert main(["lint", "--cache-dir", str(caches), "--select", "GD101", "."]) == 0
    assert_kept(before, caches, FOLDER)
    assert "is another tool's cache" in capsys.readouterr().err
    assert (caches / FOLDER / "CACHEDIR.TAG").exists()


def test_a_cache_folder_holding_user_folders_is_left_alone(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / "helpers.py").write_text(GPU_INIT)
    user_tree(project / FOLDER)  # no CACHEDIR.TAG of gpudoctor's: not its folder
    before = snapshot(project)
    assert main(["lint", "--select", "GD101", "."]) == 1
    assert_kept(before, project, None)
    assert "not a folder gpudoctor made: running without the cache" in capsys.readouterr().err


def test_only_old_version_folders_of_gpudoctor_own_cache_are_deleted(
        project: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    assert main(["lint", "--select", "GD101", "."]) == 0  # makes the cache: gpudoctor's folder
    base = project / FOLDER
    [current] = [p.name for p in base.iterdir() if p.is_dir()]
    victim = tmp_path_factory.mktemp("victim")
    (victim / "facts.json").write_text("precious\n")
    for name, text in {"0.0.1-fedcba9876543210/facts.json": "{}",  # an old version's: goes
                       "0.0.1-fedcba9876543210/.facts.json.123.tmp": "{",
                       "0.0.2-0123456789abcdef/facts.json": "{}",  # with a file of the user's: stays
                       "0.0.2-0123456789abcdef/notes.txt": "mine\n",
                       "mine/facts.json": "{}"}.items():  # not named like a version folder: stays
        (base / name).parent.mkdir(parents=True, exist_ok=True)
        (base / name).write_text(text)
    (base / "0.0.3-00112233445566aa").symlink_to(victim)  # a link is never followed
    keep = {k: v for k, v in snapshot(project).items() if "fedcba9876543210" not in k}
    kept_victim = snapshot(victim)
    (project / "helpers.py").write_text(GPU_INIT)  # something new, so the cache is written
    assert main(["lint", "--select", "GD101", "."]) == 1
    assert not (base / "0.0.1-fedcba9876543210").exists()
    now = snapshot(project)
    changed = {k for k in keep if now.get(k) != keep[k]}
    assert all(k == "helpers.py" or k.startswith(f"{FOLDER}{os.sep}{current}{os.sep}") for k in changed), changed
    assert snapshot(victim) == kept_victim


def test_a_committed_link_to_the_parent_deletes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """``.gpudoctor_cache -> ..`` in a repository: ``gpudoctor lint .`` as the pre-commit hook runs it."""
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "main.py").write_text(MAIN)
    (repo / "helpers.py").write_text(GPU_INIT)
    user_tree(repo)
    user_tree(tmp_path / "beside")
    (repo / FOLDER).symlink_to("..")
    monkeypatch.chdir(repo)
    before = snapshot(tmp_path)
    for _ in range(2):
        assert main(["lint", "."]) == 1
    assert_kept(before, tmp_path, None)
    captured = capsys.readouterr()
    assert captured.out.count("GD101") == 2
    assert f"{repo / FOLDER} is a symbolic link, not a folder gpudoctor made: running without the cache" in captured.err


# -- what the cache may believe: only files this user's gpudoctor sealed --------------------

def _results(project: Path) -> Path:
    [store] = (project / FOLDER).glob("*/results-*.json")
    return store


def _without_findings(store: Path) -> bytes:
    data = json.loads(body(store))
    for entry in data["files"].values():
        entry["findings"] = []
    return json.dumps(data).encode()


@pytest.mark.parametrize("forge", ["old seal", "no seal", "another user's key"])
def test_an_edited_results_file_cannot_hide_findings(project: Path, capsys: pytest.CaptureFixture[str],
                                                     forge: str) -> None:
    (project / "helpers.py").write_text(GPU_INIT)
    assert main(["lint", "."]) == 1
    capsys.readouterr()
    store = _results(project)
    edited = _without_findings(store)
    if forge == "old seal":
        store.write_bytes(store.read_bytes().split(b"\n", 1)[0] + b"\n" + edited)
    elif forge == "no seal":
        store.write_bytes(edited)
    else:
        store.write_bytes(cache_seal.seal(b"k" * 32, f"{store.parent.name}/{store.name}", edited))
    assert main(["lint", "."]) == 1
    captured = capsys.readouterr()
    assert "GD101" in captured.out and "All checks passed" not in captured.out
    assert captured.err.count("gpudoctor: warning: ignoring the result cache") == 1
    assert ("no seal" if forge == "no seal" else "its seal does not match") in captured.err
    assert main(["lint", "."]) == 1  # rebuilt: the next run trusts its own file again
    assert capsys.readouterr().err == ""


def test_a_sealed_file_cannot_stand_in_for_another(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The seal names the file: the user's own facts file copied over the results is refused."""
    (project / "helpers.py").write_text(GPU_INIT)
    assert main(["lint", "."]) == 1
    store = _results(project)
    store.write_bytes((store.parent / "facts.json").read_bytes())
    assert main(["lint", "."]) == 1
    assert "its seal does not match" in capsys.readouterr().err


def test_an_oversized_cache_file_is_a_warning(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / "helpers.py").write_text(GPU_INIT)
    assert main(["lint", "."]) == 1
    capsys.readouterr()
    with _results(project).open("r+b") as stream:
        stream.truncate(1 << 30)  # 1 GiB, sparse: costs nothing, and nothing reads it
    assert main(["lint", "."]) == 1
    captured = capsys.readouterr()
    assert "GD101" in captured.out
    assert "larger than 128 MiB (1 GiB)" in captured.err and "Traceback" not in captured.err


@pytest.mark.timeout(30)
def test_a_fifo_in_place_of_a_cache_file_does_not_block(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / "helpers.py").write_text(GPU_INIT)
    assert main(["lint", "."]) == 1
    capsys.readouterr()
    for store in (project / FOLDER).glob("*/*.json"):
        store.unlink()
        os.mkfifo(store)
    assert main(["lint", "."]) == 1
    captured = capsys.readouterr()
    assert "GD101" in captured.out and "a named pipe, not a regular file" in captured.err


@pytest.mark.parametrize("sealed", [False, True])
def test_deeply_nested_json_is_a_warning_not_a_traceback(project: Path, capsys: pytest.CaptureFixture[str],
                                                         sealed: bool) -> None:
    (project / "helpers.py").write_text(GPU_INIT)
    assert main(["lint", "."]) == 1
    capsys.readouterr()
    nested = b"[" * 200_000 + b"]" * 200_000
    for store in (project / FOLDER).glob("*/*.json"):
        if sealed:  # even gpudoctor's own seal on it (a bug, a key that leaked) is no traceback
            key = cache_seal.user_key()
            assert isinstance(key, bytes)
            store.write_bytes(cache_seal.seal(key, f"{store.parent.name}/{store.name}", nested))
        else:
            store.write_bytes(nested)
    assert main(["lint", "."]) == 1
    captured = capsys.readouterr()
    assert "GD101" in captured.out and "Traceback" not in captured.err
    # One line for the stores every run reads, one for the module summary read when the
    # module is walked.
    assert captured.err.count("gpudoctor: warning:") == 2
    assert ("not what this gpudoctor writes" if sealed else "no seal") in captured.err.splitlines()[-1]
    assert "walks-" in captured.err.splitlines()[-1]


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
def test_a_cache_file_of_another_user_is_ignored(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / "helpers.py").write_text(GPU_INIT)
    assert main(["lint", "."]) == 1
    capsys.readouterr()
    os.chown(_results(project), 65534, 65534)
    assert main(["lint", "."]) == 1
    captured = capsys.readouterr()
    assert "GD101" in captured.out and "belongs to another user" in captured.err


def test_links_planted_in_the_cache_are_not_written_through(project: Path, tmp_path_factory: pytest.TempPathFactory,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lint", "--select", "GD101", "."]) == 0
    victim = tmp_path_factory.mktemp("victim")
    (victim / "precious.txt").write_text("precious\n")
    [version] = [p for p in (project / FOLDER).iterdir() if p.is_dir()]
    for store in version.glob("*.json"):
        store.unlink()
        store.symlink_to(victim / "precious.txt")
    (project / "helpers.py").write_text(GPU_INIT)
    assert main(["lint", "--select", "GD101", "."]) == 1
    assert (victim / "precious.txt").read_text() == "precious\n"
    assert "a symbolic link, not a file gpudoctor wrote" in capsys.readouterr().err
    assert not any(p.is_symlink() for p in version.iterdir())  # replaced by gpudoctor's files
    # The version folder itself replaced by a link: not followed either.
    shutil.rmtree(version)
    version.symlink_to(victim)
    (project / "helpers.py").write_text(HARMLESS)
    assert main(["lint", "--select", "GD101", "."]) == 0
    assert os.listdir(victim) == ["precious.txt"]
    assert "not a folder gpudoctor made" in capsys.readouterr().err


def test_a_key_other_users_can_read_means_no_cache(project: Path, home: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lint", "--select", "GD101", "."]) == 0
    key = home / ".cache" / "gpudoctor" / "key"
    assert key.stat().st_mode & 0o777 == 0o600 and key.parent.stat().st_mode & 0o077 == 0
    assert len(key.read_bytes()) == 32
    key.chmod(0o644)
    shutil.rmtree(project / FOLDER)
    assert main(["lint", "--select", "GD101", "."]) == 0
    assert "can be read or written by other users" in capsys.readouterr().err
    assert not (project / FOLDER).exists()


def test_the_key_lives_outside_the_project(project: Path, home: Path) -> None:
    assert main(["lint", "--select", "GD101", "."]) == 0
    assert (home / ".cache" / "gpudoctor" / "key").exists()
    assert not any(p.name == "key" for p in project.rglob("*"))


# -- what a warm run reads: digests kept with the file's status -----------------------------

@pytest.fixture
def settled_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Files count as settled as soon as they are read (the tests' files are seconds old)."""
    from gpudoctor.lint.analysis import project

    monkeypatch.setattr(project, "SETTLED_NS", 0)


def _reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the files the runs from now on read."""
    from gpudoctor.lint.analysis import project

    read: list[str] = []
    original = project.read_bytes

    def counting(path: Path) -> bytes | object:
        read.append(Path(path).name)
        return original(path)

    monkeypatch.setattr(project, "read_bytes", counting)
    return read


def test_a_warm_run_reads_no_file_whose_status_is_unchanged(project: Path, settled_at_once: None,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    (project / "helpers.py").write_text(GPU_INIT)
    for name in ("a", "b", "c"):  # files of the project the run hashes and never analyses
        (project / f"{name}.py").write_text(f"import helpers\n\nVALUE = {name!r}\n")
    first = run(project)
    read = _reads(monkeypatch)
    second = run(project)
    assert second.findings == first.findings and (second.analysed, second.cached) == (0, 1)
    assert read == []  # (the linted file's noqa comments are kept too)
    (project / "b.py").write_text("import helpers\n\nVALUE = 'changed'\n")
    assert run(project).findings == first.findings
    assert read == ["b.py"]


def test_an_edit_that_keeps_the_size_and_the_time_is_seen(project: Path, settled_at_once: None) -> None:
    """The change time is part of the status (a copy that keeps the modification time, an
    editor that restores it): the file is hashed again, its new bytes are analysed."""
    harmless = HARMLESS.replace("return None", "return None" + " " * (len(GPU_INIT) - len(HARMLESS)))
    assert len(harmless) == len(GPU_INIT)
    helpers = project / "helpers.py"
    helpers.write_text(harmless)
    assert codes(run(project)) == set()
    before = helpers.stat()
    helpers.write_text(GPU_INIT)
    os.utime(helpers, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert (helpers.stat().st_size, helpers.stat().st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    assert codes(run(project)) == {("GD101", "main.py", 13)}


def test_a_file_changed_just_before_the_run_keeps_no_status(project: Path) -> None:
    """A file changed less than two seconds before it was read may change again within the
    same tick of its file system's clock: its digest is taken anew next time."""
    assert codes(run(project)) == set()
    [facts] = (project / FOLDER).glob("*/facts.json")
    data = json.loads(body(facts))
    assert str(project / "main.py") in data["facts"]
    assert str(project / "main.py") not in data["signatures"]


def test_the_tables_of_what_results_read_are_rid_of_pairs_no_entry_names(
        project: Path, settled_at_once: None, monkeypatch: pytest.MonkeyPatch) -> None:
    from gpudoctor.lint import cache

    monkeypatch.setattr(cache, "COMPACT_SLACK", 0)
    for step in range(6):  # each edit leaves the pair of the helpers' old digest behind
        (project / "helpers.py").write_text(GPU_INIT if step % 2 else HARMLESS + f"# {step}\n")
        assert codes(run(project)) == ({("GD101", "main.py", 13)} if step % 2 else set())
    [store] = (project / FOLDER).glob("*/results-*.json")
    data = json.loads(body(store))
    named = {n for entry in [*data["files"].values(), data["plan"]] for n in entry["files"]}
    assert all(0 <= n < len(data["pairs"]) for n in named)
    # Of the six digests the helpers had, those no entry names any more were dropped.
    assert sum(path.endswith("helpers.py") for path, _ in data["pairs"]) < 6
    assert len(data["pairs"]) + len(data["listings"]) <= 2 * data["compacted"]


def test_noqa_comments_are_kept_with_the_file_digest(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / "helpers.py").write_text(GPU_INIT)
    main_py = project / "main.py"
    pool = "    with mp.Pool(2) as pool:\n"
    main_py.write_text(MAIN.replace(pool, pool.replace(":\n", ":  # noqa: GD101\n")))
    assert main(["lint", "."]) == 0
    assert main(["lint", "."]) == 0  # read back from the cache: still suppressed
    main_py.write_text(MAIN.replace(pool, pool.replace(":\n", ":  # noqa: GD201\n")))
    assert main(["lint", "."]) == 1  # the comment changed: read again
    out = capsys.readouterr().out
    assert "GD101" in out and "GD001" in out  # and the stale code is reported unused


def test_fix_lints_its_fixed_files_again(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--fix`` lints again with the same cache once it wrote its fixes: what the first
    run found unchanged is looked at anew, the fixed finding is not reported from before."""
    assert main(["lint", "--select", "GD103", "main.py"]) == 1
    assert main(["lint", "--select", "GD103", "main.py"]) == 1  # the results are kept
    capsys.readouterr()
    assert main(["lint", "--select", "GD103", "--fix", "--unsafe-fixes", "main.py"]) == 0
    assert "GD103" not in capsys.readouterr().out
    assert 'get_context("spawn")' in (project / "main.py").read_text()


@pytest.mark.parametrize("pair", [[["main.py"], "d"], ["main.py"], [1, "d"], "main.py"])
def test_a_pair_of_another_shape_in_the_tables_is_rebuilt(project: Path, capsys: pytest.CaptureFixture[str],
                                                          pair: object) -> None:
    """A sealed results store whose table of (file, digest) pairs holds something else: a
    warning and a rebuilt store, never a traceback (a pair is a key of a dict)."""
    (project / "helpers.py").write_text(GPU_INIT)
    assert main(["lint", "."]) == 1
    capsys.readouterr()
    store = _results(project)
    data = json.loads(body(store))
    data["pairs"].append(pair)
    reseal(store, data)
    (project / "helpers.py").write_text(GPU_INIT + "# edited\n")  # a new pair to number
    assert main(["lint", "."]) == 1
    captured = capsys.readouterr()
    assert captured.out.count("GD101") == 1 and "not what this gpudoctor writes" in captured.err
