"""The catalogue of exceptions that mean something when processes share work, fed the
records and the stderr that real runs leave (CPython 3.11): what each entry recognises
and what it does not, the tracebacks of threads read from stderr, and the story told
once with the user's line and the fix.

The real programs run under the probe in test_exception_causes.py.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

from gpudoctor import hazards
from gpudoctor.probe import error_strings, explain, explain_exceptions
from gpudoctor.probe.diagnose import diagnose
from gpudoctor.probe.error_strings import CAUSE
from gpudoctor.probe.explain_exceptions import COMMAND, RESULT_HANDLER, WORKER, Seen
from gpudoctor.probe.failures import Frame, Raised
from gpudoctor.probe.sampler import Peaks
from gpudoctor.probe.supervise import Limits, ProcessRun, RunRecord
from gpudoctor.probe.verdicts import StopReason, Verdict

LIB = "/usr/lib/python3.11"
CONNECTION = Frame(f"{LIB}/multiprocessing/connection.py", 395, "Connection._recv", "chunk = read(handle, remaining)")
PROXY = Frame(f"{LIB}/multiprocessing/managers.py", 822, "BaseProxy._callmethod", "kind, result = conn.recv()")
USER = Frame("/home/me/job.py", 12, "work", "shared[key] = value")

RESULT_HANDLER_DIED = f"""\
Exception in thread Thread-3 (_handle_results):
Traceback (most recent call last):
  File "{LIB}/threading.py", line 1045, in _bootstrap_inner
    self.run()
  File "{LIB}/multiprocessing/pool.py", line 579, in _handle_results
    task = get()
           ^^^^^
  File "{LIB}/multiprocessing/connection.py", line 251, in recv
    return _ForkingPickler.loads(buf.getbuffer())
TypeError: Timeout.__init__() missing 1 required positional argument: 'seconds'
"""

INITIALIZER_FAILED = f"""\
Exception in initializer:
Traceback (most recent call last):
  File "{LIB}/concurrent/futures/process.py", line 240, in _process_worker
    initializer(*initargs)
  File "/home/me/serve.py", line 7, in warm_up
    MODEL = load(os.environ["MODEL_PATH"])
