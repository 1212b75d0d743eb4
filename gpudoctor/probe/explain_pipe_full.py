"""Explain a hang in which a parent waits for a subprocess to exit while the subprocess
waits for the parent to read its pipe.

The shape: the parent's main thread waits in ``subprocess.Popen.wait`` (called from the
user's line), and a child of it waits in the kernel's pipe write (its wchan,
``pipe_write`` or ``anon_pipe_write``): it has filled a pipe (64 KiB on Linux) that no
process reads. ``Popen(..., stdout=PIPE)`` (or ``stderr=PIPE``) gives the parent the
reading end; ``wait()`` reads nothing, so the child cannot finish writing and never
exits. Which pipe the child writes to is not read from the kernel: that it is the one
the parent holds is said as most likely.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpudoctor.hazards import PIPE_FULL_BEFORE_WAIT
from gpudoctor.probe import peer_stacks
from gpudoctor.probe.command_text import short_command
from gpudoctor.probe.diagnosis import Cause

if TYPE_CHECKING:
    from gpudoctor.probe.diagnosis import ProcessVerdict

_SUBPROCESS = "subprocess.py"
_WAITS = ("wait",)  # Popen.wait; communicate() reads the pipes while it waits


@dataclass(frozen=True)
class PipeFull:
    """A parent in ``Popen.wait`` and its children blocked writing into a full pipe."""

    parent: int
    waits_in: str  # "Popen.wait (subprocess.py:1264)"
    user: str | None  # "<module> (prog.py:25)"
    writers: tuple[tuple[int, str], ...]  # (pid, its command)

    @property
    def told(self) -> set[int]:
        return {self.parent, *(pid for pid, _ in self.writers)}


def _popen_wait(parent: ProcessVerdict) -> tuple[str, str | None] | None:
    frames = peer_stacks.main_frames(parent)
    # py-spy names the method "Popen.wait", faulthandler "wait": the file tells them apart.
    found = [i for i, (name, where) in enumerate(frames)
             if os.path.basename(where.rsplit(":", 1)[0]) == _SUBPROCESS and "asyncio" not in where
             and peer_stacks.function(name) in _WAITS]
    if not found:
        return None
    name, where = frames[found[-1]]
    return f"{name} ({where})", peer_stacks.user(frames[found[-1] + 1:])


def writes_a_full_pipe(process: ProcessVerdict) -> bool:
    """The kernel says it waits to write into a pipe (``pipe_write``, ``anon_pipe_write``)."""
    return bool(process.wchan) and (process.wchan or "").endswith("pipe_write")


def find(judged: Sequence[ProcessVerdict], waiting: set[int]) -> list[PipeFull]:
    """Return each waiting parent in ``Popen.wait`` whose waiting child writes a full pipe."""
    found = []
    for parent in judged:
        if parent.pid not in waiting or (wait := _popen_wait(parent)) is None:
            continue
        writers = tuple((c.pid, short_command(c.cmdline)) for c in judged
                        if c.ppid == parent.pid and c.pid in waiting and writes_a_full_pipe(c))
        if writers:
            found.append(PipeFull(parent.pid, wait[0], wait[1], writers))
    return found


def _story(story: PipeFull) -> list[str]:
    called = f", called from your code {story.user}" if story.user else ""
    one = len(story.writers) == 1
    each = "; ".join(f"pid {pid} ({command})" if command else f"pid {pid}" for pid, command in story.writers)
    return [f"A full pipe before wait(): pid {story.parent} waits in {story.waits_in}{called} for its child to "
            f"exit, while {'its child' if one else 'its children'} {each} {'waits' if one else 'wait'} in the "
            "kernel to write into a pipe (pipe_write) that no process reads: most likely the `stdout=PIPE` or "
            "`stderr=PIPE` its parent holds and reads only after wait() returns. Neither can go on."]


def lines(found: Sequence[PipeFull]) -> list[str]:
    """Say who waits for whom, why neither can go on, and the fix."""
    said = [line for story in found for line in _story(story)]
    return said + [PIPE_FULL_BEFORE_WAIT.why, PIPE_FULL_BEFORE_WAIT.fix_line] if said else []


def causes(found: Sequence[PipeFull], certainty: str) -> list[Cause]:
    """One ``pipe-full-before-wait`` cause per waiting parent."""
    return [Cause(kind=PIPE_FULL_BEFORE_WAIT.cause, certainty=certainty, rule=PIPE_FULL_BEFORE_WAIT.rule,
                  parent=story.parent, processes=tuple(pid for pid, _ in story.writers),
                  evidence=tuple(_story(story)), fix=PIPE_FULL_BEFORE_WAIT.fix) for story in found]
