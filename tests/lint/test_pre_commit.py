"""The hook as users meet it: the real pre-commit installs it from this repository and runs it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.lint.test_cli import BAD

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def _git(repo: Path, *args: str, env: dict[str, str] | None = None) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True, env=env).stdout


def _this_checkout_as_a_commit(shadow: Path) -> str:
    """Clone this repository and commit its uncommitted changes to tracked files there, as
    ``pre-commit try-repo`` does; return that commit. (try-repo installs the hook afresh at
    each call, into a store of its own: one commit and one store let pre-commit install it
    once for all the runs of the test, as it does for a user.)"""
    head = _git(ROOT, "rev-parse", "HEAD").strip()
    _git(ROOT, "clone", "-q", str(ROOT), str(shadow))
    _git(shadow, "checkout", "-q", head, "-b", "_pc_tmp")
    git_dir = shadow / ".git"
    env = {**os.environ, "GIT_INDEX_FILE": str(git_dir / "index"), "GIT_OBJECT_DIRECTORY": str(git_dir / "objects")}
    staged = _git(ROOT, "diff", "--cached", "--name-only", "-z").split("\0")
    if any(staged):
        _git(ROOT, "add", "--", *filter(None, staged), env=env)
    _git(ROOT, "add", "-u", env=env)
    _git(shadow, "-c", "user.email=t@example.invalid", "-c", "user.name=t", "commit", "-q", "--allow-empty",
         "-m", "the checkout under test")
    return _git(shadow, "rev-parse", "HEAD").strip()


def _run(repo: Path, home: Path, hook: str = "gpudoctor-lint",
         files: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PRE_COMMIT_HOME": str(home), "GIT_CONFIG_NOSYSTEM": "1"}
    which = ["--files", *files] if files else ["--all-files"]
    return subprocess.run(
        [sys.executable, "-m", "pre_commit", "run", hook, *which],
        cwd=repo, env=env, capture_output=True, text=True, timeout=900,
    )


HELPER = """import tensorflow as tf


def setup():
    return tf.constant(1.0)
"""
APP = """import multiprocessing as mp

import tensorflow as tf

import helper

helper.setup()


def work(x):
    return float(tf.reduce_sum(tf.constant([x])))


if __name__ == "__main__":
    with mp.Pool(2) as pool:
        print(pool.map(work, [1.0, 2.0]))
"""


def test_hook_fails_on_the_bug_and_passes_once_fixed(tmp_path: Path) -> None:
    probe = subprocess.run(["git", "--version"], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"git is not usable here: {probe.stderr.strip() or probe.returncode}")
    repo = tmp_path / "user-repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    _git(repo, "config", "user.email", "dev@example.invalid")
    _git(repo, "config", "user.name", "dev")
    rev = _this_checkout_as_a_commit(tmp_path / "gpudoctor")
    (repo / ".pre-commit-config.yaml").write_text(
        f"repos:\n  - repo: {tmp_path / 'gpudoctor'}\n    rev: {rev}\n    hooks:\n"
        "      - id: gpudoctor-lint\n      - id: gpudoctor-lint-project\n")
    (repo / "train.py").write_text(BAD)
    (repo / "notes.txt").write_text("not python\n")
    _git(repo, "add", ".")

    failed = _run(repo, tmp_path / "pre-commit-home")
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "gpudoctor lint" in failed.stdout and "Failed" in failed.stdout
    assert "train.py:10:10: GD101 the Pool forks its worker processes" in failed.stdout

    (repo / "train.py").write_text(BAD.replace("mp.Pool(2)", 'mp.get_context("spawn").Pool(2)'))
    _git(repo, "add", ".")
    passed = _run(repo, tmp_path / "pre-commit-home")
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert "Passed" in passed.stdout

    # A commit that changes only helper.py: the per-file hook sees nothing wrong in it,
    # the project hook reports what the change does to app.py.
    (repo / "helper.py").write_text(HELPER)
    (repo / "app.py").write_text(APP)
    _git(repo, "add", ".")
    per_file = _run(repo, tmp_path / "pre-commit-home", files=("helper.py",))
    assert per_file.returncode == 0, per_file.stdout + per_file.stderr
    project = _run(repo, tmp_path / "pre-commit-home", "gpudoctor-lint-project", ("helper.py",))
    assert project.returncode == 1, project.stdout + project.stderr
    assert "app.py:15:10: GD101 the Pool forks its worker processes after TensorFlow" in project.stdout
