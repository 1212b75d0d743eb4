"""``isolated``: a callable run under the probe in a fresh interpreter, judged by its diagnosis."""

from __future__ import annotations

import pytest

from tests.plugin.conftest import needs_tensorflow

BASICS = """\
import os

import pytest


def add(a, b, *, scale=1):
    print("adding")
    return (a + b) * scale


def refuse():
    raise ValueError("no, thank you")


def abort():
    os.abort()


def test_result(isolated):
    outcome = isolated(add, 1, 2, scale=10)
    assert (outcome.verdict, outcome.result, outcome.exception) == ("ok", 30, None)
    assert outcome.ok
    assert "adding" in outcome.output


def test_exception_comes_back(isolated):
    outcome = isolated(refuse)
    assert outcome.verdict == "failed"
    assert isinstance(outcome.exception, ValueError)
    assert "no, thank you" in outcome.traceback
    assert "Last line of stderr: ValueError: no, thank you" in outcome.explanation


def test_crash(isolated):
    outcome = isolated(abort)
    assert outcome.verdict == "crashed"
    assert "SIGABRT" in outcome.explanation


def test_lambda_is_refused(isolated):
    isolated(lambda: 1)
"""


def test_results_exceptions_crashes_and_unpicklable_callables(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_basics=BASICS)
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines([
        "*isolated() runs the callable in a fresh interpreter, so it and its arguments must be picklable*",
    ])


FREEZE = """\
import multiprocessing


def work(i):
    import tensorflow as tf
    return float(tf.reduce_sum(tf.matmul(tf.ones((1000, 1000)), tf.ones((1000, 1000)))))


def op_then_pool(method):
    import tensorflow as tf
    tf.matmul(tf.ones((1000, 1000)), tf.ones((1000, 1000)))
    with multiprocessing.get_context(method).Pool(2) as pool:
        return pool.map(work, range(4))


# The timeouts are deadlines only a stuck run reaches: TensorFlow takes 5-10 s to import on
# a loaded 2-core machine, in each of three processes in the spawn variant, where the parent
# waits in Pool.map, with no CPU progress, all the while its workers import it.
def test_fork_freezes(isolated):
    outcome = isolated(op_then_pool, "fork", timeout=300, hang_after=3)
    assert outcome.verdict == "hung", outcome.explanation
    assert "which had TensorFlow initialized" in outcome.explanation
    assert "in your code work (test_freeze.py:6)" in outcome.explanation
    workers = [p for p in outcome.processes if p.start == "fork"]
    assert len(workers) == 2 and all(p.verdict == "hung" for p in workers)


def test_spawn_is_safe(isolated):
    outcome = isolated(op_then_pool, "spawn", timeout=300, hang_after=120)
    assert outcome.verdict == "ok", outcome.explanation
    assert outcome.result == [1e9] * 4
"""


@needs_tensorflow
def test_tensorflow_freeze_is_hung_and_spawn_is_ok(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_freeze=FREEZE)
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
