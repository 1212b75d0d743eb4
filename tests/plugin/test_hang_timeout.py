"""``hang_timeout``: stacks of the whole tree, the probe's diagnosis, children killed, session goes on."""

from __future__ import annotations

import re

import pytest

from tests.plugin.conftest import needs_tensorflow
from tests.probe.helpers import running

# Nothing is left: checked from inside the session, right after the hung test. Only the
# session's own children count: pytester runs it in the process running this suite, which
# may have children of its own (a pytest-xdist worker's, those of an earlier test).
NOTHING_LEFT = """

import psutil as _psutil

_BEFORE = {p.pid for p in _psutil.Process().children(recursive=True)}


def test_nothing_left_behind():
    alive = [p.pid for p in _psutil.Process().children(recursive=True)
             if p.pid not in _BEFORE and p.status() != _psutil.STATUS_ZOMBIE]
    assert alive == []
"""

# The op that starts TensorFlow's runtime runs in a fixture, before the call, whose deadline
# counts from its start: the workers hang as soon as the call forks them, so at the deadline
# (5 s) they have waited the 2.5 s that makes them hung, however long the op took.
TENSORFLOW_FREEZE = """\
import multiprocessing

import pytest
import tensorflow as tf


def work(i):
    return float(tf.reduce_sum(tf.matmul(tf.ones((1000, 1000)), tf.ones((1000, 1000)))))


@pytest.fixture
def an_op():
    tf.matmul(tf.ones((1000, 1000)), tf.ones((1000, 1000)))


@pytest.mark.hang_timeout(5)
def test_fork_pool_after_an_op(an_op):
    print(multiprocessing.get_context("fork").Pool(2).map(work, range(4)))
""" + NOTHING_LEFT


def _call_seconds(output: str, name: str) -> float:
    found = re.search(rf"^([0-9.]+)s call +\S+::{name}$", output, re.MULTILINE)
    assert found, output
    return float(found.group(1))


@needs_tensorflow
def test_tensorflow_fork_pool_hang_is_diagnosed_and_cleaned_up(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_freeze=TENSORFLOW_FREEZE)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--durations=2", "--durations-min=0",
                                           timeout=240)
    result.assert_outcomes(passed=1, failed=1)
    output = result.stdout.str()
    result.stdout.fnmatch_lines([
        "hang_timeout: still running after 5 s; * processes hung: pid *",
        # The brief: who forked from what, where the workers and the test wait, the fix.
        "Cause: * were forked at t=* s from pid *, which had TensorFlow initialized and * native threads at the fork.",
        "Blocked: pid *, * (fork) in your code work (test_freeze.py:8)*",
        "Blocked: pid * (test process) in your code test_fork_pool_after_an_op (test_freeze.py:18)*",
        "Fix: start the workers with the spawn start method*",
        "*- gpudoctor hang_timeout -*",
        "Hung: * processes waited with no CPU progress for at least 2.5 s: *",
        "* were forked at t=* s from pid *, which had TensorFlow initialized and * native threads at the fork.",
        "Blocked in *in your code work (test_freeze.py:8).",
        "* waits for them (e.g. Pool.map waiting for results).",
        'Fix: start the workers with the spawn start method*',
        "pid * (test process) hung: *in your code test_fork_pool_after_an_op (*test_freeze.py:18)",
        "pid * (fork) hung: *",
        "terminated the test's multiprocessing pool(s): workers *",
        "--- stack of pid * (faulthandler) ---",
    ])
    workers = [int(pid) for pid in re.findall(r"^pid (\d+) \(fork\) hung", output, re.MULTILINE)]
    assert len(workers) == 2
    # A worker's own stack: it waits in the TensorFlow op it was given, in the test's function.
    worker_stack = output.split(f"--- stack of pid {workers[0]} ")[1].split("--- stack of pid")[0]
    assert "work (" in worker_stack and "test_freeze.py:8" in worker_stack
    # The deadline, then the stack dumps (py-spy gets up to 20 s): the interrupt ended the call,
    # not the watcher, which gives up on a test that ignores it after 60 s.
    assert _call_seconds(output, "test_fork_pool_after_an_op") < 60
    assert running(workers) == []


