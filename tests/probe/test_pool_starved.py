"""A thread pool whose every thread runs a task that waits for tasks of the same pool, under
the probe: the starvation happens for real, and the probe must call it hung, name the
``thread-pool-starved`` cause with the line the tasks wait at and the fix, and leave
nothing running; a pool whose tasks wait on another pool's blocked tasks must not get it.

Modelled on langchain-ai/langchain#10638 (a runnable on an executor of max_concurrency=1
submits its inner call to the same executor and waits on ``.result()``) and the warning
in the concurrent.futures documentation (python/cpython#141620).

Nothing waits on a fixed sleep: the outer tasks meet at a ``threading.Barrier`` of as
many parties as the pool has threads before they submit, so every thread holds an outer
task when the inner ones are queued, however the threads are scheduled; the hang is the
probe's own verdict after --hang-after seconds with no CPU progress. The deadlines given
are bounds only a stuck run reaches.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from gpudoctor import hazards
from tests.probe.helpers import gpudoctor_json, marked, running, script, wait_gone

PY = sys.executable
pytestmark = pytest.mark.slow

TIMEOUT = 120
HANG_AFTER = "3"

EXECUTOR = """\
import sys
import threading
from concurrent.futures import ThreadPoolExecutor, wait

WORKERS = int(sys.argv[2])
pool = ThreadPoolExecutor(max_workers=WORKERS)  # MADE
ready = threading.Barrier(WORKERS)


def embed(chunk):
    return len(chunk)


def process(doc):
    ready.wait()  # every thread holds an outer task before any inner one is queued
    futures = [pool.submit(embed, c) for c in doc.split()]
    if sys.argv[1] == "wait":
        wait(futures)  # WAITS
        return [f.result() for f in futures]
    return [f.result() for f in futures]  # RESULT


if __name__ == "__main__":
    print(list(pool.map(process, ["a b"] * WORKERS)))  # CALLER
"""

THREAD_POOL = """\
import threading
from multiprocessing.pool import ThreadPool

WORKERS = 3
ready = threading.Barrier(WORKERS)


def leaf(n):
    return n * 2


def branch(n):
    ready.wait()
    return sum(pool.apply_async(leaf, (i,)).get() for i in range(n))  # GETS


if __name__ == "__main__":
    pool = ThreadPool(WORKERS)  # MADE
    print(pool.map(branch, [1, 2, 3]))
"""

# The look-alike: the outer tasks wait on futures of ANOTHER executor, whose tasks block on
# an event nobody sets. A hang, but not a starved pool: a second pool is there, not idle.
OTHER_EXECUTOR = """\
import threading
from concurrent.futures import ThreadPoolExecutor

outer = ThreadPoolExecutor(max_workers=2)
inner = ThreadPoolExecutor(max_workers=2)
never = threading.Event()


def fetch(n):
    never.wait()  # BLOCKED
    return n


def process(n):
    return inner.submit(fetch, n).result()


if __name__ == "__main__":
    print(list(outer.map(process, [1, 2])))
"""

# The other look-alike: one thread of the pool waits for a task of the same pool, the other
# is blocked in the user's code on an event nobody sets; the pool is not starved by its own
# waits alone (free that thread and the queued task runs).
ONE_BLOCKED = """\
import threading
from concurrent.futures import ThreadPoolExecutor

pool = ThreadPoolExecutor(max_workers=2)
ready = threading.Barrier(2)
never = threading.Event()


def leaf():
    return 1


def waits():
    ready.wait()
    return pool.submit(leaf).result()


def blocks():
    ready.wait()
    never.wait()


if __name__ == "__main__":
    first, second = pool.submit(waits), pool.submit(blocks)
    print(first.result(), second.result())
