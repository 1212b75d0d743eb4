"""Real programs in which a pool, an executor or a subprocess is waited for in a way that
cannot end, under the probe: a Pool's results read after its ``with`` block terminated it,
an executor's shutdown held by a task stuck in a read, a subprocess waited for while its
output pipe is full; and Pool workers whose memory grows task after task. The probe must
name the mechanism (not a lost task, not the threads at the fork, not a copy per worker),
the user's line and the fix, and leave nothing running.

The programs follow the warnings of CPython's documentation (cited in each); they are not
the held-out set's. Nothing waits on a fixed sleep: a hang is the probe's own verdict after
--hang-after seconds in which no process made CPU progress. The recorded-event tests at
the end feed the same shapes without running them, for what must not be claimed.
"""

from __future__ import annotations

import shutil
import signal
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from gpudoctor import hazards
from gpudoctor.probe import explain_memory_growth
from gpudoctor.probe.diagnose import diagnose
from gpudoctor.probe.diagnosis import WorkerCopies
from gpudoctor.probe.sampler import Peaks, Sample
from gpudoctor.probe.stacks import Stack
from gpudoctor.probe.supervise import Limits, ProcessRun, RunRecord
from gpudoctor.probe.verdicts import StopReason
from tests.probe.helpers import gpudoctor_json, marked, running, script, wait_gone

PY = sys.executable
TIMEOUT = 120
HANG_AFTER = "2"


def _line(source: str, text: str) -> int:
    return [i for i, line in enumerate(source.splitlines(), 1) if line.strip() == text.strip()][0]


def _probe(tmp_path: Path, source: str, *args: str) -> tuple[Path, int, dict[str, Any]]:
    path = script(tmp_path, "prog.py", source)
    code, doc, _ = gpudoctor_json(["--timeout", str(TIMEOUT), "--hang-after", HANG_AFTER, "--", PY, str(path), *args],
                                  timeout=TIMEOUT + 60)
    return path, code, doc


def _only_cause(doc: dict[str, Any], kind: str) -> dict[str, Any]:
    assert [c["kind"] for c in doc["causes"]] == [kind], (doc["causes"], doc["explanation"])
    return dict(doc["causes"][0])


def _nothing_left(doc: dict[str, Any], mark: str) -> None:
    assert running(p["pid"] for p in doc["processes"]) == []
    assert wait_gone(marked(mark), timeout=30) == []


ASYNC_AFTER_WITH = """\
# apply_async results collected after the `with Pool()` block: its exit terminated the
# pool, and get() waits for ever. The multiprocessing documentation: Pool's "__exit__()
# calls terminate()".
import multiprocessing
import time


def simulate(seed):
    time.sleep(3600)  # a long simulation: still running when the block ends
    return seed


if __name__ == "__main__":
    with multiprocessing.get_context("fork").Pool(2) as pool:
        pending = [pool.apply_async(simulate, (seed,)) for seed in range(4)]
    scores = [r.get() for r in pending]
    print(sum(scores))
"""


def test_results_read_after_the_pools_with_block_are_a_terminated_pool_not_a_lost_task(
        tmp_path: Path, no_leftovers: str) -> None:
    path, code, doc = _probe(tmp_path, ASYNC_AFTER_WITH)
    assert (code, doc["verdict"]) == (1, "hung"), doc["explanation"]
    cause = _only_cause(doc, hazards.POOL_TERMINATED_EARLY.cause)  # not worker-died-in-task
    assert cause["certainty"] == "observed" and cause["fix"] == hazards.POOL_TERMINATED_EARLY.fix
    lead = cause["evidence"][0]
    assert lead.startswith("The pool was terminated while results were still expected")
    get_line = _line(ASYNC_AFTER_WITH, "scores = [r.get() for r in pending]")
    assert f"called from your code <listcomp> ({path.name}:{get_line})" in lead  # 3.11: a frame of its own
    assert "as `Pool.terminate()` ends them" in lead
    text = doc["explanation"]
    assert hazards.POOL_TERMINATED_EARLY.fix_line in text.splitlines()
    assert "Worker died" not in text and hazards.WORKER_DIED_IN_TASK.fix_line not in text
    _nothing_left(doc, no_leftovers)


