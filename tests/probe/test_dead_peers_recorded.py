"""The causes of a dead or blocked peer, fed the shapes real runs leave (py-spy dumps as
seen on CPython 3.11, the bootstrap's events): what each needs before it speaks, and what
it must not claim (a Pool without Pool frames, os._exit without evidence, a lock holder
for a Pool worker idle on its task queue's lock). The real programs run in
test_dead_peers.py.
"""

from __future__ import annotations

from pathlib import Path

from gpudoctor import hazards
from gpudoctor.probe import explain_definition
from gpudoctor.probe.diagnose import diagnose
from gpudoctor.probe.sampler import Peaks
from gpudoctor.probe.stacks import Stack
from gpudoctor.probe.supervise import Limits, ProcessRun, RunRecord
from gpudoctor.probe.verdicts import StopReason

JOINING = """\
Thread 100 (idle): "MainThread"
    wait4 (libc.so.6)
    os_waitpid (libpython3.11.so.1.0)
    Popen.poll (multiprocessing/popen_fork.py:27)
    Popen.wait (multiprocessing/popen_fork.py:43)
    BaseProcess.join (multiprocessing/process.py:149)
    <module> (jobs.py:30)
"""
# A Pool worker idle between tasks: it waits for its task queue's lock, a library's.
POOL_WORKER = """\
Thread 101 (idle): "MainThread"
    _multiprocessing_SemLock_acquire_impl (semaphore.c:357)
    SemLock.__enter__ (multiprocessing/synchronize.py:95)
    SimpleQueue.get (multiprocessing/queues.py:364)
    worker (multiprocessing/pool.py:114)
    BaseProcess.run (multiprocessing/process.py:108)
    BaseProcess._bootstrap (multiprocessing/process.py:314)
    Popen._launch (multiprocessing/popen_fork.py:71)
    <module> (jobs.py:29)
"""
# A worker of the user's own that waits for a lock its own line takes.
USER_LOCK = POOL_WORKER.replace(
    "    SimpleQueue.get (multiprocessing/queues.py:364)\n    worker (multiprocessing/pool.py:114)\n",
    "    work (jobs.py:12)\n")


def _track(pid: int, alive: bool = True) -> ProcessRun:
    return ProcessRun(pid=pid, ppid=1 if pid == 100 else 100, cmdline=("python", "jobs.py"), first_seen=0.0,
                      last_seen=4.0, alive_at_stop=alive, exit_code=None, stalled_for=3.5 if alive else 0.0,
                      state="sleeping", wchan="futex_wait_queue", threads=1, rss_peak=12 << 20,
                      killed_by_supervisor=alive)


def _run(stacks: dict[int, str], dead_code: int, events: list[dict[str, object]] | None = None) -> RunRecord:
    forks = [{"event": "fork-child", "pid": pid, "ppid": 100, "t": 0.1, "threads_at_fork": 1, "runtimes_at_fork": []}
             for pid in (101, 102, 103)]
    reaped = [{"event": "reaped", "pid": 100, "ppid": 1, "t": 0.2, "child": 102, "code": dead_code}]
    return RunRecord(
        command=("python", "jobs.py"), stop_reason=StopReason.HUNG, signal_received=None, root_pid=100,
        exit_code=-15, duration=4.0, limits=Limits(hang_after=3.0),
        processes=(_track(100), _track(101), _track(103)), events=forks + (events or []) + reaped,
        samples=[], peaks=Peaks({}, {}, {}, {}, None, ()),
        stacks={pid: Stack(text, "py-spy", None) for pid, text in stacks.items()},
        stdout="", stderr="", notes=(), oom_kills=None)


def test_survivors_waiting_for_a_lock_from_their_own_line_after_a_death_are_a_dead_lock_holder() -> None:
    diagnosis = diagnose(_run({100: JOINING, 101: USER_LOCK, 103: USER_LOCK}, -9))
    assert [(c.kind, c.processes) for c in diagnosis.causes] == [("lock-holder-died", (102,))]
    lines = diagnosis.explanation.splitlines()
    assert any(line.startswith("Lock holder died: pid 102 died of SIGKILL at t=0.2 s") and
               "pids 101, 103 have waited ever since" in line and "called from your code work (jobs.py:12)" in line
               for line in lines), lines
    assert "pid 100 waits for them in join, called from your code <module> (jobs.py:30)." in lines
    assert "Pool" not in diagnosis.explanation and hazards.LOCK_HOLDER_DIED.fix_line in lines


def test_a_worker_that_raised_released_its_lock_and_a_pool_workers_lock_is_the_pools() -> None:
    raised = [{"event": "exception", "pid": 102, "ppid": 100, "t": 0.15, "type": "ValueError", "message": "bad",
               "frames": [["/x/jobs.py", 12, "work", "with lock:"]]}]
    kinds = [c.kind for c in diagnose(_run({100: JOINING, 101: USER_LOCK, 103: USER_LOCK}, 1, raised)).causes]
    assert "lock-holder-died" not in kinds  # `with lock:` released it on the way out
    kinds = [c.kind for c in diagnose(_run({100: JOINING, 101: POOL_WORKER, 103: POOL_WORKER}, -9)).causes]
    assert "lock-holder-died" not in kinds


