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


SIZE = "expected a size such as '512 MiB', '2GiB' or a number of bytes > 0, got"
HANG_SECONDS = "hang_timeout: seconds must be a finite number of seconds, 0 (none) or more, got"
HANG_AFTER = "hang_timeout: hang_after must be a finite number of seconds, more than 0, got"
TOO_LARGE = "gpu_memory_limit: expected a size of at most 1 EiB, got"


@pytest.mark.parametrize(("marker", "message"), [
    ('gpu_memory_limit("2 parsecs")', f"gpu_memory_limit: {SIZE} '2 parsecs'"),
    ("gpu_memory_limit(-5)", f"gpu_memory_limit: {SIZE} -5"),
    ("gpu_memory_limit(0)", f"gpu_memory_limit: {SIZE} 0"),
    ('gpu_memory_limit("0 GiB")', f"gpu_memory_limit: {SIZE} '0 GiB'"),
    ("gpu_memory_limit(0.5)", f"gpu_memory_limit: {SIZE} 0.5"),
    ('gpu_memory_limit(float("nan"))', f"gpu_memory_limit: {SIZE} nan"),
    ('gpu_memory_limit(float("inf"))', f"gpu_memory_limit: {SIZE} inf"),
    ('gpu_memory_limit("lots")', f"gpu_memory_limit: {SIZE} 'lots'"),
    ("gpu_memory_limit(True)", f"gpu_memory_limit: {SIZE} True"),
    ("gpu_memory_limit(None)", f"gpu_memory_limit: {SIZE} None"),
    ("gpu_memory_limit(10 ** 30)", f"{TOO_LARGE} {10 ** 30}"),
    ('gpu_memory_limit("2000000 TiB")', f"{TOO_LARGE} '2000000 TiB'"),
    ("gpu_memory_leak_limit(-1)", f"gpu_memory_leak_limit: {SIZE} -1"),
    ("gpu_memory_leak_limit()", "gpu_memory_leak_limit needs size, e.g. @pytest.mark.gpu_memory_leak_limit('2 GiB')"),
    ("hang_timeout(-1)", f"{HANG_SECONDS} -1"),
    ('hang_timeout(float("nan"))', f"{HANG_SECONDS} nan"),
    ('hang_timeout(float("inf"))', f"{HANG_SECONDS} inf"),
    ("hang_timeout(True)", f"{HANG_SECONDS} True"),
    ('hang_timeout("soon")', f"{HANG_SECONDS} 'soon'"),
    ("hang_timeout(10 ** 400)", f"{HANG_SECONDS} {'1' + '0' * 58}…"),  # cut short
    ("hang_timeout(5, hang_after=0)", f"{HANG_AFTER} 0"),
    ('hang_timeout(5, hang_after=float("nan"))', f"{HANG_AFTER} nan"),
    ('hang_timeout(5, native_stacks="no")', "hang_timeout: native_stacks must be True or False, got 'no'"),
    ("hang_timeout(5, timeout=3)",
     "hang_timeout has no argument 'timeout' (it takes seconds, hang_after, native_stacks)"),
    ('fork_safe("False")', "fork_safe: check must be True or False, got 'False'"),
    ("fork_safe(threads=1)", "fork_safe: threads must be True or False, got 1"),
    ("fork_safe(True, False, threads=True)", "fork_safe got 'threads' twice"),
])
def test_invalid_marker_arguments_are_one_line_errors_at_setup(pytester: pytest.Pytester, marker: str,
                                                               message: str) -> None:
    # As pytest-timeout's timeout(...): the test errors at its setup, before its fixtures run.
    pytester.makepyfile(f"""
        import pytest

        @pytest.fixture
        def fixture():
            raise AssertionError("the fixture ran")

        @pytest.mark.{marker}
        def test_marked(fixture):
            pass
    """)
    result = pytester.runpytest("-rE")
    result.assert_outcomes(errors=1)
    output = result.stdout.str()
    # The error's whole report is the one line: no traceback of the plugin, no chained exception.
    report = output.split(" ERROR at setup of test_marked ", 1)[1].split("\n", 1)[1].split("=" * 10, 1)[0]
    assert report.strip().splitlines() == [f"invalid marker on test_marked: {message}"], output
    result.stdout.fnmatch_lines(["ERROR *::test_marked*"])  # the summary line, cut to the terminal width
    assert "the fixture ran" not in output


def test_a_bad_marker_on_a_class_errors_each_of_its_tests(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("""
        import pytest

        @pytest.mark.gpu_memory_limit(-5)
        class TestBudget:
            def test_one(self):
                pass

            def test_two(self):
                pass
    """)
    result = pytester.runpytest()
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines([f"invalid marker on test_one: gpu_memory_limit: {SIZE} -5",
                                 f"invalid marker on test_two: gpu_memory_limit: {SIZE} -5"])


def test_every_documented_argument_form_is_taken(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("""
        import pytest

        @pytest.mark.fork_safe
        @pytest.mark.gpu_memory_limit("2 GiB")
        @pytest.mark.gpu_memory_leak_limit(64 * 1024 * 1024)
        def test_bare_fork_safe_and_sizes():
            pass

        @pytest.mark.fork_safe(True, threads=False)
        @pytest.mark.gpu_memory_limit("512MiB")
        @pytest.mark.gpu_memory_leak_limit("1.5GB")
        def test_fork_safe_in_full():
            pass

        @pytest.mark.fork_safe(False)
        @pytest.mark.hang_timeout(0)
        @pytest.mark.gpu_memory_limit(2e9)
        def test_exemptions():
            pass

        @pytest.mark.fork_safe(check=True, threads=True)
        @pytest.mark.hang_timeout(60, hang_after=5, native_stacks=False)
        def test_a_deadline_in_full():
            pass

        @pytest.mark.hang_timeout("60")
        def test_a_deadline_as_text():
            pass
    """)
    pytester.runpytest("--strict-markers").assert_outcomes(passed=5)


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