EXECUTOR_STUCK_READ = """\
# A ProcessPoolExecutor task blocks in a read that never completes; result(timeout=)
# gives up, but the `with` block's shutdown(wait=True) waits for the task for ever. A
# thread of the user's runs at the fork. The concurrent.futures documentation: shutdown(wait=True)
# waits for pending futures, and a running call cannot be cancelled.
import concurrent.futures
import os
import threading

stop = threading.Event()


def heartbeat():
    stop.wait()


def fetch(fd):
    return os.read(fd, 1)  # nobody ever writes: waits for ever


if __name__ == "__main__":
    read_end, write_end = os.pipe()
    threading.Thread(target=heartbeat, daemon=True).start()
    with concurrent.futures.ProcessPoolExecutor(max_workers=1) as executor:
        future = executor.submit(fetch, read_end)
        try:
            future.result(timeout=0.5)
        except concurrent.futures.TimeoutError:
            print("fetch timed out", flush=True)
    print("done")
"""


FETCH_LINE = "return os.read(fd, 1)  # nobody ever writes: waits for ever"


def test_an_executors_shutdown_waiting_for_a_stuck_task_is_named_not_the_threads_at_the_fork(
        tmp_path: Path, no_leftovers: str) -> None:
    path, code, doc = _probe(tmp_path, EXECUTOR_STUCK_READ)
    assert (code, doc["verdict"]) == (1, "hung"), doc["explanation"]
    cause = _only_cause(doc, hazards.EXECUTOR_SHUTDOWN_WAITS.cause)  # no multithreaded-fork (GD102)
    assert cause["rule"] is None and cause["fix"] == hazards.EXECUTOR_SHUTDOWN_WAITS.fix
    lead = cause["evidence"][0]
    with_line = _line(EXECUTOR_STUCK_READ, "with concurrent.futures.ProcessPoolExecutor(max_workers=1) as executor:")
    assert f"called from your code <module> ({path.name}:{with_line})" in lead
    assert f"waits in your code fetch ({path.name}:{_line(EXECUTOR_STUCK_READ, FETCH_LINE)})" in lead
    assert "shutdown" in lead
    text = doc["explanation"]
    assert hazards.EXECUTOR_SHUTDOWN_WAITS.fix_line in text.splitlines()
    assert "GD102" not in text and hazards.MULTITHREADED_FORK.why not in text
    assert hazards.MULTITHREADED_FORK.fix_line not in text
    _nothing_left(doc, no_leftovers)


POPEN_WAIT_STDERR = """\
# A child's large output sent to a pipe the parent reads only after wait(): the child
# blocks writing, the parent in waitpid: the warning at Popen.wait in the subprocess
# documentation.
import subprocess
import sys

if __name__ == "__main__":
    argv = sys.argv[1:]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    status = proc.wait()
    log = proc.stdout.read() + proc.stderr.read()
    print(status, len(log))
"""


def _children() -> list[tuple[str, list[str]]]:
    found = [("python-stderr", [PY, "-c", "import sys; sys.stderr.write('warning: x' * 50000)"])]
    if shutil.which("seq"):
        found.append(("seq-stdout", ["seq", "1", "500000"]))
    return found


@pytest.mark.parametrize(("name", "child"), _children(), ids=[name for name, _ in _children()])
def test_a_subprocess_waited_for_while_its_pipe_is_full_is_named(tmp_path: Path, name: str, child: list[str],
                                                                 no_leftovers: str) -> None:
    path, code, doc = _probe(tmp_path, POPEN_WAIT_STDERR, *child)
    assert (code, doc["verdict"]) == (1, "hung"), doc["explanation"]
    cause = _only_cause(doc, hazards.PIPE_FULL_BEFORE_WAIT.cause)
    assert cause["fix"] == hazards.PIPE_FULL_BEFORE_WAIT.fix
    lead = cause["evidence"][0]
    # py-spy names the file as imported ("prog.py"), faulthandler (where py-spy failed) by its path.
    assert "called from your code <module> (" in lead
    assert f"{path.name}:{_line(POPEN_WAIT_STDERR, 'status = proc.wait()')})" in lead
    assert "wait (" in lead and "subprocess.py:" in lead and child[-1][:20] in lead  # the child's command
    assert hazards.PIPE_FULL_BEFORE_WAIT.fix_line in doc["explanation"].splitlines()
    _nothing_left(doc, no_leftovers)


GROWING_WORKERS = """\
# Pool workers that keep a little of every task in a module-level list: each grows task
# after task until memory runs out. The multiprocessing documentation: maxtasksperchild
# "enable[s] unused resources to be freed" by replacing a worker after N tasks.
import multiprocessing
import time

_seen = []


def tokenize(doc_id):
    text = f"{doc_id:08d}" * 65536
    _seen.append(text.encode())  # kept for ever: half a MiB per task
    time.sleep(0.01)
    return len(text)


if __name__ == "__main__":
    with multiprocessing.get_context("fork").Pool(2) as pool:
        print(sum(pool.imap_unordered(tokenize, range(100000))))
"""


