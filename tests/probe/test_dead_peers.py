"""Real programs in which a process dies or blocks and others wait on it, under the probe:
the probe must name the cause from the process tree, the exit statuses and signals, and
the waiting processes' stacks, with the user's lines and the fix, and leave nothing running.

The programs are modelled on public reports (cited in each); they are not the held-out
set's. Nothing waits on a fixed sleep: a hang is the probe's own verdict after
--hang-after seconds in which no process made CPU progress, a failure ends the command by
itself, and a process that must die first writes its PID to a file that the test reads
after the run. The deadlines given are bounds only a stuck run reaches.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from gpudoctor import hazards
from tests.probe.helpers import WRITE_PIDS, gpudoctor_json, marked, read_pids, running, script, wait_gone

PY = sys.executable
pytestmark = pytest.mark.slow
TIMEOUT = 120
HANG_AFTER = "2"


def _line(source: str, text: str) -> int:
    return [i for i, line in enumerate(source.splitlines(), 1) if line.strip() == text.strip()][0]


def _probe(tmp_path: Path, source: str, *args: str, hang: bool = True) -> tuple[Path, int, dict[str, Any]]:
    path = script(tmp_path, "prog.py", source)
    options = ["--timeout", str(TIMEOUT)] + (["--hang-after", HANG_AFTER] if hang else [])
    code, doc, _ = gpudoctor_json([*options, "--", PY, str(path), str(tmp_path / "pids"), *args],
                                  timeout=TIMEOUT + 60)
    return path, code, doc


def _cause(doc: dict[str, Any], kind: str) -> dict[str, Any]:
    found = [c for c in doc["causes"] if c["kind"] == kind]
    assert len(found) == 1, (doc["causes"], doc["explanation"])
    return found[0]


def _nothing_left(doc: dict[str, Any], mark: str) -> None:
    assert running(p["pid"] for p in doc["processes"]) == []
    assert wait_gone(marked(mark), timeout=30) == []


def _root(doc: dict[str, Any]) -> int:
    return int(next(p["pid"] for p in doc["processes"] if p["start"] == "root"))


LOCK_ACQUIRE = """\
# A worker killed while it holds a multiprocessing.Lock taken with acquire(): the others
# wait for ever. Modelled on CPython gh-88304 (bpo-44138, "multiprocessing documentation
# should note behavior when process with Lock dies") and Stack Overflow 51485212 ("Python
# multiprocessing Lock is not released when the process is killed").
import multiprocessing
import os
import signal
import sys

""" + WRITE_PIDS + """

def export(lock, counter, n, taken):
    if n:
        taken.wait()  # the first exporter holds the lock by now
    for _ in range(20):
        lock.acquire()
        counter.value += 1
        if n == 0:
            taken.set()
            write_pids(sys.argv[1], [os.getpid()])
            os.kill(os.getpid(), signal.SIGKILL)
        lock.release()


if __name__ == "__main__":
    lock = multiprocessing.Lock()
    counter = multiprocessing.Value("i", 0, lock=False)
    taken = multiprocessing.Event()
    exporters = [multiprocessing.Process(target=export, args=(lock, counter, n, taken)) for n in range(3)]
    for p in exporters:
        p.start()
    for p in exporters:
        p.join()
"""


def test_a_process_killed_holding_a_lock_is_the_cause_of_the_others_wait(tmp_path: Path, no_leftovers: str) -> None:
    path, code, doc = _probe(tmp_path, LOCK_ACQUIRE)
    (dead,) = read_pids(tmp_path / "pids", 1, timeout=0)
    assert (code, doc["verdict"]) == (1, "hung"), doc["explanation"]
    cause = doc["causes"][0]
    assert (cause["kind"], cause["certainty"], cause["processes"]) == ("lock-holder-died", "observed", [dead])
    assert cause["fix"] == hazards.LOCK_HOLDER_DIED.fix
    lead = cause["evidence"][0]
    assert lead.startswith(f"Lock holder died: pid {dead} died of SIGKILL")
    assert f"called from your code export ({path.name}:{_line(LOCK_ACQUIRE, 'lock.acquire()')})" in lead
    assert "Most likely it held that lock when it died (it ran export, as they do)" in lead
    assert f"waits for them in join, called from your code <module> ({path.name}:" in cause["evidence"][1]
    assert [c["kind"] for c in doc["causes"]] == ["lock-holder-died"]  # no Pool, no lost task
    lines = doc["explanation"].splitlines()
    assert lead in lines and hazards.LOCK_HOLDER_DIED.fix_line in lines
    assert "Pool" not in doc["explanation"]
    _nothing_left(doc, no_leftovers)


PIPE_BOTH_SEND = """\
# Parent and child each send a large message on one duplex Pipe before receiving: both
# block in send for ever. Modelled on CPython gh-84810 (bpo-40636, "Connection.send
# blocks when the pipe is full") and Stack Overflow 10028809 ("Python multiprocessing
# Pipe deadlock with large data").
import multiprocessing
import sys

