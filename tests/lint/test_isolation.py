"""Lint runs nothing of the project it checks: not in its own process, not in its workers.

The hostile folder holds modules named like the standard library's (``random``, ``signal``,
``selectors``, ``tempfile``...), a ``sitecustomize``, and ``gpudoctor`` and ``libcst``
packages; each writes a marker file, named for its module and process, if it is ever
imported. The linted project is large enough for worker processes, and ``--verbose`` says
that they were used, so the runs below cannot pass by analysing in one process.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpudoctor.safe_path import installed_path

pytestmark = pytest.mark.slow

SCRIPT = Path(sys.executable).with_name("gpudoctor")
SHADOWS = ("random", "selectors", "signal", "tempfile", "socket", "struct", "threading", "pickle",
           "json", "site", "sitecustomize", "usercustomize")
PACKAGES = ("gpudoctor", "libcst", "multiprocessing", "concurrent")

JOB = '''\
import multiprocessing as mp

import tensorflow as tf


def work(x):
    return float(tf.reduce_sum(tf.constant([x])))


def main():
    tf.constant(1.0)
    with mp.Pool(2) as pool:
        pool.map(work, [1.0])
{padding}

if __name__ == "__main__":
    main()
'''


def _hostile(folder: Path, markers: Path, packages: tuple[str, ...] = PACKAGES) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    markers.mkdir(exist_ok=True)

    def planted(name: str) -> str:
        return (f"import os\nopen(os.path.join({str(markers)!r}, {name!r} + '.' + str(os.getpid())), 'w')"
                ".close()\n")

    for name in SHADOWS:
        (folder / f"{name}.py").write_text(planted(name))
    for name in packages:
        (folder / name).mkdir(exist_ok=True)
        (folder / name / "__init__.py").write_text(planted(name))
    return folder


def _project(where: Path, count: int = 40) -> Path:
    """Enough source (about 6 kB a file) that lint shares the work out to workers."""
    padding = "".join(f"\n\ndef helper_{i}(a, b):\n    return [x * {i} for x in range(a) if x % b]\n"
                      for i in range(60))
    where.mkdir(parents=True)
    (where / "pyproject.toml").write_text("[project]\nname = 'victim'\nrequires-python = '>=3.11'\n")
    for n in range(count):
        (where / f"job_{n}.py").write_text(JOB.format(padding=padding))
    return where


def _lint(command: list[str], cwd: Path, env: dict[str, str] | None = None,
          stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=cwd, env={**os.environ, **(env or {})}, input=stdin,
                          capture_output=True, text=True, timeout=300)


def _findings(out: str) -> list[str]:
    return sorted(line for line in out.splitlines() if ": GD" in line)


@pytest.fixture(scope="module")
def expected(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """The project, and its findings linted in one process from a harmless folder."""
    base = tmp_path_factory.mktemp("isolation")
    project = _project(base / "project")
    done = _lint([str(SCRIPT), "lint", "--no-cache", "--jobs", "1", "project"], cwd=base)
    assert done.returncode == 1, done.stderr
    return project, _findings(done.stdout)


def _markers(markers: Path) -> list[str]:
    return sorted(p.name for p in markers.iterdir())


def test_workers_started_in_a_hostile_folder_import_nothing_from_it(
        tmp_path: Path, expected: tuple[Path, list[str]]) -> None:
    project, findings = expected
    markers = tmp_path / "markers"
    hostile = _hostile(tmp_path / "hostile", markers)
    done = _lint([str(SCRIPT), "lint", "-v", "--no-cache", "--jobs", "2", str(project)], cwd=hostile)
    assert "in 2 worker processes" in done.stderr, done.stderr
    assert (done.returncode, _markers(markers)) == (1, []), done.stderr
    assert _findings(done.stdout) == [line.replace("project/", f"{project}/", 1) for line in findings]


def test_a_clone_named_gpudoctor_in_the_working_folder_does_not_hide_the_installed_one(
        tmp_path: Path, expected: tuple[Path, list[str]]) -> None:
    """The README's layout: the clone in ``~/src/gpudoctor``, lint run from ``~/src``."""
    project, findings = expected
    (tmp_path / "gpudoctor" / "gpudoctor").mkdir(parents=True)
    done = _lint([str(SCRIPT), "lint", "-v", "--no-cache", "--jobs", "2", str(project)], cwd=tmp_path)
    assert "in 2 worker processes" in done.stderr and done.returncode == 1, done.stderr
    assert len(_findings(done.stdout)) == len(findings)


def test_pythonpath_is_behind_the_installation_in_lint_and_absent_from_its_workers(
        tmp_path: Path, expected: tuple[Path, list[str]]) -> None:
    """A ``gpudoctor`` package on PYTHONPATH would be imported by the console script itself,
    before gpudoctor runs (Python's rule, not gpudoctor's): left out here. The interpreter
    also imports a ``sitecustomize`` it finds there as it starts: allowed in the command's
    own process only, never in a process gpudoctor starts."""
    project, findings = expected
    markers = tmp_path / "markers"
    hostile = _hostile(tmp_path / "hostile", markers, packages=PACKAGES[1:])
    done = _lint([str(SCRIPT), "lint", "-v", "--no-cache", "--jobs", "2", str(project)], cwd=hostile,
                 env={"PYTHONPATH": str(hostile)})
    assert "in 2 worker processes" in done.stderr and done.returncode == 1, done.stderr
    started = [name for name in _markers(markers) if not name.startswith("sitecustomize.")]
    assert started == [] and len(_markers(markers)) <= 1
    assert len(_findings(done.stdout)) == len(findings)


