"""Explain a hang in which two processes both send on a ``multiprocessing`` pipe and
neither reads.

The shape, from the stacks of the waiting processes: the main threads of a parent and
its child (or of two children of one parent) both wait in ``Connection.send`` or
``send_bytes`` (``multiprocessing/connection.py``, blocked in the kernel's write), each
called from the user's own code, and neither receives. A pipe holds a few hundred KiB
at most until the other end reads: each waits for the other to read. Which pipe each
writes to is not read from the kernel: that it is the same ``Pipe`` is said as most
likely. A ``Queue``'s feeder thread writing into a full pipe is another story
(explain_queue_join): only main threads count here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpudoctor.hazards import PIPE_BOTH_SENDING
from gpudoctor.probe import peer_stacks
from gpudoctor.probe.diagnosis import Cause

if TYPE_CHECKING:
    from gpudoctor.probe.diagnosis import ProcessVerdict

_CONNECTION = "multiprocessing/connection.py"
_SENDS = ("send", "send_bytes")


@dataclass(frozen=True)
class Sender:
    pid: int
    ppid: int | None
    waits_in: str  # "_ConnectionBase.send (multiprocessing/connection.py:206)"
    user: str  # "worker (prog.py:20)"


@dataclass(frozen=True)
class BothSending:
    """Related processes that all wait to send on a pipe."""

    senders: tuple[Sender, ...]

    @property
    def told(self) -> set[int]:
        return {s.pid for s in self.senders}


def _sending(process: ProcessVerdict) -> Sender | None:
    frames = peer_stacks.main_frames(process)
    if not frames or not peer_stacks.in_file(frames[0][1], _CONNECTION):
        return None  # not blocked in the connection itself
    outer = 0
    while outer + 1 < len(frames) and peer_stacks.in_file(frames[outer + 1][1], _CONNECTION):
        outer += 1
    name, where = frames[outer]
    if peer_stacks.function(name) not in _SENDS or outer + 1 >= len(frames):
        return None
    caller = frames[outer + 1]
    if not peer_stacks.is_users(caller[1]):
        return None  # a library sends (a Pool's result handler, a Queue): not the user's pipe
    return Sender(process.pid, process.ppid, f"{name} ({where})", f"{caller[0]} ({caller[1]})")


def find(judged: Sequence[ProcessVerdict], waiting: set[int]) -> list[BothSending]:
    """Return the groups of related waiting processes that all send on a pipe: a parent
    and its children, or children of one parent."""
    senders = {s.pid: s for p in judged if p.pid in waiting and (s := _sending(p)) is not None}
    groups: list[set[int]] = []
    for s in senders.values():
        kin = {s.pid} | ({s.ppid} & senders.keys() if s.ppid is not None else set())
        kin |= {o.pid for o in senders.values() if o.pid != s.pid and o.ppid is not None and o.ppid == s.ppid}
        joined = [g for g in groups if g & kin]
        for g in joined:
            groups.remove(g)
            kin |= g
        groups.append(kin)
    return [BothSending(tuple(senders[pid] for pid in sorted(g))) for g in groups if len(g) > 1]


def _story(story: BothSending) -> list[str]:
    pids = {s.pid for s in story.senders}
    each = []
    for s in story.senders:
        who = f"pid {s.pid}" + (f" (a child of pid {s.ppid})" if s.ppid in pids else "")
        each.append(f"{who} waits in {s.waits_in}, called from your code {s.user}")
    return [f"Both ends of a pipe are sending, and neither reads: {'; '.join(each)}. Each writes a message into "
            "a pipe that no process reads, most likely the two ends of one Pipe: neither send can finish until "
            "the other side receives."]


def lines(found: Sequence[BothSending]) -> list[str]:
    """Say who sends where, why neither can finish, and the fix."""
    said = [line for story in found for line in _story(story)]
    return said + [PIPE_BOTH_SENDING.why, PIPE_BOTH_SENDING.fix_line] if said else []


def causes(found: Sequence[BothSending], certainty: str) -> list[Cause]:
    """One ``pipe-both-sending`` cause per group of senders."""
    return [Cause(kind=PIPE_BOTH_SENDING.cause, certainty=certainty, rule=PIPE_BOTH_SENDING.rule,
                  parent=next((s.ppid for s in story.senders if s.ppid in story.told), None),
                  processes=tuple(s.pid for s in story.senders), evidence=tuple(_story(story)),
                  fix=PIPE_BOTH_SENDING.fix) for story in found]