PAYLOAD = bytes(8 << 20)


def render(conn):
    conn.send_bytes(PAYLOAD)
    conn.recv_bytes()


if __name__ == "__main__":
    ours, theirs = multiprocessing.Pipe()
    child = multiprocessing.get_context(sys.argv[2]).Process(target=render, args=(theirs,))
    child.start()
    ours.send_bytes(PAYLOAD)
    ours.recv_bytes()
    child.join()
"""


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_both_ends_of_a_pipe_sending_is_named_with_both_lines(tmp_path: Path, method: str,
                                                              no_leftovers: str) -> None:
    path, code, doc = _probe(tmp_path, PIPE_BOTH_SEND, method)
    assert (code, doc["verdict"]) == (1, "hung"), doc["explanation"]
    cause = _cause(doc, "pipe-both-sending")
    assert cause["certainty"] == "observed" and cause["fix"] == hazards.PIPE_BOTH_SENDING.fix
    root = _root(doc)
    assert root in cause["processes"] and len(cause["processes"]) == 2
    (lead,) = cause["evidence"]
    assert f"called from your code <module> ({path.name}:{_line(PIPE_BOTH_SEND, 'ours.send_bytes(PAYLOAD)')})" in lead
    assert f"called from your code render ({path.name}:{_line(PIPE_BOTH_SEND, 'conn.send_bytes(PAYLOAD)')})" in lead
    lines = doc["explanation"].splitlines()
    assert lead in lines and hazards.PIPE_BOTH_SENDING.fix_line in lines
    assert "Pool.map" not in doc["explanation"] and "waits for it" not in doc["explanation"]
    _nothing_left(doc, no_leftovers)


QUEUE_CHILD_DIED = """\
# A child raises before it puts its result on the Queue: the parent's get() waits for ever.
# Modelled on CPython gh-67241 (bpo-23051, "multiprocessing.Queue.get() hangs when the
# process that should put died") and Stack Overflow 12693424 ("Python multiprocessing
# queue get hangs after a child exception").
import multiprocessing

TABLE = {"a": 1, "b": 2, "c": 3}


def lookup(key, out):
    out.put((key, TABLE[key]))


if __name__ == "__main__":
    out = multiprocessing.Queue()
    keys = ["a", "b", "z"]
    for key in keys:
        multiprocessing.Process(target=lookup, args=(key, out)).start()
    found = dict(out.get() for _ in keys)
    print(found)
"""


def test_a_child_that_died_before_putting_its_result_is_what_the_parents_get_waits_for(
        tmp_path: Path, no_leftovers: str) -> None:
    path, code, doc = _probe(tmp_path, QUEUE_CHILD_DIED)
    assert (code, doc["verdict"]) == (1, "hung"), doc["explanation"]
    (dead,) = [p for p in doc["processes"] if p["exit_code"] == 1]
    assert dead["exception"].startswith("KeyError")
    cause = doc["causes"][0]
    assert (cause["kind"], cause["parent"], cause["processes"]) == ("result-never-sent", _root(doc), [dead["pid"]])
    assert cause["fix"] == hazards.RESULT_NEVER_SENT.fix and "timeout" in cause["fix"]
    lead = cause["evidence"][0]
    assert lead.startswith(f"Child died before sending its result: pid {dead['pid']} exited with status 1")
    assert "waits in Queue.get (multiprocessing/queues.py:" in lead
    assert f"your code <genexpr> ({path.name}:{_line(QUEUE_CHILD_DIED, 'found = dict(out.get() for _ in keys)')})" \
        in lead
    assert any(f"lookup ({path}:{_line(QUEUE_CHILD_DIED, 'out.put((key, TABLE[key]))')})" in e
               for e in cause["evidence"])
    assert "Pool" not in " ".join(cause["evidence"]) and "AsyncResult" not in doc["explanation"]
    assert hazards.RESULT_NEVER_SENT.fix_line in doc["explanation"].splitlines()
    _nothing_left(doc, no_leftovers)


TASK_EXIT = """\
# A Pool task that calls sys.exit on bad input: the worker ends, Pool.imap waits for ever.
# Modelled on CPython gh-53451 (bpo-9205, "Parent process hanging in multiprocessing if
# children terminate unexpectedly") and Stack Overflow 50366394 ("sys.exit in a
# multiprocessing pool worker hangs the pool").
import multiprocessing
import sys