def test_pool_workers_growing_task_after_task_get_maxtasksperchild_not_the_copy_fix(
        tmp_path: Path, no_leftovers: str) -> None:
    path = script(tmp_path, "prog.py", GROWING_WORKERS)
    code, doc, _ = gpudoctor_json(["--memory-limit", "400MiB", "--timeout", str(TIMEOUT), "--", PY, str(path)],
                                  timeout=TIMEOUT + 60)
    assert (code, doc["verdict"], doc["stop_reason"]) == (1, "oom", "memory-limit"), doc["explanation"]
    cause = _only_cause(doc, hazards.WORKER_MEMORY_GROWS.cause)  # not workers-each-a-copy
    assert cause["fix"] == hazards.WORKER_MEMORY_GROWS.fix and "maxtasksperchild" in cause["fix"]
    assert cause["evidence"][0].startswith("Worker memory grew through each worker's life: 2 fork workers")
    lines = doc["explanation"].splitlines()
    assert hazards.WORKER_MEMORY_GROWS.fix_line in lines and hazards.WORKERS_EACH_A_COPY.fix_line not in lines
    assert len(doc["memory"]["workers"]["grew"]) == 2
    # Where each was when the tree stopped, for those between two tasks no line of the user's.
    assert all(at.startswith(f"tokenize ({path.name}:") for _, at in doc["memory"]["workers"]["grew_at"])
    _nothing_left(doc, no_leftovers)


# Recorded shapes (py-spy dumps as CPython 3.11 leaves them): what must not be claimed.
PARENT_IN_GET = """\
Thread 100 (idle): "MainThread"
    PyThread_acquire_lock_timed (libpython3.11.so.1.0)
    Condition.wait (threading.py:327)
    ApplyResult.wait (multiprocessing/pool.py:765)
    ApplyResult.get (multiprocessing/pool.py:768)
    <module> (jobs.py:30)
"""
POOL_WORKER = """\
Thread 103 (idle): "MainThread"
    _multiprocessing_SemLock_acquire_impl (semaphore.c:357)
    SemLock.__enter__ (multiprocessing/synchronize.py:95)
    SimpleQueue.get (multiprocessing/queues.py:364)
    worker (multiprocessing/pool.py:114)
    BaseProcess.run (multiprocessing/process.py:108)
    BaseProcess._bootstrap (multiprocessing/process.py:314)
"""


def _track(pid: int, alive: bool, wchan: str = "futex_wait_queue") -> ProcessRun:
    return ProcessRun(pid=pid, ppid=1 if pid == 100 else 100, cmdline=("python", "jobs.py"), first_seen=0.0,
                      last_seen=4.0, alive_at_stop=alive, exit_code=None, stalled_for=3.5 if alive else 0.0,
                      state="sleeping", wchan=wchan, threads=1, rss_peak=12 << 20, killed_by_supervisor=alive)


def _pool_run(codes: dict[int, int], alive: tuple[int, ...], stacks: dict[int, str]) -> RunRecord:
    forks = [{"event": "fork-child", "pid": pid, "ppid": 100, "t": 0.1, "threads_at_fork": 3, "runtimes_at_fork": []}
             for pid in (*codes, *alive)]
    reaped = [{"event": "reaped", "pid": 100, "ppid": 1, "t": 0.2, "child": pid, "code": code}
              for pid, code in codes.items()]
    return RunRecord(
        command=("python", "jobs.py"), stop_reason=StopReason.HUNG, signal_received=None, root_pid=100,
        exit_code=-15, duration=4.0, limits=Limits(hang_after=3.0),
        processes=(_track(100, True), *(_track(pid, True) for pid in alive)), events=forks + reaped,
        samples=[], peaks=Peaks({}, {}, {}, {}, None, ()),
        stacks={pid: Stack(text, "py-spy", None) for pid, text in stacks.items()},
        stdout="", stderr="", notes=(), oom_kills=None)


