"""``fork_safe``: forks recorded in the test process and its descendants, judged after the call."""

from __future__ import annotations

import pytest

from tests.plugin.conftest import needs_tensorflow

THREADS = """\
import multiprocessing
import os
import subprocess
import sys
import threading

import pytest

FORK_WITH_THREAD = (
    "import os, threading\\n"
    "threading.Thread(target=threading.Event().wait, daemon=True).start()\\n"
    "pid = os.fork()\\n"
    "if pid == 0:\\n"
    "    os._exit(0)\\n"
    "os.waitpid(pid, 0)\\n"
)


def fork_and_wait():
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)


@pytest.mark.fork_safe
def test_plain_fork_is_safe():
    fork_and_wait()


@pytest.mark.fork_safe(threads=True)
def test_fork_with_a_thread():
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        fork_and_wait()
    finally:
        stop.set()
        thread.join()


@pytest.mark.fork_safe(threads=True)
def test_grandchild_forks_with_a_thread():
    subprocess.run([sys.executable, "-c", FORK_WITH_THREAD], check=True)


@pytest.mark.fork_safe
def test_threads_are_not_judged_by_default():
    subprocess.run([sys.executable, "-c", FORK_WITH_THREAD], check=True)


@pytest.mark.fork_safe(threads=True)
def test_pool_started_beside_a_thread():
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        with multiprocessing.get_context("fork").Pool(2) as pool:
            pool.map(abs, range(4))
    finally:
        stop.set()
        thread.join()
"""


def test_forks_with_threads_fail_only_when_asked(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_threads=THREADS)
    # In a process of its own: the threads counted are the inner tests', not those of the
    # process that runs this suite (a pytest-xdist worker has an I/O thread of its own).
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, failed=3)
    result.stdout.fnmatch_lines([
        "*_ test_fork_with_a_thread _*",
        "fork_safe: 1 fork(s) while 2 native threads were running in the forking process at "
        "test_threads.py:20 in fork_and_wait",
        "*- gpudoctor fork_safe -*",
        "the test process * forked at test_threads.py:20 in fork_and_wait with 2 native threads → child *",
        "`fork()` copies only the calling thread. Locks held by the other threads at that moment*",
        "Fix: start the workers with the spawn or forkserver start method*or fork before any thread starts*",
        "*_ test_grandchild_forks_with_a_thread _*",
        "fork_safe: 1 fork(s) while 2 native threads were running in the forking process",
        "process * (python* -c import os, threading*) forked with 2 native threads → child * (fork sites are "
        "recorded in the test process and its fork children)",
        "*_ test_pool_started_beside_a_thread _*",
        "fork_safe: 2 fork(s) while 2 native threads were running in the forking process at "
        "test_threads.py:59 in test_pool_started_beside_a_thread",
        "the test process * forked at test_threads.py:59 in test_pool_started_beside_a_thread via "
        "multiprocessing/context.py:* in Pool with 2 native threads → child *",
    ])


TENSORFLOW = """\
import multiprocessing
import os
import time

import pytest


def fork_and_exit_at_once():
    # The child runs no TensorFlow op: after such a fork a large op would hang it.
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)


@pytest.mark.fork_safe
def test_fork_after_import_only():
    import tensorflow  # noqa: F401  importing does not start the runtime
    fork_and_exit_at_once()


@pytest.mark.fork_safe
def test_fork_after_an_op():
    import tensorflow as tf
    tf.matmul(tf.ones((1000, 1000)), tf.ones((1000, 1000)))
    fork_and_exit_at_once()


@pytest.mark.fork_safe
def test_spawn_after_an_op():
    import tensorflow as tf
    tf.matmul(tf.ones((1000, 1000)), tf.ones((1000, 1000)))
    worker = multiprocessing.get_context("spawn").Process(target=time.sleep, args=(0,))
    worker.start()
    worker.join()
    assert worker.exitcode == 0
"""


@needs_tensorflow
def test_fork_after_tensorflow_op_fails_and_spawn_passes(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_tf=TENSORFLOW)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=240)
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines([
        "*_ test_fork_after_an_op _*",
        "fork_safe: 1 fork(s) while TensorFlow was initialized in the forking process at "
        "test_tf.py:10 in fork_and_exit_at_once",
        "*- gpudoctor fork_safe -*",
        "the test process * forked at test_tf.py:10 in fork_and_exit_at_once with TensorFlow initialized "
        "and * native threads → child *",
        "TensorFlow's intra-op thread pool does not survive `fork()`*No CUDA was involved*",
        'Fix: start the workers with the spawn start method (multiprocessing.get_context("spawn"))*',
        "FAILED test_tf.py::test_fork_after_an_op - fork_safe: 1 fork(s)*",
    ])
    assert "test_spawn_after_an_op FAILED" not in result.stdout.str()