@pytest.mark.parametrize("hook", ["gpudoctor-lint", "gpudoctor-lint-project"])
def test_the_pre_commit_hooks_import_nothing_from_the_repository(
        tmp_path: Path, expected: tuple[Path, list[str]], hook: str) -> None:
    """The hooks' command (``python -I -m gpudoctor``, from .pre-commit-hooks.yaml), run in
    the repository with PYTHONPATH pointing into it: nothing, not even sitecustomize."""
    import yaml

    project, findings = expected
    root = Path(__file__).resolve().parents[2]
    hooks = {h["id"]: h for h in yaml.safe_load((root / ".pre-commit-hooks.yaml").read_text())}
    entry = hooks[hook]["entry"].split()
    assert entry[0] == "python"
    markers = tmp_path / "markers"
    files = sorted(p.name for p in project.glob("*.py")) if hooks[hook].get("pass_filenames", True) else []
    _hostile(project, markers, packages=PACKAGES[:2])  # (a multiprocessing/ here would be the project's own)
    try:
        done = _lint([sys.executable, *entry[1:], "-v", "--no-cache", *files], cwd=project,
                     env={"PYTHONPATH": str(project)})
    finally:
        for name in (*SHADOWS, *PACKAGES[:2]):
            target = project / (name if name in PACKAGES else f"{name}.py")
            if target.is_dir():
                (target / "__init__.py").unlink()
                target.rmdir()
            else:
                target.unlink()
    assert "worker processes" in done.stderr and done.returncode == 1, done.stderr
    assert (_markers(markers), len(_findings(done.stdout))) == ([], len(findings))


def test_standard_input_is_linted_without_importing_the_working_folder(
        tmp_path: Path, expected: tuple[Path, list[str]]) -> None:
    project, _ = expected
    markers = tmp_path / "markers"
    hostile = _hostile(tmp_path / "hostile", markers, packages=PACKAGES[:2])  # the buffer's own folder
    source = (project / "job_0.py").read_text()
    done = _lint([str(SCRIPT), "lint", "--no-cache", "--stdin-filename", "job.py", "-"], cwd=hostile,
                 stdin=source)
    assert (done.returncode, _markers(markers)) == (1, []), done.stderr
    assert "GD101" in done.stdout


def test_the_installed_path_leaves_out_the_working_folder_and_pythonpath(tmp_path: Path) -> None:
    stdlib = os.path.dirname(os.__file__)
    site = str(tmp_path / "site-packages")
    here, extra = tmp_path / "here", tmp_path / "extra"
    for folder in (here, extra):
        folder.mkdir()
    path = ["", str(extra), str(here), site, stdlib, os.path.join(stdlib, "lib-dynload")]
    kept = installed_path(path, environ={"PYTHONPATH": str(extra)}, cwd=str(here))
    # The standard library first, then the installation; nothing of the working folder or PYTHONPATH.
    assert kept[:2] == [stdlib, os.path.join(stdlib, "lib-dynload")]
    assert str(here) not in kept and str(extra) not in kept and "" not in kept
    assert site in kept



def test_run_from_the_standard_librarys_own_folder_the_standard_library_stays(tmp_path: Path) -> None:
    # ``cd /usr/lib/python3.11 && gpudoctor lint .`` ended in "No module named 'argparse'".
    stdlib = os.path.dirname(os.__file__)
    site = str(tmp_path / "site-packages")
    kept = installed_path(["", stdlib, site], environ={}, cwd=stdlib)
    assert kept == [stdlib, site]
    done = subprocess.run([sys.executable, "-m", "gpudoctor", "--version"], cwd=stdlib,
                          capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stderr) == (0, ""), done.stderr


def test_a_pythonpath_entry_that_alone_holds_a_needed_package_is_kept_last(tmp_path: Path) -> None:
    """A launcher that installs through PYTHONPATH (as some build tools do) keeps working;
    the standard library still comes first."""
    vendored = tmp_path / "vendored"
    (vendored / "pathspec").mkdir(parents=True)
    (vendored / "pathspec" / "__init__.py").write_text("")
    stdlib = os.path.dirname(os.__file__)
    kept = installed_path([str(vendored), stdlib], environ={"PYTHONPATH": str(vendored)}, cwd=str(tmp_path))
    assert kept == [stdlib, os.path.realpath(vendored)]


def test_the_checkout_gpudoctor_runs_from_comes_before_the_installation(tmp_path: Path) -> None:
    """``PYTHONPATH=checkout python -m gpudoctor`` with another gpudoctor installed: the
    workers import the checkout's, the one that runs, not the installed one."""
    import gpudoctor

    own = os.path.dirname(os.path.dirname(os.path.realpath(gpudoctor.__file__)))
    stdlib = os.path.dirname(os.__file__)
    site = str(tmp_path / "site-packages")
    kept = installed_path([own, stdlib, site], environ={"PYTHONPATH": own}, cwd=str(tmp_path))
    assert kept == [stdlib, own, site]