def validate(record):
    if not record.strip():
        sys.exit(2)
    return record


def parse(record):
    return validate(record).upper()


if __name__ == "__main__":
    with multiprocessing.get_context(sys.argv[2]).Pool(2) as pool:
        print(list(pool.imap(parse, ["a", "b", " ", "d"])))
"""


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_a_task_that_called_sys_exit_is_named_with_its_line_and_the_fix(tmp_path: Path, method: str,
                                                                        no_leftovers: str) -> None:
    path, code, doc = _probe(tmp_path, TASK_EXIT, method)
    assert (code, doc["verdict"]) == (1, "hung"), doc["explanation"]
    (dead,) = [p for p in doc["processes"] if p["exit_code"] == 2]
    assert dead["exception"] == "SystemExit: 2"
    cause = doc["causes"][0]
    assert (cause["kind"], cause["processes"]) == ("task-called-exit", [dead["pid"]])
    assert cause["fix"] == hazards.TASK_CALLED_EXIT.fix
    exit_line = f"validate ({path}:{_line(TASK_EXIT, 'sys.exit(2)')})"
    assert (f"pid {dead['pid']} called sys.exit(2), from your code {exit_line}: SystemExit is not an Exception, so "
            "the Pool cannot return it as the task's error.") in cause["evidence"]
    assert "multiprocessing/pool.py:" in cause["evidence"][0] and f"{path.name}:" in cause["evidence"][0]
    assert "os._exit" not in doc["explanation"]
    lines = doc["explanation"].splitlines()
    assert hazards.TASK_CALLED_EXIT.fix_line in lines and hazards.WORKER_DIED_IN_TASK.fix_line not in lines
    _nothing_left(doc, no_leftovers)


MANAGER_KILLED = """\
# The Manager's server process is killed (as the OOM killer kills a manager grown too big)
# while workers append to a proxy list: every proxy call then fails. Modelled on CPython
# gh-74104 (bpo-29933, "multiprocessing Manager proxies raise after the manager process
# dies") and Stack Overflow 39658479 ("BrokenPipeError with a multiprocessing Manager").
import multiprocessing
import os
import signal
import sys

""" + WRITE_PIDS + """

def collect(results, started):
    started.release()
    for i in range(100_000):
        results.append(i)


if __name__ == "__main__":
    context = multiprocessing.get_context(sys.argv[2])
    manager = context.Manager()
    results = manager.list()
    started = context.Semaphore(0)
    workers = [context.Process(target=collect, args=(results, started)) for _ in range(2)]
    for w in workers:
        w.start()
    for w in workers:
        started.acquire()
    server = manager._process.pid
    write_pids(sys.argv[1], [server])
    os.kill(server, signal.SIGKILL)
    for w in workers:
        w.join()
    print(len(results))
"""


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_a_dead_manager_server_is_named_as_the_cause_of_its_clients_errors(tmp_path: Path, method: str,
                                                                         no_leftovers: str) -> None:
    path, code, doc = _probe(tmp_path, MANAGER_KILLED, method, hang=False)
    (server,) = read_pids(tmp_path / "pids", 1, timeout=0)
    assert (code, doc["verdict"]) == (1, "failed"), doc["explanation"]
    cause = _cause(doc, "manager-died")
    assert (cause["certainty"], cause["processes"]) == ("observed", [server])
    assert cause["fix"] == hazards.MANAGER_DIED.fix
    (lead,) = cause["evidence"]
    assert lead.startswith(f"Manager's server process died: pid {server} died of SIGKILL")
    # The bootstrap recorded what it ran: the server is named, not guessed.
    assert "It was the server process of a multiprocessing Manager (SyncManager-1, running " \
        "BaseManager._run_server)" in lead
    assert f"collect ({path}:{_line(MANAGER_KILLED, 'results.append(i)')})" in lead
    assert f"<module> ({path}:{_line(MANAGER_KILLED, 'print(len(results))')})" in lead
    assert hazards.MANAGER_DIED.fix_line in doc["explanation"].splitlines()
    _nothing_left(doc, no_leftovers)


EXECUTOR_KILLED = """\
# A ProcessPoolExecutor worker killed in a task (the OOM killer's SIGKILL, sent by the
# worker itself here once it holds its memory): every pending future raises
# BrokenProcessPool. Modelled on CPython gh-83285 (bpo-39104, "ProcessPoolExecutor hangs
# or breaks when a worker is killed") and Stack Overflow 56641428 ("BrokenProcessPool: A
# process in the process pool was terminated abruptly").
import os
import signal
import sys
from concurrent.futures import ProcessPoolExecutor, as_completed

