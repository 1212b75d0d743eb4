"""A ``multiprocessing.Pool`` callback that raises, under the probe (python/cpython#83371).

The exception kills the pool's result-handler thread in the parent: the job is never
completed and ``join()``/``get()`` wait for ever, while the worker-handler thread may spin
on the results nobody reads (CPU without progress). The probe must call it hung (the
spinning parent is wedged: its main thread made no progress), name the callback, its line
and the fix, and not blame an unpicklable exception. The programs are written for these
tests; nothing sleeps: the hang is the probe's own verdict after --hang-after seconds.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from gpudoctor import hazards
from gpudoctor.probe import error_strings, explain_exceptions, wedged
from gpudoctor.probe.explain_exceptions import CALLBACK, RESULT_HANDLER
from tests.probe.helpers import gpudoctor_json, marked, running, script, wait_gone

PY = sys.executable
TIMEOUT = 120
LIB = "/usr/lib/python3.11"

# What the dead thread prints (CPython 3.11), a callback's and an unpickling's.
CALLBACK_DIED = f"""\
Exception in thread Thread-3 (_handle_results):
Traceback (most recent call last):
  File "{LIB}/threading.py", line 1045, in _bootstrap_inner
    self.run()
  File "{LIB}/multiprocessing/pool.py", line 595, in _handle_results
    cache[job]._set(i, obj)
  File "{LIB}/multiprocessing/pool.py", line 779, in _set
    self._callback(self._value)
  File "/home/me/scores.py", line 36, in on_done
    summary[name] = n_errors / n_lines
ZeroDivisionError: division by zero
"""
UNPICKLING_DIED = f"""\
Exception in thread Thread-3 (_handle_results):
Traceback (most recent call last):
  File "{LIB}/threading.py", line 1045, in _bootstrap_inner
    self.run()
  File "{LIB}/multiprocessing/pool.py", line 579, in _handle_results
    task = get()
  File "{LIB}/multiprocessing/connection.py", line 251, in recv
    return _ForkingPickler.loads(buf.getbuffer())
TypeError: Timeout.__init__() missing 1 required positional argument: 'seconds'
"""

# apply_async's callback divides by a count that is zero for one task; many results are still
# queued behind it when the result handler dies, so the worker handler spins.
APPLY_CALLBACK = """\
import multiprocessing

totals = {}


def count(word):
    return word, sum(1 for c in word if c in "aeiou")


def record(result):
    word, vowels = result
    totals[word] = len(word) / vowels


if __name__ == "__main__":
    words = [f"word{i}a" for i in range(30)] + ["rhythm"] + [f"item{i}e" for i in range(30)]
    pool = multiprocessing.Pool(2)
    for word in words:
        pool.apply_async(count, (word,), callback=record)
    pool.close()
    pool.join()
    print(len(totals))
"""

# map_async's error_callback raises while it handles a task's failure; the caller waits in get().
MAP_ERROR_CALLBACK = """\
import multiprocessing

failures = []


def parse(text):
    return int(text)


def report(error):
    failures.append(error)
    raise RuntimeError(f"giving up after {len(failures)} failure")


if __name__ == "__main__":
    with multiprocessing.Pool(2) as pool:
        pending = pool.map_async(parse, ["1", "2", "x", "4"], error_callback=report)
        print(pending.get())
"""

# The caller gives up on the dead pool (get with a timeout) and computes on in its main
# thread for longer than --hang-after: a wedged pool's process still makes progress there.
GIVES_UP_AND_COMPUTES = """\
import multiprocessing
import os
import time


def square(x):
    return x * x


def keep(result):
    raise ValueError(f"no room for {result}")


if __name__ == "__main__":
    pool = multiprocessing.Pool(1)
    pending = pool.apply_async(square, (3,), callback=keep)
    try:
        pending.get(timeout=1)
    except multiprocessing.TimeoutError:
        print("gave up on the pool", flush=True)
    end, n = time.monotonic() + 5, 0
    while time.monotonic() < end:
        n += 1
    print("computed", n > 0, flush=True)
    os._exit(0)
