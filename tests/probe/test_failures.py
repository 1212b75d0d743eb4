"""Children's failures as values: the exception each died of, the user's line in it,
identical failures told from different ones, and the streak that makes a crash loop.

The end-to-end runs of real programs that fail these ways are in test_worker_deaths.py;
here the model is fed the events those programs write, to pin down each rule.
"""

from __future__ import annotations

import io
import signal
from typing import Any

from rich.console import Console

from gpudoctor import hazards
from gpudoctor.probe import options, render_run
from gpudoctor.probe.diagnose import diagnose
from gpudoctor.probe.failures import Frame, Raised, is_failure, raised, streak
from gpudoctor.probe.sampler import Peaks
from gpudoctor.probe.supervise import Limits, ProcessRun, RunRecord
from gpudoctor.probe.verdicts import StopReason, Verdict

STDLIB = "/usr/lib/python3.11/multiprocessing"
# The frames of the RuntimeError a spawn worker of a script without a main guard dies of
# (as the bootstrap records them on CPython 3.11): outermost first.
BOOTSTRAPPING = [
    ["<string>", 1, "<module>", ""],
    [f"{STDLIB}/spawn.py", 122, "spawn_main", "exitcode = _main(fd, parent_sentinel)"],
    ["<frozen runpy>", 88, "_run_code", ""],
    ["/home/me/noguard.py", 6, "<module>", 'pool = multiprocessing.get_context("spawn").Pool(2)'],
    [f"{STDLIB}/context.py", 119, "BaseContext.Pool", "return Pool(processes, initializer, initargs,"],
    [f"{STDLIB}/spawn.py", 140, "_check_not_importing_main", "raise RuntimeError('''"],
]
MESSAGE = ("\n        An attempt has been made to start a new process before the\n        current process has "
           "finished its bootstrapping phase.\n\n        This probably means that you are not using fork to "
           "start your\n        child processes and you have forgotten to use the proper idiom\n")


def _exception(pid: int, t: float, message: str = MESSAGE) -> dict[str, Any]:
    return {"event": "exception", "pid": pid, "ppid": 100, "t": t, "type": "RuntimeError", "message": message,
            "frames": BOOTSTRAPPING, "how": "uncaught"}


def _reaped(child: int, code: int, t: float, parent: int = 100) -> dict[str, Any]:
    return {"event": "reaped", "pid": parent, "ppid": 1, "t": t, "child": child, "code": code}


def _start(pid: int, t: float) -> dict[str, Any]:
    return {"event": "start", "pid": pid, "ppid": 100, "t": t, "how": "spawn",
            "argv": ["python", "-c", "from multiprocessing.spawn import spawn_main; spawn_main()"]}


def test_the_summary_is_the_first_sentence_and_the_users_line_is_never_string_or_multiprocessing() -> None:
    (error,) = raised([_exception(101, 0.5)]).values()
    assert error.summary == ("RuntimeError: An attempt has been made to start a new process before the current "
                             "process has finished its bootstrapping phase.")
    assert error.user_frame == Frame("/home/me/noguard.py", 6, "<module>",
                                     'pool = multiprocessing.get_context("spawn").Pool(2)')
    assert Raised("ValueError", "bad", (Frame("<string>", 1, "<module>", ""),)).user_frame is None
    assert Raised("KeyError", "").summary == "KeyError"


def test_a_streak_is_identical_failures_in_a_row() -> None:
    other = "the input file is empty"
    events = [_exception(101, 0.1), _reaped(101, 1, 0.2), _exception(102, 0.3), _reaped(102, 1, 0.4),
              _reaped(103, -signal.SIGTERM, 0.5),  # a pool stopping a worker: no failure, no reset
              _exception(104, 0.6, other), _reaped(104, 1, 0.7)]
    assert [e.pid for e in streak(events).ended] == [104]  # a different exception starts a new streak
    assert [e.pid for e in streak(events[:5]).ended] == [101, 102]
    assert streak([*events[:4], _reaped(105, 0, 0.8)]).ended == []  # a clean end ends it
    assert [e.pid for e in streak([_reaped(106, -9, 1.0), _reaped(107, -9, 1.1)]).ended] == [106, 107]
    assert [is_failure(code) for code in (0, 1, -9, -11, -15, None)] == [False, True, True, True, False, False]


def test_the_limit_defaults_to_the_options_bound() -> None:
    assert Limits().crash_loop == options.CRASH_LOOP == 20


def _track(pid: int, alive: bool, stalled: float = 0.0) -> ProcessRun:
    return ProcessRun(pid=pid, ppid=1 if pid == 100 else 100, cmdline=("python", "noguard.py"), first_seen=0.0,
                      last_seen=3.0, alive_at_stop=alive, exit_code=None, stalled_for=stalled, state="sleeping",
                      wchan=None, threads=4, rss_peak=15 << 20, killed_by_supervisor=alive)


