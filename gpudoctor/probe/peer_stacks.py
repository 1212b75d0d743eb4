"""What the causes of a dead or blocked peer read from a run: where a waiting process
waits (its main thread's frames in a ``multiprocessing`` file, and the user's line under
them), and which processes ended on their own while the tree ran.

Shared by the explanations of a process that died or blocks while others wait on it
(explain_lost_task, explain_lock_holder, explain_pipe_send, explain_manager,
explain_broken_executor): each names its own shape, they read the evidence alike.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from gpudoctor.probe import stacks
from gpudoctor.probe.failures import is_failure, is_helper

if TYPE_CHECKING:
    from gpudoctor.probe.diagnosis import ProcessVerdict
    from gpudoctor.probe.record import RunRecord

Frames = list[tuple[str, str]]  # (function, "path:line"), innermost first


def in_file(where: str, file: str) -> bool:
    """Tell whether a frame's "path:line" is in ``file`` ("multiprocessing/pool.py")."""
    return file in where.replace(os.sep, "/")


def function(name: str) -> str:
    """"SemLock.__enter__" -> "__enter__"."""
    return name.rsplit(".", 1)[-1]


def is_users(where: str) -> bool:
    """A frame of the user's own code: a file, not a library's, not ``<string>``."""
    return not where.startswith("<") and not stacks.is_library(where)


def user(frames: Sequence[tuple[str, str]]) -> str | None:
    """"worker (prog.py:27)": the innermost frame of the user's own code, if any."""
    return next((f"{name} ({where})" for name, where in frames if is_users(where)), None)


def main_frames(process: ProcessVerdict) -> Frames:
    """The Python frames of the process's main thread that it runs itself (a fork child's
    inherited frames under its ``_bootstrap`` left out), innermost first."""
    if not process.stack:
        return []
    return stacks.own_frames(stacks.python_frames(process.stack, process.stack_source))


def reaped_at(run: RunRecord) -> dict[int, float]:
    """When each child was reaped by its parent, in seconds from the start."""
    return {e["child"]: float(e["t"]) for e in run.events
            if e.get("event") == "reaped" and isinstance(e.get("child"), int) and isinstance(e.get("t"), (int, float))}


def died_on_their_own(run: RunRecord, judged: Sequence[ProcessVerdict]) -> list[ProcessVerdict]:
    """The processes, the command's own left out, that ended in failure (a signal, a crash,
    a non-zero status) while the tree ran: neither stopped by gpudoctor nor a helper of
    multiprocessing (the resource tracker, the fork server)."""
    ours = {t.pid for t in run.processes if t.killed_by_supervisor or t.alive_at_stop}
    return [p for p in judged if p.start != "root" and p.pid not in ours and is_failure(p.exit_code)
            and not is_helper(p.cmdline)]


def when(process: ProcessVerdict, reaped: dict[int, float]) -> str:
    """" at t=0.4 s" when its parent reaped it, else nothing."""
    t = reaped.get(process.pid)
    return f" at t={t:.1f} s" if t is not None else ""


def targets(run: RunRecord) -> dict[int, tuple[str, str]]:
    """The multiprocessing Process each child was, as the bootstrap recorded it: (its name,
    the function it ran), "SyncManager-1", "multiprocessing.managers.BaseManager._run_server"."""
    return {e["pid"]: (str(e.get("name") or ""), e["target"]) for e in run.events
            if e.get("event") == "process" and isinstance(e.get("pid"), int) and isinstance(e.get("target"), str)}
