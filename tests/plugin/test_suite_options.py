"""Settings for a whole run: --gpudoctor-* options and gpudoctor_* ini keys, and their precedence.

A marker on a test wins over the command line, which wins over the ini file.
"""

from __future__ import annotations

import pytest

# Each hanging test waits for a child that sleeps: the test process and the child go idle at once.
HANGS = """\
import subprocess
import sys
import threading

import pytest


def armed():
    '''Whether gpudoctor watches this call for a hang (its rescue thread runs only then).'''
    return any(t.name == "gpudoctor-hang-rescue" for t in threading.enumerate())


def test_hangs():
    subprocess.run([sys.executable, "-c", "import time; time.sleep(600)"])


@pytest.mark.hang_timeout(2, hang_after=1)
def test_hangs_with_its_own_deadline():
    subprocess.run([sys.executable, "-c", "import time; time.sleep(600)"])


@pytest.mark.hang_timeout(0)
def test_exempt():
    assert not armed()


def test_armed():
    assert armed()
"""


def test_command_line_deadline_wins_over_the_ini_and_a_marker_wins_over_both(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\ngpudoctor_hang_timeout = 600\n")
    pytester.makepyfile(test_hangs=HANGS)
    result = pytester.runpytest("-p", "no:cacheprovider", "--gpudoctor-hang-timeout=1")
    result.assert_outcomes(passed=2, failed=2)
    result.stdout.fnmatch_lines([
        "*_ test_hangs _*",
        "hang_timeout: still running after 1 s; 2 processes hung: pid *",
        "*_ test_hangs_with_its_own_deadline _*",
        "hang_timeout: still running after 2 s; 2 processes hung: pid *",
    ])


def test_the_ini_deadline_applies_to_every_test(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\ngpudoctor_hang_timeout = 1\n")
    pytester.makepyfile(test_hangs=HANGS)
    result = pytester.runpytest("-p", "no:cacheprovider", "test_hangs.py::test_hangs", "test_hangs.py::test_armed")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["hang_timeout: still running after 1 s; 2 processes hung: pid *"])


@pytest.mark.parametrize("args", [("--gpudoctor-hang-timeout=0",), ("-o", "gpudoctor_hang_timeout=0"), ()])
def test_zero_or_nothing_means_no_deadline(pytester: pytest.Pytester, args: tuple[str, ...]) -> None:
    if args:
        pytester.makeini("[pytest]\ngpudoctor_hang_timeout = 1\n")
    pytester.makepyfile(test_hangs=HANGS)
    result = pytester.runpytest("-p", "no:cacheprovider", "test_hangs.py::test_armed", *args)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["FAILED test_hangs.py::test_armed - assert False"])


@pytest.mark.parametrize(("args", "ini", "message"), [
    (("--gpudoctor-hang-timeout=soon",), "",
     "*argument --gpudoctor-hang-timeout: must be a number of seconds, got 'soon'"),
    (("--gpudoctor-hang-timeout=-5",), "",
     "*argument --gpudoctor-hang-timeout: must be 0 (none) or a positive number of seconds, got '-5'"),
    ((), "gpudoctor_hang_timeout = nan",
     "ERROR: gpudoctor_hang_timeout in the pytest configuration must be 0 (none) or a positive number of "
     "seconds, got 'nan'"),
    ((), "gpudoctor_fork_safe = maybe", "ERROR: gpudoctor_fork_safe in the pytest configuration: *maybe*"),
    ((), "gpudoctor_sample_interval = 0",
     "ERROR: gpudoctor_sample_interval in the pytest configuration must be more than 0 seconds"),
])
def test_a_bad_setting_is_a_usage_error_naming_it(pytester: pytest.Pytester, args: tuple[str, ...], ini: str,
                                                  message: str) -> None:
    pytester.makeini(f"[pytest]\n{ini}\n")
    pytester.makepyfile("def test_nothing():\n    pass\n")
    result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])
    assert "Traceback" not in result.stderr.str()


def test_help_lists_the_options_and_the_ini_keys(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--help")
    result.stdout.fnmatch_lines([
        "gpudoctor: fork safety, hangs and GPU memory of each test:",
        "*--gpudoctor-hang-timeout=S*",
        "*--gpudoctor-fork-safe*",
        "*--gpudoctor-require-nvml*",
        "*--gpudoctor-report-dir=DIR*",
    ])
    result.stdout.fnmatch_lines(["*gpudoctor_hang_timeout (string):*", "*gpudoctor_fork_safe (bool):*",
                                 "*gpudoctor_require_nvml (bool):*", "*gpudoctor_report_dir (string):*"])


# The fork hooks read the runtimes a process initialized from sys.modules alone: an imported
# pycuda.autoinit is PyCUDA's initialized context to them, which lets a CPU machine fork "after init".
FORKS = """\
import os
import sys
import types

import pytest


@pytest.fixture
def pycuda_initialized(monkeypatch):
    monkeypatch.setitem(sys.modules, "pycuda.autoinit", types.ModuleType("pycuda.autoinit"))


def fork_and_wait():
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)


def test_fork_after_init(pycuda_initialized):
    fork_and_wait()


@pytest.mark.fork_safe(False)
def test_exempt(pycuda_initialized):
    fork_and_wait()


def test_plain_fork():
    fork_and_wait()
"""


@pytest.mark.parametrize(("ini", "args", "failed"), [
    ("", ("--gpudoctor-fork-safe",), 1),
    ("gpudoctor_fork_safe = true", (), 1),
    ("gpudoctor_fork_safe = true", ("-o", "gpudoctor_fork_safe=false"), 0),
    ("", (), 0),
])
def test_fork_safe_for_the_whole_run(pytester: pytest.Pytester, ini: str, args: tuple[str, ...],
                                     failed: int) -> None:
    pytester.makeini(f"[pytest]\n{ini}\n")
    pytester.makepyfile(test_forks=FORKS)
    result = pytester.runpytest("-p", "no:cacheprovider", *args)
    result.assert_outcomes(passed=3 - failed, failed=failed)
    if failed:
        result.stdout.fnmatch_lines([
            "*_ test_fork_after_init _*",
            "fork_safe: 1 fork(s) while PyCUDA was initialized in the forking process at test_forks.py:14 in "
            "fork_and_wait",
            "FAILED test_forks.py::test_fork_after_init - *"])