KeyError: 'MODEL_PATH'
"""


def _kind(type_: str, message: str, where: str, frames: tuple[Frame, ...] = ()) -> str | None:
    seen = Seen(1, where, Raised(type_, message, frames), False)
    known = next((k for k in explain_exceptions.CATALOGUE if k.matches(seen)), None)
    return known.hazard.cause if known else None


@pytest.mark.parametrize(("type_", "message", "where", "frames", "kind"), [
    ("multiprocessing.pool.MaybeEncodingError", "Error sending result: '<x.Y object at 0x1>'. Reason: "
     "'TypeError(\"cannot pickle '_io.TextIOWrapper' object\")'", COMMAND, (), "task-result-unpicklable"),
    ("RuntimeError", "Caught RuntimeError in DataLoader worker process 1.\nOriginal Traceback (most recent call "
     "last):\n...\nRuntimeError: unable to allocate shared memory(shm) for file </torch_1_2_0>: No space left on "
     "device (28)", COMMAND, (), "shared-memory-full"),
    ("RuntimeError", "DataLoader worker (pid 77) is killed by signal: Bus error. It is possible that dataloader's "
     "workers are out of shared memory. Please try to raise your shared memory limit.", COMMAND, (),
     "shared-memory-full"),
    ("RuntimeError", "received 0 items of ancdata", COMMAND, (), "too-many-open-files"),
    ("OSError", "[Errno 24] Too many open files: '/tmp/x'", WORKER, (), "too-many-open-files"),
    ("concurrent.futures.process.BrokenProcessPool", "A child process terminated abruptly, the process pool is not "
     "usable anymore", COMMAND, (), "broken-process-pool"),
    ("ConnectionResetError", "[Errno 104] Connection reset by peer", WORKER, (USER, PROXY, CONNECTION),
     "peer-process-gone"),
    ("EOFError", "", COMMAND, (USER, CONNECTION), "peer-process-gone"),
    # The same types outside multiprocessing's connections are the program's own business.
    ("EOFError", "EOF when reading a line", COMMAND, (Frame("/home/me/ask.py", 3, "<module>", "input()"),), None),
    ("ConnectionResetError", "[Errno 104] Connection reset by peer", COMMAND, (USER,), None),
    ("RuntimeError", "context has already been set", COMMAND, (), "start-method-set-twice"),
    ("AttributeError", "Can't pickle local object 'main.<locals>.square'", COMMAND, (), "worker-not-importable"),
    ("_pickle.PicklingError", "Can't pickle <function <lambda> at 0x7f>: attribute lookup <lambda> on __main__ "
     "failed", COMMAND, (), "worker-not-importable"),
    # A worker's own AttributeError of that kind is told by the dead-worker causes, not here.
    ("AttributeError", "Can't pickle local object 'f.<locals>.g'", WORKER, (), None),
    ("TypeError", "X.__init__() missing 1 required positional argument: 'y'", RESULT_HANDLER, (),
     "task-exception-unpicklable"),
    ("TypeError", "X.__init__() missing 1 required positional argument: 'y'", COMMAND, (), None),
    ("ValueError", "bad record", WORKER, (), None),
    # Pickled into a task: a synchronization object, a queue, a shared value; a pool, a process, a manager.
    ("RuntimeError", "Lock objects should only be shared between processes through inheritance", COMMAND, (),
     "sync-object-pickled"),
    ("RuntimeError", "c_double_Array_3 objects should only be shared between processes through inheritance", WORKER,
     (), "sync-object-pickled"),
    ("NotImplementedError", "pool objects cannot be passed between processes or pickled", COMMAND, (),
     "pool-pickled"),
    ("TypeError", "Pickling an AuthenticationString object is disallowed for security reasons", COMMAND, (),
     "pool-pickled"),
    ("NotImplementedError", "subclasses must implement score()", COMMAND, (), None),
    # torch.multiprocessing.spawn's report of a process: spawn's story, whatever the process raised.
    ("torch.multiprocessing.spawn.ProcessRaisedException", "\n\n-- Process 1 terminated with the following error:\n"
     "Traceback (most recent call last):\nOSError: [Errno 24] Too many open files\n", COMMAND, (),
     "spawned-process-raised"),
    ("torch.multiprocessing.spawn.ProcessExitedException", "process 0 terminated with signal SIGKILL", COMMAND, (),
     "spawned-process-exited"),
    ("torch.multiprocessing.spawn.ProcessExitedException", "process 3 terminated with exit code 2", COMMAND, (),
     "spawned-process-exited"),
])
def test_the_catalogue_recognises_by_type_message_process_and_frames(
        type_: str, message: str, where: str, frames: tuple[Frame, ...], kind: str | None) -> None:
    assert _kind(type_, message, where, frames) == kind


def test_thread_and_initializer_tracebacks_are_read_from_stderr() -> None:
    handler, initializer = explain_exceptions._stderr_blocks("noise\n" + RESULT_HANDLER_DIED + INITIALIZER_FAILED)
    assert handler.where == RESULT_HANDLER and handler.pid is None
    assert handler.error.summary == "TypeError: Timeout.__init__() missing 1 required positional argument: 'seconds'"
    assert handler.error.user_frame is None  # every frame is the library's
    assert initializer.where == explain_exceptions.INITIALIZER
    assert initializer.error.summary == "KeyError: 'MODEL_PATH'"
    assert initializer.error.user_frame is not None and initializer.error.user_frame.line == 7


def _track(pid: int, ppid: int) -> ProcessRun:
    return ProcessRun(pid=pid, ppid=ppid, cmdline=("python", "job.py"), first_seen=0.0, last_seen=1.0,
                      alive_at_stop=False, exit_code=1 if pid == 100 else None, stalled_for=0.0, state="zombie",
                      wchan=None, threads=1, rss_peak=10 << 20, killed_by_supervisor=False)


def _run(events: list[dict[str, Any]], stderr: str) -> RunRecord:
    return RunRecord(command=("python", "job.py"), stop_reason=StopReason.EXITED, signal_received=None, root_pid=100,
                     exit_code=1, duration=1.0, limits=Limits(hang_after=3.0), processes=(_track(100, 1),),
                     events=events, samples=[], peaks=Peaks({}, {}, {}, {}, None, ()), stacks={}, stdout="",
                     stderr=stderr, notes=())


def test_an_unpicklable_result_is_told_once_with_the_users_line_and_the_fix() -> None:
    message = ("Error sending result: '<__main__.Report object at 0x7f>'. Reason: 'TypeError(\"cannot pickle "
               "'_io.BufferedReader' object\")'")
    frames = [["/home/me/job.py", 20, "<module>", "reports = pool.map(summarize, paths)"],
              [f"{LIB}/multiprocessing/pool.py", 367, "Pool.map", "return self._map_async(...).get()"]]
    events = [{"event": "exception", "pid": 100, "ppid": 1, "t": 0.5, "type": "multiprocessing.pool.MaybeEncodingError",
               "message": message, "frames": frames, "how": "uncaught"}]
    diagnosis = diagnose(_run(events, f"Traceback (most recent call last):\nmultiprocessing.pool.MaybeEncodingError: "
                                      f"{message}\n"))
    assert diagnosis.verdict == Verdict.FAILED
    lines = diagnosis.explanation.splitlines()
    hazard = hazards.TASK_RESULT_UNPICKLABLE
    assert "At your code /home/me/job.py:20 (in <module>): reports = pool.map(summarize, paths)" in lines
    assert ("The task function `summarize` returned a `Report`, which holds a `_io.BufferedReader`: it could not be "
            "pickled to be sent back to the parent.") in lines
    assert lines[-2:] == [hazard.why, hazard.fix_line]
    assert diagnosis.explanation.count("Error sending result") == 1
    assert [(c.kind, c.processes, c.fix) for c in diagnosis.causes] == [(hazard.cause, (100,), hazard.fix)]


def test_a_broken_pool_points_at_the_worker_that_died_and_the_initializer_that_raised() -> None:
    frames = [["/home/me/serve.py", 15, "<module>", "for answer in executor.map(ask, questions):"]]
    events = [{"event": "fork-child", "pid": 101, "ppid": 100, "t": 0.1, "threads_at_fork": 1, "runtimes_at_fork": []},
              {"event": "reaped", "pid": 100, "ppid": 1, "t": 0.3, "child": 101, "code": -9},
              {"event": "exception", "pid": 100, "ppid": 1, "t": 0.4,
               "type": "concurrent.futures.process.BrokenProcessPool",
               "message": "A process in the process pool was terminated abruptly while the future was running or "
                          "pending.", "frames": frames, "how": "uncaught"}]
    run = _run(events, INITIALIZER_FAILED)
    judged = diagnose(run).processes
    (story,) = explain_exceptions.find(run, judged)
    assert story.hazard is hazards.BROKEN_PROCESS_POOL
    assert story.evidence == (
        "The command (pid 100) died of the BrokenProcessPool above.",
        "At your code /home/me/serve.py:15 (in <module>): for answer in executor.map(ask, questions):",
        "The worker that broke the pool: pid 101 (fork) died of SIGKILL.",
        "SIGKILL from outside gpudoctor is what the kernel's OOM killer sends when memory runs out.",
        "A worker's initializer raised KeyError: 'MODEL_PATH', at your code /home/me/serve.py:7 (in warm_up); the "
        "worker then ended, and the pool was marked broken.",
    )
    # A dead-worker cause that tells the same death from the worker leads; this one steps back.
    said = [hazards.EXECUTOR_WORKER_DIED.fix_line]
    assert explain_exceptions.lines([story], said) == []
    assert explain_exceptions.lines([story])[-1] == hazards.BROKEN_PROCESS_POOL.fix_line


def test_a_known_string_already_quoted_is_not_quoted_again() -> None:
    line = "AttributeError: Can't get attribute 'score' on <module '__mp_main__' from '/home/me/run.py'>"
    matches = error_strings.find(line)
    assert explain._matched(matches, CAUSE, "Cause: ") == [
        "Cause: a function meant for worker processes could not be sent to them, or found by them (GD108): " + line]
    said = [f"pid 7 (spawn) exited with status 1: {line}."]
    assert explain._matched(matches, CAUSE, "Cause: ", said) == [
        "Cause: a function meant for worker processes could not be sent to them, or found by them (GD108)."]


SPAWN_TRACEBACK = """\