""" + WRITE_PIDS + """

def thumbnail(size):
    pixels = bytearray(size << 20)
    if size > 100:
        write_pids(sys.argv[1], [os.getpid()])
        os.kill(os.getpid(), signal.SIGKILL)
    return len(pixels)


if __name__ == "__main__":
    with ProcessPoolExecutor(max_workers=2) as executor:
        futures = [executor.submit(thumbnail, size) for size in (4, 150, 4, 4)]
        for future in as_completed(futures):
            print(future.result())
"""


def test_the_worker_whose_death_broke_an_executor_is_linked_to_the_broken_pool(tmp_path: Path,
                                                                              no_leftovers: str) -> None:
    path, code, doc = _probe(tmp_path, EXECUTOR_KILLED, hang=False)
    (dead,) = read_pids(tmp_path / "pids", 1, timeout=0)
    assert (code, doc["verdict"]) == (1, "failed"), doc["explanation"]
    cause = doc["causes"][0]
    assert (cause["kind"], cause["parent"], cause["processes"]) == ("executor-worker-died", _root(doc), [dead])
    assert cause["fix"] == hazards.EXECUTOR_WORKER_DIED.fix and "max_tasks_per_child" in cause["fix"]
    (lead,) = cause["evidence"]
    assert lead.startswith(f"Executor's worker died: pid {dead} died of SIGKILL")
    assert "OOM killer" in lead and "every pending future raised BrokenProcessPool" in lead
    assert f"<module> ({path}:{_line(EXECUTOR_KILLED, 'print(future.result())')})" in lead
    assert hazards.EXECUTOR_WORKER_DIED.fix_line in doc["explanation"].splitlines()
    _nothing_left(doc, no_leftovers)


GUARDED_DEF = """\
# A spawn Pool whose task function is defined inside the main guard: every worker that
# takes a task dies of AttributeError, Pool.starmap waits for ever. Modelled on CPython
# gh-69240 (bpo-25053, "multiprocessing fails on functions defined in __main__ under
# spawn") and Stack Overflow 41385708 ("multiprocessing example giving AttributeError").
import multiprocessing

if __name__ == "__main__":
    def weigh(item, factor):
        return item * factor

    with multiprocessing.get_context("spawn").Pool(2) as pool:
        print(pool.starmap(weigh, [(i, 2) for i in range(4)], chunksize=1))
"""


def test_workers_that_cannot_get_their_function_are_one_cause_led_by_its_definition(
        tmp_path: Path, no_leftovers: str) -> None:
    path, code, doc = _probe(tmp_path, GUARDED_DEF)
    assert (code, doc["verdict"]) == (1, "hung"), doc["explanation"]
    assert [c["kind"] for c in doc["causes"]] == ["worker-not-importable"], doc["causes"]
    (cause,) = doc["causes"]
    assert cause["rule"] == "GD108" and cause["fix"] == hazards.WORKER_NOT_IMPORTABLE.fix
    guard = 'if __name__ == "__main__":'
    definition = (f"`weigh` is defined at {path}:{_line(GUARDED_DEF, 'def weigh(item, factor):')}, inside "
                  f"`{guard}` (line {_line(GUARDED_DEF, guard)})")
    assert cause["evidence"][0].startswith(definition)
    lines = doc["explanation"].splitlines()
    assert any(line.startswith(definition) for line in lines)
    raised = [line for line in lines if "raised AttributeError" in line]
    assert len(raised) == 1, lines
    assert hazards.WORKER_DIED_IN_TASK.fix_line not in lines and hazards.WORKER_NOT_IMPORTABLE.fix_line in lines
    _nothing_left(doc, no_leftovers)