def test_a_child_that_died_under_a_parent_outside_a_pool_is_told_without_a_pool() -> None:
    diagnosis = diagnose(_run({100: JOINING}, 3))
    (cause,) = diagnosis.causes
    assert cause.kind == hazards.RESULT_NEVER_SENT.cause and cause.fix == hazards.RESULT_NEVER_SENT.fix
    text = " ".join(cause.evidence)
    assert "Pool" not in text and "AsyncResult" not in diagnosis.explanation
    assert cause.evidence[0] == (
        "Child died while its parent waited: pid 102 exited with status 3 at t=0.2 s, while the tree still ran; its "
        "parent, pid 100, has waited ever since in BaseProcess.join (multiprocessing/process.py:149), called from "
        "your code <module> (jobs.py:30).")
    # Nothing recorded how it exited: sys.exit is not claimed, and neither is os._exit alone.
    assert ("pid 102 left no stack: it exited with status 3 and no exception gpudoctor recorded, as "
            "`raise SystemExit(3)`, `exit(3)` or `os._exit(3)` in its code ends a process.") in cause.evidence


def test_a_recorded_sys_exit_in_a_pool_task_is_task_called_exit_with_its_line() -> None:
    parent = """\
Thread 100 (idle): "MainThread"
    PyThread_acquire_lock_timed (libpython3.11.so.1.0)
    Condition.wait (threading.py:327)
    ApplyResult.wait (multiprocessing/pool.py:765)
    ApplyResult.get (multiprocessing/pool.py:768)
    Pool.map (multiprocessing/pool.py:367)
    <module> (jobs.py:30)
"""
    exited = [{"event": "exception", "pid": 102, "ppid": 100, "t": 0.15, "type": "SystemExit", "message": "4",
               "how": "sys.exit", "frames": [["/x/jobs.py", 30, "<module>", "pool.map(f, xs)"],
                                             ["/usr/lib/python3.11/multiprocessing/pool.py", 125, "worker", ""],
                                             ["/x/jobs.py", 9, "check", "sys.exit(4)"]]}]
    diagnosis = diagnose(_run({100: parent, 101: POOL_WORKER, 103: POOL_WORKER}, 4, exited))
    (cause,) = diagnosis.causes
    assert (cause.kind, cause.fix) == (hazards.TASK_CALLED_EXIT.cause, hazards.TASK_CALLED_EXIT.fix)
    assert ("pid 102 called sys.exit(4), from your code check (/x/jobs.py:9): SystemExit is not an Exception, so the "
            "Pool cannot return it as the task's error.") in cause.evidence
    assert "os._exit" not in diagnosis.explanation


def test_the_definition_of_a_function_a_worker_could_not_get_is_found_without_importing(tmp_path: Path) -> None:
    prog = tmp_path / "prog.py"
    prog.write_text("import os\n\ndef outer():\n    def inner(x):\n        return x\n\n"
                    "if __name__ == '__main__':\n    class Job:\n        pass\n    raise SystemExit('never run')\n")
    line = "AttributeError: Can't get attribute '{}' on <module '__mp_main__' from '" + str(prog) + "'>"
    assert explain_definition.definition(line.format("Job")) == (
        f"`Job` is defined at {prog}:8, inside `if __name__ == \"__main__\":` (line 7): a worker imports the script "
        "as `__mp_main__`, where that block does not run, so it has no `Job`.")
    assert explain_definition.definition(line.format("inner")).startswith(
        f"`inner` is defined at {prog}:4, inside function `outer` (line 3), not at the top level")
    assert explain_definition.definition(line.format("missing")) is None
    assert explain_definition.definition("AttributeError: something else") is None


def test_a_parent_waiting_on_its_hung_children_is_said_to_wait_in_a_pool_only_with_pool_frames() -> None:
    lines = diagnose(_run({100: JOINING, 101: USER_LOCK, 103: USER_LOCK}, 0)).explanation.splitlines()
    assert "100 waits for them." in lines, lines  # these recorded stacks carry no blocked_in to cite
    assert not any("Pool.map" in line for line in lines)