"""


def _line(source: str, marker: str) -> int:
    return next(i for i, text in enumerate(source.splitlines(), start=1) if marker in text)


def _run(tmp_path: Path, source: str, *args: str, native: bool = True) -> tuple[Path, dict[str, Any]]:
    path = script(tmp_path, "prog.py", source)
    options = [] if native else ["--no-native-stacks"]
    code, doc, _ = gpudoctor_json(["--quiet", "--timeout", str(TIMEOUT), "--hang-after", HANG_AFTER, *options, "--",
                                   PY, str(path), *args], timeout=TIMEOUT + 60)
    assert (code, doc["verdict"], doc["stop_reason"]) == (1, "hung", "hung"), doc["explanation"]
    return path, doc


def _nothing_left(doc: dict[str, Any], mark: str) -> None:
    assert running(p["pid"] for p in doc["processes"]) == []
    assert wait_gone(marked(mark), timeout=30) == []


@pytest.mark.parametrize(("how", "marker", "native", "workers"), [
    ("result", "# RESULT", True, 2), ("wait", "# WAITS", True, 2), ("result", "# RESULT", False, 2),
    ("result", "# RESULT", True, 1)])  # (one thread: langchain's max_concurrency=1)
def test_an_executor_whose_tasks_wait_for_tasks_of_the_same_executor_is_starved(
        tmp_path: Path, how: str, marker: str, native: bool, workers: int, no_leftovers: str) -> None:
    path, doc = _run(tmp_path, EXECUTOR, how, str(workers), native=native)
    starved = [c for c in doc["causes"] if c["kind"] == hazards.THREAD_POOL_STARVED.cause]
    assert len(starved) == 1, doc["causes"]
    cause = starved[0]
    root = next(p for p in doc["processes"] if p["start"] == "root")
    assert cause["processes"] == [root["pid"]] and cause["certainty"] == "observed"
    assert cause["fix"] == hazards.THREAD_POOL_STARVED.fix
    lead = cause["evidence"][0]
    at = f"in your code process ({'' if native else str(tmp_path) + '/'}{path.name}:{_line(EXECUTOR, marker)})"
    every = "every" if workers > 1 else "the only"
    assert lead.startswith(f"Thread-pool starvation: in pid {root['pid']}, {every} worker thread "
                           f"({workers} of {workers}) of the "
                           f"ThreadPoolExecutor made at {path.name}:{_line(EXECUTOR, '# MADE')} "
                           "(`ThreadPoolExecutor(max_workers=WORKERS)`)"), lead
    assert f"runs a task that waits, {at}, for other tasks" in lead, lead
    wait = "result (" if how == "result" else "wait ("  # faulthandler: "result"; py-spy: "Future.result"
    assert f"for other tasks ({wait}" in lead or f"for other tasks (Future.{wait}" in lead, lead
    assert "concurrent/futures/_base.py:" in lead, lead
    if native:  # py-spy names the threads: the pool by its threads' name, the caller by its own
        assert "(`ThreadPoolExecutor(max_workers=WORKERS)`), whose threads are named ThreadPoolExecutor-0_*, runs" \
            in lead, lead
        assert "MainThread waits in Executor.map" in cause["evidence"][1]
    assert f"{path.name}:{_line(EXECUTOR, '# CALLER')})" in cause["evidence"][1]
    lines = doc["explanation"].splitlines()
    assert lead in lines and hazards.THREAD_POOL_STARVED.fix_line in lines
    _nothing_left(doc, no_leftovers)


def test_a_thread_pool_whose_tasks_get_results_of_the_same_pool_is_starved(tmp_path: Path,
                                                                            no_leftovers: str) -> None:
    path, doc = _run(tmp_path, THREAD_POOL)
    cause = next(c for c in doc["causes"] if c["kind"] == hazards.THREAD_POOL_STARVED.cause)
    lead = cause["evidence"][0]
    assert (f"every worker thread (3 of 3) of the ThreadPool made at {path.name}:{_line(THREAD_POOL, '# MADE')} "
            "(`ThreadPool(WORKERS)`) runs a task that waits") in lead, lead
    assert f"in your code branch ({path.name}:{_line(THREAD_POOL, '# GETS')})" in lead, lead
    assert "ApplyResult.get (" in lead and "multiprocessing/pool.py:" in lead, lead
    assert cause["fix"] == hazards.THREAD_POOL_STARVED.fix
    _nothing_left(doc, no_leftovers)


@pytest.mark.parametrize(("source", "native"), [(OTHER_EXECUTOR, True), (OTHER_EXECUTOR, False),
                                              (ONE_BLOCKED, True)])
def test_tasks_that_wait_on_another_executor_or_beside_a_blocked_thread_are_no_starved_pool(
        tmp_path: Path, source: str, native: bool, no_leftovers: str) -> None:
    _, doc = _run(tmp_path, source, native=native)
    assert hazards.THREAD_POOL_STARVED.cause not in {c["kind"] for c in doc["causes"]}, doc["causes"]
    assert "Thread-pool starvation" not in doc["explanation"]
    _nothing_left(doc, no_leftovers)
