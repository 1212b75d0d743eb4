"""Shared helpers for the test suite."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from gpudoctor.lint.engine import lint_paths
from gpudoctor.lint.findings import Finding
from gpudoctor.lint.limits import DEFAULT_LIMITS, Limits
from gpudoctor.lint.rules._registry import all_rules
from gpudoctor.lint.selection import build_selection
from gpudoctor.lint.settings import Settings

# The pytest plugin's tests drive inner pytest runs.
pytest_plugins = ["pytester"]

# The plugins an inner pytest run leaves out (see _inner_runs_without_asyncio).
INNER_RUN_OPTIONS = "-p no:asyncio -p no:pytest-lsp -p no:hypothesispytest"


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto`` (addopts): one worker per CPU this process may run on, at most two.

    Two is what the suite is measured and kept green at on the 2-CPU machines CI uses; a
    test that imports TensorFlow runs several such processes at once, so more workers on a
    bigger machine is an arrangement nobody has measured. ``-n N`` or
    PYTEST_XDIST_AUTO_NUM_WORKERS (read by pytest-xdist itself) chooses otherwise."""
    import os

    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return min(2, cpus)


def pytest_configure(config: pytest.Config) -> None:
    """Run the suite with SIGHUP, SIGQUIT and SIGINT at their default actions, whatever started it.

    ``nohup`` ignores SIGHUP, and a shell without job control ignores SIGQUIT (and SIGINT)
    in the commands it runs in the background; ignored signals are inherited by every
    process the tests start. gpudoctor rightly leaves an ignored signal ignored, so the
    tests of what a signal does to it would then test the launcher instead."""
    import signal

    for name in ("SIGHUP", "SIGQUIT"):
        signum = getattr(signal, name, None)
        if signum is not None and signal.getsignal(signum) == signal.SIG_IGN:
            signal.signal(signum, signal.SIG_DFL)
    # SIGINT as Python sets it where it is not ignored: KeyboardInterrupt here, the default
    # action in the processes the tests start.
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(autouse=True)
def _private_user_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """The result cache's signing key lives in the user's cache folder: tests use one of
    their own (shared by the session), never the real user's."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.getbasetemp() / "user-cache"))


@pytest.fixture(autouse=True)
def _inner_runs_without_asyncio(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """The pytest runs tests start (pytester, subprocesses) load every installed plugin:
    pytest-asyncio and pytest-lsp, there for tests/server only, would load too, and
    pytest-asyncio's warning that its loop scope is unset fails a run made with ``-W
    error::DeprecationWarning``. Those runs test gpudoctor's plugin: without them, and without
    hypothesis's plugin (there for tests/lint), which imports hypothesis as a run starts:
    1.6 s of each inner pytest process, 0.7 s without it. (Set once pytester exists: it
    clears PYTEST_ADDOPTS as it starts.)"""
    if "pytester" in request.fixturenames:
        request.getfixturevalue("pytester")
    monkeypatch.setenv("PYTEST_ADDOPTS", INNER_RUN_OPTIONS)


@pytest.fixture
def lint_source(tmp_path: Path) -> Callable[..., list[Finding]]:
    """Write sources into a temporary project and lint it; return the findings."""

    def run(files: str | dict[str, str], *, minor: int = 12, platform: str = "linux",
            select: list[str] | None = None, limits: Limits = DEFAULT_LIMITS) -> list[Finding]:
        sources = {"main.py": files} if isinstance(files, str) else files
        paths = []
        for name, text in sources.items():
            path = tmp_path / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(textwrap.dedent(text), encoding="utf-8")
            paths.append(path)
        codes = [r.code for r in all_rules()]
        settings = Settings(build_selection(codes, codes, select=select), minor, platform, tmp_path)
        result = lint_paths(paths, settings, limits=limits)
        assert not result.internal_errors, result.internal_errors
        return result.findings

    return run


def codes_at(findings: list[Finding]) -> set[tuple[str, int]]:
    return {(f.code, f.site.row) for f in findings}
