"""A hang whose cause is a worker that died in a task: which one, how, what waits for
it, and that the threads of a Pool's parent at the replacement's fork are not blamed.

The real programs are run in test_worker_deaths.py; here the diagnosis is fed the shape
they leave (a Pool(2) whose worker was SIGKILLed, its replacement forked while the pool's
handler threads ran), and the shape of the TensorFlow fork hang with a worker that died.
"""

from __future__ import annotations

from gpudoctor import hazards
from gpudoctor.probe.diagnose import diagnose
from gpudoctor.probe.sampler import Peaks
from gpudoctor.probe.stacks import Stack
from gpudoctor.probe.supervise import Limits, ProcessRun, RunRecord
from gpudoctor.probe.verdicts import StopReason, Verdict

# py-spy's dumps of the pool's parent and of a live worker, as seen on CPython 3.11.
PARENT = """\
Thread 100 (idle): "MainThread"
    PyThread_acquire_lock_timed (libpython3.11.so.1.0)
    Condition.wait (threading.py:327)
    Event.wait (threading.py:629)
    ApplyResult.wait (multiprocessing/pool.py:765)
    ApplyResult.get (multiprocessing/pool.py:768)
    Pool.map (multiprocessing/pool.py:367)
    <module> (killed.py:10)
"""
WORKER = """\
Thread 101 (idle): "MainThread"
    read (libc.so.6)
    Connection._recv (multiprocessing/connection.py:395)
    SimpleQueue.get (multiprocessing/queues.py:365)
    worker (multiprocessing/pool.py:114)
    BaseProcess.run (multiprocessing/process.py:108)
    <module> (killed.py:9)
"""


def _track(pid: int, alive: bool = True) -> ProcessRun:
    return ProcessRun(pid=pid, ppid=1 if pid == 100 else 100, cmdline=("python", "killed.py"), first_seen=0.0,
                      last_seen=4.0, alive_at_stop=alive, exit_code=None, stalled_for=3.5 if alive else 0.0,
                      state="sleeping", wchan="futex_wait_queue", threads=1, rss_peak=12 << 20,
                      killed_by_supervisor=alive)


def _fork(pid: int, t: float, threads: int, runtimes: list[str]) -> dict[str, object]:
    return {"event": "fork-child", "pid": pid, "ppid": 100, "t": t, "threads_at_fork": threads,
            "runtimes_at_fork": runtimes}


def _run(runtimes: list[str] | None = None, oom_kills: int | None = 0) -> RunRecord:
    runtimes = runtimes or []
    return RunRecord(
        command=("python", "killed.py"), stop_reason=StopReason.HUNG, signal_received=None, root_pid=100,
        exit_code=-15, duration=4.0, limits=Limits(hang_after=3.0),
        processes=(_track(100), _track(101), _track(103)),
        events=[_fork(101, 0.10, 1, runtimes), _fork(102, 0.11, 1, runtimes),
                {"event": "reaped", "pid": 100, "ppid": 1, "t": 0.2, "child": 102, "code": -9},
                _fork(103, 0.25, 4, runtimes)],
        samples=[], peaks=Peaks({}, {}, {}, {}, None, ()),
        stacks={100: Stack(PARENT, "py-spy", None), 101: Stack(WORKER, "py-spy", None),
                103: Stack(WORKER, "py-spy", None)},
        stdout="", stderr="", notes=(), oom_kills=oom_kills)


def test_a_worker_killed_in_a_task_is_the_cause_not_the_threads_at_the_replacements_fork() -> None:
    diagnosis = diagnose(_run())
    assert diagnosis.verdict == Verdict.HUNG
    lines = diagnosis.explanation.splitlines()
    assert ("Worker died while running a task: pid 102 died of SIGKILL at t=0.2 s, while the tree still ran; its "
            "parent, pid 100, has waited for that task's result ever since in Pool.map → ApplyResult.get → "
            "ApplyResult.wait (multiprocessing/pool.py:765), called from your code <module> (killed.py:10).") in lines
    assert ("The pool's live workers (pids 101, 103), the one it started in its place among them, wait for a new "
            "task in the pool's worker loop: no process runs the lost task.") in lines
    assert any(line.startswith("pid 102 left no stack: SIGKILL ends a process") for line in lines)
    assert lines[-2:] == [hazards.WORKER_DIED_IN_TASK.why, hazards.WORKER_DIED_IN_TASK.fix_line]
    assert hazards.MULTITHREADED_FORK.why not in lines and hazards.MULTITHREADED_FORK.fix_line not in lines
    assert "waits for them" not in diagnosis.explanation
    assert [(c.kind, c.rule, c.certainty, c.parent, c.processes) for c in diagnosis.causes] == [
        ("worker-died-in-task", None, "observed", 100, (102,))]


def test_fork_after_init_still_comes_first_when_a_worker_also_died() -> None:
    # TensorFlow initialized in the parent: the fork is the cause, the lost task how it shows.
    diagnosis = diagnose(_run(["tensorflow"]))
    kinds = [c.kind for c in diagnosis.causes]
    assert kinds == ["fork-after-init", "worker-died-in-task"]
    lines = diagnosis.explanation.splitlines()
    assert lines.index(hazards.why_for(hazards.FORK_AFTER_INIT, ["tensorflow"])) < \
        lines.index(hazards.WORKER_DIED_IN_TASK.why)
    assert hazards.FORK_AFTER_INIT.fix_line in lines


def test_without_a_dead_worker_the_threads_at_the_fork_are_still_named() -> None:
    run = _run()
    alive = RunRecord(**{**run.__dict__, "events": [e for e in run.events if e.get("event") != "reaped"
                                                    and e.get("pid") != 102]})
    diagnosis = diagnose(alive)
    assert [c.kind for c in diagnosis.causes] == ["multithreaded-fork"]
    assert "Worker died" not in diagnosis.explanation


# The same parent as faulthandler dumps it (no py-spy): function names without their class.
PARENT_FAULTHANDLER = """\
Current thread 0x00007f441c3e5740 (most recent call first):
  File "/usr/lib/python3.11/threading.py", line 327 in wait
  File "/usr/lib/python3.11/multiprocessing/pool.py", line 765 in wait
  File "/usr/lib/python3.11/multiprocessing/pool.py", line 768 in get
  File "/usr/lib/python3.11/multiprocessing/pool.py", line 367 in map
  File "/home/me/killed.py", line 10 in <module>
"""


def test_the_parents_wait_is_read_from_a_faulthandler_dump_too() -> None:
    run = _run()
    plain = RunRecord(**{**run.__dict__, "stacks": {100: Stack(PARENT_FAULTHANDLER, "faulthandler", None)}})
    lines = diagnose(plain).explanation.splitlines()
    assert any(line.endswith("has waited for that task's result ever since in map → get → wait "
                             "(/usr/lib/python3.11/multiprocessing/pool.py:765), called from your code <module> "
                             "(/home/me/killed.py:10).") for line in lines), lines
    assert ("The pool's live workers (pids 101, 103), the one it started in its place among them, wait with no "
            "CPU progress: no process runs the lost task.") in lines