CHILD_SLEEPS = """\
import subprocess
import sys

import pytest


@pytest.mark.hang_timeout(3, hang_after=1)
def test_waits_for_a_sleeping_child():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    print("CHILD", child.pid)
    child.wait()


@pytest.mark.hang_timeout(1)
def test_busy_loop():
    while True:
        pass
""" + NOTHING_LEFT


def test_child_is_dumped_and_killed_and_the_session_goes_on(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_sleepy=CHILD_SLEEPS)
    result = pytester.runpytest("-p", "no:cacheprovider", "-s")
    result.assert_outcomes(passed=1, failed=2)
    output = result.stdout.str()
    child = int(re.search(r"CHILD (\d+)", output).group(1))  # type: ignore[union-attr]
    result.stdout.fnmatch_lines([
        "hang_timeout: still running after 3 s; 2 processes hung: pid *",
        f"pid {child} (exec) hung: *",
        f"killed by gpudoctor: pid {child}",
        f"--- stack of pid {child} (*) ---",
        "*sleep*",
        "hang_timeout: still running after 1 s; no process was waiting: the test was still busy (slow, or looping)",
        "No process of the test waited without CPU progress: it was running, not deadlocked.",
    ])
    assert running([child]) == []


PYTEST_TIMEOUT = """\
import subprocess
import sys
import time

import pytest


@pytest.mark.timeout(2)
@pytest.mark.hang_timeout(60)
def test_shorter_pytest_timeout_wins():
    subprocess.run([sys.executable, "-c", "import time; time.sleep(600)"])


@pytest.mark.timeout(1)
def test_pytest_timeout_alone():
    time.sleep(30)
"""


def test_pytest_timeout_hands_its_timer_over(pytester: pytest.Pytester) -> None:
    pytest.importorskip("pytest_timeout")
    pytester.makepyfile(test_both=PYTEST_TIMEOUT)
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines([
        "*_ test_shorter_pytest_timeout_wins _*",
        "hang_timeout: still running after 2 s; *",
        "*_ test_pytest_timeout_alone _*",
        "*Failed: Timeout (>1.0s) from pytest-timeout.*",
    ])
    assert "Timeout (>2.0s) from pytest-timeout" not in result.stdout.str()


SUITE_WIDE_AND_PYTEST_TIMEOUT = """\
import subprocess
import sys
import time

import pytest


def test_suite_deadline_takes_the_shorter_pytest_timeout():
    subprocess.run([sys.executable, "-c", "import time; time.sleep(600)"])


@pytest.mark.hang_timeout(0)
def test_exempt_keeps_pytest_timeout():
    time.sleep(30)
"""


def test_pytest_timeout_with_a_suite_wide_deadline(pytester: pytest.Pytester) -> None:
    pytest.importorskip("pytest_timeout")
    pytester.makepyfile(test_suite=SUITE_WIDE_AND_PYTEST_TIMEOUT)
    result = pytester.runpytest("-p", "no:cacheprovider", "--timeout=1", "--gpudoctor-hang-timeout=60")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines([
        "*_ test_suite_deadline_takes_the_shorter_pytest_timeout _*",
        "hang_timeout: still running after 1 s; *",
        "*_ test_exempt_keeps_pytest_timeout _*",
        "*Failed: Timeout (>1.0s) from pytest-timeout.*",
    ])