-- Process 1 terminated with the following error:
Traceback (most recent call last):
  File "/opt/venv/lib/python3.11/site-packages/torch/multiprocessing/spawn.py", line 87, in _wrap
    fn(i, *args)
  File "/home/me/train.py", line 35, in train
    data = load_shard(rank)
           ^^^^^^^^^^^^^^^^
  File "/home/me/train.py", line 28, in load_shard
    return torch.tensor(rows)
           ^^^^^^^^^^^^^^^^^^
ValueError: expected sequence of length 3 at dim 1 (got 2)
"""


def test_the_traceback_spawn_carries_is_read_for_its_exception_and_the_users_lines() -> None:
    inner = explain_exceptions._traceback(SPAWN_TRACEBACK)
    assert inner is not None
    assert inner.summary == "ValueError: expected sequence of length 3 at dim 1 (got 2)"
    assert [(f.path, f.line, f.function, f.text) for f in inner.frames if f.users] == [
        ("/home/me/train.py", 35, "train", "data = load_shard(rank)"),
        ("/home/me/train.py", 28, "load_shard", "return torch.tensor(rows)")]
    assert explain_exceptions._traceback("no traceback here") is None


def _spawned_run(message: str, type_: str, codes: dict[int, int]) -> RunRecord:
    argv = ["python", "-c", "from multiprocessing.spawn import spawn_main; spawn_main()", "--multiprocessing-fork"]
    events: list[dict[str, Any]] = []
    for number, pid in enumerate(sorted(codes), start=1):
        events += [{"event": "start", "pid": pid, "ppid": 100, "t": 0.1, "how": "spawn", "argv": argv},
                   {"event": "process", "pid": pid, "ppid": 100, "t": 0.2, "name": f"SpawnProcess-{number}",
                    "target": "torch.multiprocessing.spawn._wrap", "kind": "SpawnProcess"}]
    events += [{"event": "reaped", "pid": 100, "ppid": 1, "t": 0.5, "child": pid, "code": code}
               for pid, code in codes.items()]
    events.append({"event": "exception", "pid": 100, "ppid": 1, "t": 0.6, "type": type_, "message": message,
                   "frames": [["/home/me/train.py", 42, "<module>", "mp.spawn(train, args=(2,), nprocs=2)"]],
                   "how": "uncaught"})
    return _run(events, "")


def test_a_spawned_process_that_raised_is_told_with_its_line_and_the_others_as_its_effect() -> None:
    run = _spawned_run(SPAWN_TRACEBACK, "torch.multiprocessing.spawn.ProcessRaisedException", {102: 1, 101: -15})
    (story,) = explain_exceptions.find(run, diagnose(run).processes)
    assert story.hazard is hazards.SPAWNED_PROCESS_RAISED
    assert story.processes == (100, 102)
    assert story.evidence == (
        "The command (pid 100) died of the ProcessRaisedException above.",
        "At your code /home/me/train.py:42 (in <module>): mp.spawn(train, args=(2,), nprocs=2)",
        "Process 1 of `torch.multiprocessing.spawn` (pid 102) raised ValueError: expected sequence of length 3 at "
        "dim 1 (got 2), at your code /home/me/train.py:28 (in load_shard): return torch.tensor(rows); called from "
        "/home/me/train.py:35 (in train).",
        "The other processes were stopped by spawn after process 1 failed, as a consequence, not a cause (process 0, "
        "pid 101, died of SIGTERM).",
    )
    assert explain_exceptions.lines([story])[-1] == hazards.SPAWNED_PROCESS_RAISED.fix_line


def test_a_spawned_process_killed_by_a_signal_is_told_as_a_kill() -> None:
    run = _spawned_run("process 0 terminated with signal SIGKILL", "torch.multiprocessing.spawn.ProcessExitedException",
                       {101: -9, 102: -15})
    (story,) = explain_exceptions.find(run, diagnose(run).processes)
    assert story.hazard is hazards.SPAWNED_PROCESS_EXITED and story.processes == (100, 101)
    assert story.evidence[2:] == (
        "Process 0 of `torch.multiprocessing.spawn`: pid 101 (spawn) died of SIGKILL.",
        "SIGKILL from outside gpudoctor is what the kernel's OOM killer sends when memory runs out.",
        "The other processes were stopped by spawn after process 0 failed, as a consequence, not a cause (process 1, "
        "pid 102, died of SIGTERM).",
    )


def test_only_multiprocessing_objects_are_named_where_they_are_made(tmp_path: Path) -> None:
    path = tmp_path / "job.py"
    path.write_text("import multiprocessing as mp, threading\nlock = mp.Lock()\nshared = manager.Lock()\n"
                    "guard = threading.Lock()\n")
    tree = ast.parse(path.read_text())
    assert explain_exceptions._made_at(tree, ("Lock",), path) == [f"{path}:2: lock = mp.Lock()"]