def _exited(events: list[dict[str, object]], stderr: str = "") -> RunRecord:
    """A command that exited 1 after its children 101 (killed by SIGKILL) and 102, 103 ended."""
    forks = [{"event": "fork-child", "pid": pid, "ppid": 100, "t": 0.1, "threads_at_fork": 1, "runtimes_at_fork": []}
             for pid in (101, 102, 103)]
    reaped = [{"event": "reaped", "pid": 100, "ppid": 1, "t": 0.3, "child": 101, "code": -9},
              {"event": "reaped", "pid": 100, "ppid": 1, "t": 0.4, "child": 102, "code": 1},
              {"event": "reaped", "pid": 100, "ppid": 1, "t": 0.4, "child": 103, "code": 1}]
    root = ProcessRun(pid=100, ppid=1, cmdline=("python", "jobs.py"), first_seen=0.0, last_seen=0.5,
                      alive_at_stop=False, exit_code=1, stalled_for=0.0, state="", wchan=None, threads=1,
                      rss_peak=12 << 20, killed_by_supervisor=False)
    return RunRecord(
        command=("python", "jobs.py"), stop_reason=StopReason.EXITED, signal_received=None, root_pid=100,
        exit_code=1, duration=0.5, limits=Limits(), processes=(root,), events=forks + events + reaped,
        samples=[], peaks=Peaks({}, {}, {}, {}, None, ()), stacks={}, stdout="", stderr=stderr, notes=(),
        oom_kills=None)


def _raised(pid: int, kind: str, message: str, frames: list[list[object]]) -> dict[str, object]:
    return {"event": "exception", "pid": pid, "ppid": 100, "t": 0.35, "type": kind, "message": message,
            "frames": frames}


def test_connection_errors_are_a_dead_manager_only_when_raised_through_a_manager_proxy() -> None:
    proxy = [["/x/jobs.py", 14, "collect", "shared[k] = v"],
             ["/usr/lib/python3.11/multiprocessing/managers.py", 817, "_callmethod", "conn.send(...)"]]
    socket = [["/x/jobs.py", 14, "collect", "sock.sendall(b'x')"]]
    dead_manager = _exited([_raised(102, "BrokenPipeError", "[Errno 32] Broken pipe", proxy),
                            _raised(103, "EOFError", "", proxy)])
    (cause,) = [c for c in diagnose(dead_manager).causes if c.kind == hazards.MANAGER_DIED.cause]
    assert cause.processes == (101,) and cause.fix == hazards.MANAGER_DIED.fix
    assert "pids 102" in cause.evidence[0] or "pid 102" in cause.evidence[0]
    assert "from your code collect (/x/jobs.py:14)" in cause.evidence[0]
    no_manager = _exited([_raised(102, "BrokenPipeError", "[Errno 32] Broken pipe", socket),
                          _raised(103, "BrokenPipeError", "[Errno 32] Broken pipe", socket)])
    assert hazards.MANAGER_DIED.cause not in [c.kind for c in diagnose(no_manager).causes]


def test_a_broken_process_pool_is_linked_to_the_child_that_died_under_its_parent() -> None:
    broken = _raised(100, "concurrent.futures.process.BrokenProcessPool",
                     "A process in the process pool was terminated abruptly while the future was running or pending.",
                     [["/x/jobs.py", 20, "<module>", "print(f.result())"]])
    (cause,) = [c for c in diagnose(_exited([broken])).causes if c.kind == hazards.EXECUTOR_WORKER_DIED.cause]
    assert cause.parent == 100 and cause.processes == (101, 102, 103)
    assert cause.evidence[0].startswith("Executor's worker died: pid 101 died of SIGKILL at t=0.3 s, not by gpudoctor")
    assert "pid 100 died of it, from your code <module> (/x/jobs.py:20)" in cause.evidence[0]
    assert hazards.EXECUTOR_WORKER_DIED.cause not in [c.kind for c in diagnose(_exited([])).causes]


def test_workers_dead_of_a_fork_error_string_are_not_folded_into_the_fork_cause_twice() -> None:
    parent = JOINING.replace(
        "    Popen.poll (multiprocessing/popen_fork.py:27)\n    Popen.wait (multiprocessing/popen_fork.py:43)\n"
        "    BaseProcess.join (multiprocessing/process.py:149)\n",
        "    ApplyResult.wait (multiprocessing/pool.py:765)\n    Pool.map (multiprocessing/pool.py:367)\n")
    message = "Cannot re-initialize CUDA in forked subprocess. To use CUDA with multiprocessing, you must use spawn"
    died = [{"event": "exception", "pid": 102, "ppid": 100, "t": 0.15, "type": "RuntimeError", "message": message,
             "frames": [["/x/jobs.py", 8, "work", "x.cuda()"]]}]
    run = _run({100: parent, 101: POOL_WORKER, 103: POOL_WORKER}, 1, died)
    forks = [{**e, "runtimes_at_fork": ["torch.cuda"]} if e["event"] == "fork-child" else e for e in run.events]
    run = RunRecord(**{**run.__dict__, "events": forks, "stderr": f"RuntimeError: {message}\n"})
    kinds = [c.kind for c in diagnose(run).causes]
    assert kinds.count(hazards.FORK_AFTER_INIT.cause) == 1 and hazards.WORKER_DIED_IN_TASK.cause in kinds, kinds