# A real deadlock, made deterministic by events: a thread holds a lock while the test forks;
# the child's copy of the lock is held by a thread that does not exist in the child.
FORK_WHILE_A_LOCK_IS_HELD = """\
import os
import threading

import pytest

LOCK = threading.Lock()


def hold_the_lock(held, release):
    with LOCK:
        held.set()
        release.wait()


@pytest.mark.hang_timeout(3, hang_after=1)
def test_fork_while_a_thread_holds_a_lock():
    held, release = threading.Event(), threading.Event()
    thread = threading.Thread(target=hold_the_lock, args=(held, release), daemon=True)
    thread.start()
    held.wait()
    try:
        pid = os.fork()
        if pid == 0:
            with LOCK:
                os._exit(0)
        os.waitpid(pid, 0)
    finally:
        release.set()
        thread.join()
"""

BRIEF = [
    "*_ test_fork_while_a_thread_holds_a_lock _*",
    "hang_timeout: still running after 3 s; 2 processes hung: pid *; observed cause multithreaded-fork (GD102)",
    "Cause: * forked at t=* s from pid *, which had * native threads at the fork.",
    # With py-spy, the child's line ends with its native frame (PyThread_acquire_lock_timed).
    "Blocked: pid * (fork) in your code test_fork_while_a_thread_holds_a_lock (test_lock.py:24)*",
    "Blocked: pid * (test process) in your code test_fork_while_a_thread_holds_a_lock (test_lock.py:26)",
    "Fix: start the workers with the spawn or forkserver start method*",
]


def test_a_hang_fails_with_a_brief_and_the_full_report_in_a_file(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_lock=FORK_WHILE_A_LOCK_IS_HELD)
    result = pytester.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([*BRIEF, "Full report (every process, every stack): "
                                 ".pytest_cache/d/gpudoctor/test_lock.py_test_fork_while_a_thread_holds_a_lock-*.txt"
                                 " (-v shows it here)",
                                 "*= short test summary info =*"])
    output = result.stdout.str()
    assert "--- stack of pid" not in output and "- gpudoctor hang_timeout -" not in output
    [report] = (pytester.path / ".pytest_cache" / "d" / "gpudoctor").iterdir()
    text = report.read_text()
    assert text.startswith("test_lock.py::test_fork_while_a_thread_holds_a_lock\nhang_timeout: still running")
    assert "--- stack of pid" in text and "`fork()` copies only the calling thread." in text


def test_verbose_shows_the_full_report_which_goes_where_asked(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_lock=FORK_WHILE_A_LOCK_IS_HELD)
    result = pytester.runpytest("-v", "-p", "no:cacheprovider", "--gpudoctor-report-dir=reports")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([*BRIEF, "Full report (every process, every stack): reports/test_lock.py_*.txt",
                                 "*- gpudoctor hang_timeout -*", "--- stack of pid * ---"])
    assert len(list((pytester.path / "reports").iterdir())) == 1


CHILD_COMPUTES = """\
import subprocess
import sys

import pytest


@pytest.mark.hang_timeout(3, hang_after=1)
def test_waits_for_a_busy_child():
    child = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    print("CHILD", child.pid)
    child.wait()
""" + NOTHING_LEFT


def test_a_test_waiting_on_a_busy_child_is_busy_not_hung(pytester: pytest.Pytester) -> None:
    # The test process waits (idle) far past hang_after while its child computes: that is
    # waiting on work in progress, not a deadlock, so the verdict is not "hung".
    pytester.makepyfile(test_busy_child=CHILD_COMPUTES)
    result = pytester.runpytest("-p", "no:cacheprovider", "-s")
    result.assert_outcomes(passed=1, failed=1)
    output = result.stdout.str()
    child = int(re.search(r"CHILD (\d+)", output).group(1))  # type: ignore[union-attr]
    result.stdout.fnmatch_lines([
        f"hang_timeout: still running after 3 s; busy, not hung: pid {child} still made CPU progress, "
        "pid * waited (on them, most likely)",
    ])
    assert re.search(r"after 3 s; \d+ process", output) is None  # no "N processes hung"
    assert re.search(rf"pid \d+ \(test process\) waiting: .* while pid {child} made CPU progress", output)
    assert running([child]) == []