def _crash_loop(count: int) -> RunRecord:
    """The shape of a spawn Pool without a main guard, stopped by --crash-loop ``count``."""
    events: list[dict[str, Any]] = []
    for n in range(count):
        pid, t = 101 + n, 0.3 + 0.1 * n
        events += [_start(pid, t), _exception(pid, t + 0.05), _reaped(pid, 1, t + 0.08)]
    return RunRecord(
        command=("python", "noguard.py"), stop_reason=StopReason.CRASH_LOOP, signal_received=None, root_pid=100,
        exit_code=-15, duration=3.0, limits=Limits(crash_loop=count), processes=(_track(100, True, 2.5),),
        events=events, samples=[], peaks=Peaks({}, {}, {}, {}, None, ()), stacks={}, stdout="",
        stderr=MESSAGE, notes=())


def test_a_crash_loop_is_its_own_verdict_with_one_line_for_its_children_and_gd104() -> None:
    diagnosis = diagnose(_crash_loop(20))
    assert (diagnosis.verdict, diagnosis.stop_reason) == (Verdict.CRASH_LOOP, StopReason.CRASH_LOOP)
    lines = diagnosis.explanation.splitlines()
    assert lines[0].startswith("Crash loop: 20 child processes in a row failed the same way within 1.9 s")
    assert "pid 100 kept starting new ones (20 children by then)" in lines[0]
    assert "after --crash-loop 20 identical failures in a row" in lines[0]
    assert lines[1] == ('They failed at your code /home/me/noguard.py:6 (in <module>): '
                        'pool = multiprocessing.get_context("spawn").Pool(2)')
    grouped = [line for line in lines if line.startswith("20 spawn children exited with status 1: RuntimeError")]
    assert grouped == [grouped[0]] and "(pids 101, 102, 103, 104, 105 and 15 more)" in grouped[0]
    assert "from your code <module> (/home/me/noguard.py:6)" in grouped[0]
    assert not any(line.startswith("pid 1") for line in lines)  # no line per child
    assert hazards.PROCESS_START_AT_IMPORT.why in lines and hazards.PROCESS_START_AT_IMPORT.fix_line in lines
    (cause,) = diagnosis.causes
    assert (cause.kind, cause.rule, cause.certainty, cause.parent) == ("process-start-at-import", "GD104",
                                                                       "observed", 100)
    assert len(cause.processes) == 20 and cause.fix == hazards.PROCESS_START_AT_IMPORT.fix
    out = io.StringIO()
    render_run.render(_crash_loop(20), diagnosis, Console(file=out, width=400, color_system=None))
    shown = out.getvalue().splitlines()
    assert "cause: process-start-at-import (GD104), observed: pids 101, 102, 103, 104, 105 and 15 more" in shown
    assert [line for line in shown if "(spawn) crashed" in line] == [
        "  20 processes (spawn) crashed: exited with status 1: RuntimeError: An attempt has been made to start a new "
        "process before the current process has finished its bootstrapping phase: "
        "pids 101, 102, 103, 104, 105 and 15 more"]


def test_the_loops_count_is_the_streak_the_supervisor_stopped_for() -> None:
    # Under load a counted child's reaped record can carry a t past stop_at (each process
    # reads its own clock), and a child the last scan saw alive may be reaped before the
    # stop: the children the supervisor counted are the count, whatever their times.
    run = _crash_loop(20)
    events = [{**e, "t": 2.4} if e["event"] == "reaped" and e["child"] == 120 else e for e in run.events]
    later = [e for n in range(3) for e in (_start(200 + n, 2.5), _exception(200 + n, 2.55), _reaped(200 + n, 1, 2.58))]
    counted = tuple(range(101, 121))
    stopped = RunRecord(**{**run.__dict__, "events": events + later, "stop_at": 2.3, "crash_loop": counted})
    lead = diagnose(stopped).explanation.splitlines()[0]
    assert lead.startswith("Crash loop: 20 child processes in a row") and "--crash-loop 20 identical" in lead
    assert diagnose(RunRecord(**{**stopped.__dict__, "crash_loop": ()})).explanation.startswith(
        "Crash loop: 19 child processes")  # what the replay up to stop_at alone gives


def test_children_failing_alike_once_are_one_line_without_a_crash_loop() -> None:
    run = _crash_loop(8)
    once = RunRecord(**{**run.__dict__, "stop_reason": StopReason.EXITED, "exit_code": 1,
                        "processes": (ProcessRun(**{**_track(100, False).__dict__, "exit_code": 1}),)})
    diagnosis = diagnose(once)
    assert diagnosis.verdict == Verdict.FAILED
    lines = diagnosis.explanation.splitlines()
    assert not any("Crash loop" in line for line in lines)
    assert len([line for line in lines if line.startswith("8 spawn children exited with status 1")]) == 1
    # The error string still names the hazard, as for any output.
    assert [c.kind for c in diagnosis.causes] == ["process-start-at-import"]


def test_failures_after_the_stop_began_are_not_the_loops_count() -> None:
    # The pool goes on replacing workers while gpudoctor dumps stacks: not counted.
    run = _crash_loop(20)
    later = [e for n in range(5) for e in (_start(200 + n, 2.5 + 0.1 * n), _exception(200 + n, 2.55 + 0.1 * n),
                                           _reaped(200 + n, 1, 2.58 + 0.1 * n))]
    stopped = RunRecord(**{**run.__dict__, "events": run.events + later, "stop_at": 2.3})
    lead = diagnose(stopped).explanation.splitlines()[0]
    assert lead.startswith("Crash loop: 20 child processes in a row") and "(20 children by then)" in lead
