"""Explain a crash loop: children that keep failing the same way while the tree starts
new ones, until gpudoctor stopped it (``--crash-loop`` identical failures in a row).

The loop is the verdict; what the children die of is the cause. Their exception is
matched against the known error strings: a spawn ``Pool`` started at import time (no
``if __name__ == "__main__":``) makes every worker raise CPython's "An attempt has been
made to start a new process before the current process has finished its bootstrapping
phase", which is GD104's hazard. The user's line is the innermost frame of their own
code in the children's traceback: the ``Pool(...)`` line their main module runs again in
every child, never ``<string>`` (spawn's ``python -c``) or a frame of multiprocessing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from gpudoctor import hazards
from gpudoctor.probe import error_strings, wording
from gpudoctor.probe.diagnosis import OBSERVED, Cause
from gpudoctor.probe.explain_lost_task import pool_wait
from gpudoctor.probe.failures import Frame, Streak, is_helper, streak
from gpudoctor.probe.verdicts import StopReason

if TYPE_CHECKING:
    from gpudoctor.probe.diagnosis import ProcessVerdict
    from gpudoctor.probe.record import RunRecord


def _streak(run: RunRecord) -> Streak:
    """The streak the supervisor stopped the tree for: exactly the children it counted when
    it stopped (children that died after, of its SIGTERM or while it dumped stacks, are not
    the loop's). A record without that list (an older one) is replayed up to the stop."""
    if run.crash_loop:
        counted = set(run.crash_loop)
        return streak(e for e in run.events if e["event"] != "reaped" or e.get("child") in counted)
    alive = {t.pid for t in run.processes if t.alive_at_stop}
    until = run.stop_at if run.stop_at is not None else run.duration
    return streak(e for e in run.events if not (e["event"] == "reaped" and (
        e.get("child") in alive or not isinstance(e.get("t"), (int, float)) or e["t"] > until)))


def _hazard(found: Streak) -> tuple[hazards.Hazard, str] | None:
    """The hazard the children's exception names, and its matching line."""
    error = found.ended[-1].exception if found.ended else None
    if error is None:
        return None
    for match in error_strings.find(f"{error.type}: {error.message}"):
        hazard = hazards.BY_CAUSE.get(match.pattern.category)
        if match.pattern.kind == error_strings.CAUSE and hazard is not None:
            return hazard, match.line
    if any(_in_initializer(frame) for frame in error.frames):
        return hazards.POOL_INITIALIZER_FAILED, f"{error.type}: {error.message}"[:500]
    return None


def _in_initializer(frame: Frame) -> bool:
    """Is this the frame of ``multiprocessing.pool.worker`` that runs the Pool's
    initializer (``initializer(*initargs)``, CPython 3.8 to 3.13)? An exception through it
    ends the worker before its first task."""
    return frame.function == "worker" and frame.path.replace("\\", "/").endswith("multiprocessing/pool.py") \
        and frame.text.startswith("initializer(")


def _evidence(run: RunRecord, judged: Sequence[ProcessVerdict], found: Streak) -> list[str]:
    ended = found.ended
    first, last = ended[0], ended[-1]
    parents = found.parents
    until = run.stop_at if run.stop_at is not None else run.duration
    argv = [event.get("argv") for event in run.events if event["event"] in ("fork-child", "start")
            and event.get("ppid") in parents and event["t"] <= until]
    started = sum(1 for a in argv if not (isinstance(a, list) and is_helper([str(word) for word in a])))
    who = (f"{wording.pids(parents)} kept starting new ones ({wording.plural(started, 'child', 'children')} "
           "by then)") if parents else "new ones kept starting"
    lines = [f"Crash loop: {wording.plural(len(ended), 'child process', 'child processes')} in a row failed the "
             f"same way within {last.t - first.t:.1f} s (t={first.t:.1f} to {last.t:.1f} s), none ended cleanly "
             f"in between, and {who}: each {last.describe().rstrip('.')}. gpudoctor stopped the tree after "
             f"--crash-loop {run.limits.crash_loop} identical failures in a row."]
    frame = last.exception.user_frame if last.exception else None
    if frame is not None:
        code = f": {frame.text}" if frame.text else ""
        lines.append(f"They failed at your code {frame.path}:{frame.line} (in {frame.function}){code}")
    for parent in (p for p in judged if p.pid in parents):
        waits_in, user = pool_wait(parent)
        if waits_in:
            called = f", called from your code {user}" if user else ""
            lines.append(f"pid {parent.pid} waited for their results in {waits_in}{called}.")
    return lines


def lines(run: RunRecord, judged: Sequence[ProcessVerdict]) -> list[str]:
    """The crash loop's lead, where the children failed, and why (empty unless the
    supervisor stopped a crash loop)."""
    found = _streak(run)
    if run.stop_reason != StopReason.CRASH_LOOP or not found.ended:
        return []
    named = _hazard(found)
    return _evidence(run, judged, found) + ([named[0].why, named[0].fix_line] if named else [])


def causes(run: RunRecord, judged: Sequence[ProcessVerdict]) -> list[Cause]:
    """The hazard a crash loop's children died of, when the error strings know it."""
    found = _streak(run)
    named = _hazard(found)
    if run.stop_reason != StopReason.CRASH_LOOP or named is None:
        return []
    hazard, line = named
    parents = found.parents
    return [Cause(kind=hazard.cause, certainty=OBSERVED, rule=hazard.rule, parent=parents[0] if len(parents) == 1
                  else None, processes=tuple(e.pid for e in found.ended),
                  evidence=(*_evidence(run, judged, found), line), fix=hazard.fix)]