"""


def _probe(tmp_path: Path, name: str, source: str) -> tuple[dict[str, Any], Path]:
    path = script(tmp_path, name, source)
    _, doc, _ = gpudoctor_json(["--timeout", str(TIMEOUT), "--hang-after", "2", "--", PY, str(path)],
                               timeout=TIMEOUT + 60)
    return doc, path


def _checked(doc: dict[str, Any], mark: str) -> dict[str, Any]:
    hazard = hazards.POOL_CALLBACK_RAISED
    assert doc["verdict"] == "hung", doc["explanation"]
    kinds = [c["kind"] for c in doc["causes"]]
    assert kinds[0] == hazard.cause, kinds
    assert hazards.TASK_EXCEPTION_UNPICKLABLE.cause not in kinds
    assert hazards.TASK_EXCEPTION_UNPICKLABLE.fix_line not in doc["explanation"]
    cause: dict[str, Any] = doc["causes"][0]
    assert cause["fix"] == hazard.fix and hazard.fix_line in doc["explanation"].splitlines()
    assert wait_gone([p["pid"] for p in doc["processes"]]) == []
    assert running(marked(mark)) == []
    return cause


def test_a_dead_threads_traceback_tells_a_callback_from_an_unpickling() -> None:
    assert [b.where for b in explain_exceptions._stderr_blocks(CALLBACK_DIED)] == [CALLBACK]
    assert [b.where for b in explain_exceptions._stderr_blocks(UNPICKLING_DIED)] == [RESULT_HANDLER]
    unpicklable = hazards.TASK_EXCEPTION_UNPICKLABLE.cause
    for text, kept in ((CALLBACK_DIED, False), (UNPICKLING_DIED, True), (CALLBACK_DIED + UNPICKLING_DIED, True)):
        matches = explain_exceptions.without_superseded(error_strings.find(text), text)
        assert any(m.pattern.category == unpicklable for m in matches) is kept


def _thread_died(pid: int, frames: list[list[object]]) -> dict[str, object]:
    return {"event": "thread-exception", "pid": pid, "t": 1.0, "thread": "Thread-3", "type": "ValueError",
            "message": "", "frames": frames}


def test_only_a_pool_result_handlers_death_wedges_its_process() -> None:
    handler = [[f"{LIB}/threading.py", 1045, "Thread._bootstrap_inner", ""],
               [f"{LIB}/multiprocessing/pool.py", 595, "Pool._handle_results", ""],
               [f"{LIB}/multiprocessing/pool.py", 779, "ApplyResult._set", ""], ["/home/me/a.py", 3, "f", ""]]
    own_thread = [[f"{LIB}/threading.py", 1045, "Thread._bootstrap_inner", ""], ["/home/me/a.py", 9, "poll", ""]]
    events = [_thread_died(10, handler), _thread_died(11, own_thread),
              {"event": "exception", "pid": 12, "t": 1.0, "frames": handler}]
    assert wedged.wedged(events) == {10}


@pytest.mark.slow
def test_an_apply_async_callback_that_raises_hangs_the_pool_and_is_named(tmp_path: Path,
                                                                        no_leftovers: str) -> None:
    doc, path = _probe(tmp_path, "vowels.py", APPLY_CALLBACK)
    cause = _checked(doc, no_leftovers)
    text = doc["explanation"]
    root = next(p for p in doc["processes"] if p["start"] == "root")
    assert cause["parent"] == root["pid"] and root["verdict"] == "hung"
    assert f"At your code {path}:12 (in record): totals[word] = len(word) / vowels" in text
    assert "ZeroDivisionError: division by zero" in text
    assert "The exception came out of the callback `record`" in text
    assert f"`apply_async(..., callback=record)` at {path}:19" in text
    assert "Pool.join" in text and f"{path.name}:21" in text  # where the parent waits for ever


@pytest.mark.slow
def test_a_map_async_error_callback_that_raises_hangs_get(tmp_path: Path, no_leftovers: str) -> None:
    doc, path = _probe(tmp_path, "parse.py", MAP_ERROR_CALLBACK)
    _checked(doc, no_leftovers)
    text = doc["explanation"]
    assert f"At your code {path}:12 (in report)" in text
    assert "RuntimeError: giving up after 1 failure" in text
    assert f"`map_async(..., error_callback=report)` at {path}:17" in text


@pytest.mark.slow
def test_a_process_whose_pool_died_is_not_hung_while_its_main_thread_computes(tmp_path: Path,
                                                                              no_leftovers: str) -> None:
    doc, _ = _probe(tmp_path, "recovers.py", GIVES_UP_AND_COMPUTES)
    root = next(p for p in doc["processes"] if p["start"] == "root")
    assert doc["verdict"] == "ok" and root["verdict"] == "ok", doc["explanation"]
    assert hazards.POOL_CALLBACK_RAISED.cause in [c["kind"] for c in doc["causes"]]
    assert wait_gone([p["pid"] for p in doc["processes"]]) == []
    assert running(marked(no_leftovers)) == []