def test_workers_all_ended_by_sigterm_with_none_in_their_place_are_a_terminated_pool() -> None:
    diagnosis = diagnose(_pool_run({101: -signal.SIGTERM, 102: 0}, (), {100: PARENT_IN_GET}))
    assert [(c.kind, c.parent, c.processes) for c in diagnosis.causes] == [
        (hazards.POOL_TERMINATED_EARLY.cause, 100, (101, 102))]
    lines = diagnosis.explanation.splitlines()
    assert any("ApplyResult.get (multiprocessing/pool.py:768), called from your code <module> (jobs.py:30)" in line
               and "ended (pid 101 was stopped at t=0.2 s by SIGTERM from its parent; pid 102 exited cleanly)" in line
               for line in lines), lines
    assert "Worker died" not in diagnosis.explanation
    # Both took the shutdown's sentinel before terminate() signalled them: still none left.
    diagnosis = diagnose(_pool_run({101: 0, 102: 0}, (), {100: PARENT_IN_GET}))
    assert [c.kind for c in diagnosis.causes] == [hazards.POOL_TERMINATED_EARLY.cause]
    assert "(pids 101, 102 exited cleanly)" in diagnosis.explanation


def test_a_worker_sigtermed_from_outside_while_a_live_worker_replaced_it_is_still_a_lost_task() -> None:
    diagnosis = diagnose(_pool_run({101: -signal.SIGTERM}, (103,), {100: PARENT_IN_GET, 103: POOL_WORKER}))
    assert [c.kind for c in diagnosis.causes] == [hazards.WORKER_DIED_IN_TASK.cause]


def test_a_worker_that_died_of_sigkill_beside_a_sigterm_is_no_terminated_pool() -> None:
    diagnosis = diagnose(_pool_run({101: -signal.SIGTERM, 102: -signal.SIGKILL}, (), {100: PARENT_IN_GET}))
    assert hazards.POOL_TERMINATED_EARLY.cause not in [c.kind for c in diagnosis.causes]


def test_threads_at_the_fork_are_not_named_for_children_reading_a_pipe_only_for_ones_on_a_futex() -> None:
    run = _pool_run({}, (101, 102), {})
    reading = RunRecord(**{**run.__dict__, "processes": (_track(100, True), _track(101, True, "anon_pipe_read"),
                                                         _track(102, True, "wait_woken"))})
    assert hazards.MULTITHREADED_FORK.cause not in [c.kind for c in diagnose(reading).causes]
    assert hazards.MULTITHREADED_FORK.why not in diagnose(reading).explanation
    assert [c.kind for c in diagnose(run).causes] == [hazards.MULTITHREADED_FORK.cause]


def _samples(pid: int, sizes: list[int]) -> list[Sample]:
    return [Sample(t=0.5 * (i + 1), kind="rss", bytes=size << 20, pid=pid) for i, size in enumerate(sizes)]


def _grew(start: str, parent_rss: int, first: list[int], second: list[int]) -> tuple[explain_memory_growth.Rise, ...]:
    run = SimpleNamespace(samples=_samples(101, first) + _samples(102, second))
    workers = WorkerCopies(parent=100, start=start, processes=(101, 102), siblings=2, each=300 << 20,
                           together=600 << 20, total=640 << 20, copies=True, parent_rss=parent_rss << 20)
    return explain_memory_growth.grew(run, workers)  # type: ignore[arg-type]


def test_growth_through_a_workers_life_is_told_from_a_plateau_reached_early_and_from_copying() -> None:
    steady = [40, 80, 115, 150, 190, 230, 260, 300]
    assert [r.pid for r in _grew("fork", 30, steady, [s + 10 for s in steady])] == [101, 102]
    assert _grew("fork", 30, [40, 280, 300, 300, 300, 300, 300, 300], steady) == ()  # one loaded its copy early
    assert _grew("spawn", 30, [40, 40, 40, 40, 40, 40, 300, 300], steady) == ()  # one step late: a load
    assert _grew("fork", 400, steady, steady) == ()  # no more than its parent holds: copy-on-write may explain it
    assert _grew("fork", 30, steady[:4], steady[:4]) == ()  # too short a life to tell


def test_workers_too_short_lived_to_tell_growth_from_a_copy_are_said_to_be_so() -> None:
    steady = [40, 80, 115, 150, 190, 230, 260, 300]
    workers = WorkerCopies(parent=100, start="fork", processes=(101, 102), siblings=2, each=300 << 20,
                           together=600 << 20, total=640 << 20, copies=True, parent_rss=30 << 20)
    short = SimpleNamespace(samples=_samples(101, steady[:4]) + _samples(102, steady))
    full = SimpleNamespace(samples=_samples(101, steady) + _samples(102, steady))
    assert explain_memory_growth.too_short(short, workers)  # type: ignore[arg-type]
    assert not explain_memory_growth.too_short(full, workers)  # type: ignore[arg-type]
    assert "maxtasksperchild" in explain_memory_growth.SHORT_LIVES
