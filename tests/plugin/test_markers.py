"""The plugin is registered, documents its markers, rejects bad arguments, and costs nothing unused."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

UNMARKED = """\
import os

def test_fork_without_markers():
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
"""


def test_markers_are_listed_with_their_documentation(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--markers")
    result.stdout.fnmatch_lines([
        "@pytest.mark.fork_safe(check=True, threads=False): fail the test if*forked while it had a GPU "
        "runtime*fork_safe(False) exempts a test from --gpudoctor-fork-safe.",
        "@pytest.mark.hang_timeout(seconds, hang_after=None, native_stacks=True): after SECONDS, dump the "
        "stacks of the test process and of all its child processes*hang_timeout(0) exempts a test*",
        "@pytest.mark.gpu_memory_limit(size): fail the test if the GPU memory*",
        "@pytest.mark.gpu_memory_leak_limit(size): fail the test if*more GPU memory at its end*",
    ])


def test_markers_pass_strict_markers(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("""
        import pytest

        @pytest.mark.fork_safe(threads=True)
        @pytest.mark.gpu_memory_limit("2 GiB")
        @pytest.mark.gpu_memory_leak_limit("64 MiB")
        def test_nothing():
            pass
    """)
    pytester.runpytest("--strict-markers").assert_outcomes(passed=1)


@pytest.mark.parametrize(("marker", "message"), [
    ('gpu_memory_limit("2 parsecs")', "*invalid marker: gpu_memory_limit: not a size: '2 parsecs'*"),
    ("gpu_memory_leak_limit()", "*invalid marker: gpu_memory_leak_limit needs size*"),
    ("hang_timeout(-1)", "*invalid marker: hang_timeout: seconds must be 0 (none) or more, got -1*"),
    ("hang_timeout(5, hang_after=0)", "*invalid marker: hang_timeout: hang_after must be more than 0 seconds*"),
    ("hang_timeout(5, timeout=3)", "*invalid marker: hang_timeout has no argument 'timeout'*"),
    ("fork_safe(True, False, threads=True)", "*invalid marker: fork_safe got 'threads' twice*"),
])
def test_invalid_marker_arguments_fail_the_test_clearly(pytester: pytest.Pytester, marker: str,
                                                        message: str) -> None:
    pytester.makepyfile(f"""
        import pytest

        @pytest.mark.{marker}
        def test_marked():
            pass
    """)
    result = pytester.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([message])


def test_unmarked_tests_load_nothing_heavy(tmp_path: Path) -> None:
    """A session whose tests use no marker or fixture imports no probe, NVML or process library."""
    (tmp_path / "test_plain.py").write_text(UNMARKED)
    (tmp_path / "conftest.py").write_text(
        "import sys\n\n"
        "def pytest_sessionfinish(session):\n"
        "    heavy = ('pynvml', 'psutil', 'tensorflow', 'gpudoctor.probe.nvml', 'gpudoctor.probe.supervise',\n"
        "             'gpudoctor.pytest_plugin.item_watch', 'gpudoctor.lint.engine')\n"
        "    print('LOADED', [m for m in heavy if m in sys.modules])\n"
        "    print('PLUGIN', 'gpudoctor.pytest_plugin' in sys.modules)\n")
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", str(tmp_path)],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "LOADED []" in run.stdout, run.stdout
    assert "PLUGIN True" in run.stdout, run.stdout
