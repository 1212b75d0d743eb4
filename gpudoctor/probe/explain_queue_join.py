"""Explain a hang in which a parent joins a child that cannot exit until the parent reads
what the child put on a ``multiprocessing.Queue``.

The shape, from the stacks of the waiting processes: the parent's main thread waits in
``BaseProcess.join`` (``multiprocessing/process.py``); a child of it waits either at its
exit, in ``Queue._finalize_join`` (``multiprocessing/queues.py``, run by
``util._exit_function`` once its target returned) for the queue's feeder thread, which is
blocked writing into the queue's pipe (``Queue._feed`` → ``send_bytes``), or in
``Queue.put`` itself, on a queue with a ``maxsize`` that is full. Neither side can move:
the pipe empties only when the parent reads, and the parent reads only after ``join``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpudoctor.hazards import QUEUE_JOINED_BEFORE_READ
from gpudoctor.probe import stacks
from gpudoctor.probe.diagnosis import Cause
from gpudoctor.probe.wording import agree

if TYPE_CHECKING:
    from gpudoctor.probe.diagnosis import ProcessVerdict

_PROCESS = "multiprocessing/process.py"
_QUEUES = "multiprocessing/queues.py"
_CONNECTION = "multiprocessing/connection.py"


@dataclass(frozen=True)
class HeldChild:
    """A child that cannot go on until its parent reads its queue."""

    pid: int
    waits_in: str  # "Queue._finalize_join (multiprocessing/queues.py:199)" or "Queue.put (...)"
    at_exit: bool  # True: its target returned, it waits at exit; False: it waits in put
    feeder: str | None  # where its feeder thread writes: "_ConnectionBase.send_bytes (...connection.py:200)"
    user: str | None  # its own line, in its target (the put), when its stack has one


@dataclass(frozen=True)
class QueueJoin:
    """A parent waiting in ``join`` for children that wait for it to read their queue."""

    parent: int
    join: str  # "BaseProcess.join (multiprocessing/process.py:149)"
    user: str | None  # the parent's line that called join
    children: tuple[HeldChild, ...]


def _in(where: str, file: str) -> bool:
    return file in where.replace(os.sep, "/")


def _function(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def _user(frames: Sequence[tuple[str, str]]) -> str | None:
    return next((f"{name} ({where})" for name, where in frames
                 if not where.startswith("<") and not stacks.is_library(where)), None)


def _joining(parent: ProcessVerdict) -> tuple[str, str | None] | None:
    """Where the parent's main thread waits in ``join``, and its own line under it."""
    if not parent.stack:
        return None
    frames = stacks.python_frames(parent.stack, parent.stack_source)
    at = next((i for i, (name, where) in enumerate(frames) if _function(name) == "join" and _in(where, _PROCESS)),
              None)
    if at is None:
        return None
    name, where = frames[at]
    return f"{name} ({where})", _user(frames[at + 1:])


def _feeder(child: ProcessVerdict) -> str | None:
    """Where the child's queue feeder thread writes into the pipe, if a thread of it does."""
    for _, frames in stacks.threads(child.stack or "", child.stack_source):
        python = [f for f in frames if f.python]
        if not any(_function(f.name) == "_feed" and _in(f.where, _QUEUES) for f in python):
            continue
        sending = [f for f in python if _in(f.where, _CONNECTION)]
        if sending:
            return f"{sending[-1].name} ({sending[-1].where})"
    return None


def _held(child: ProcessVerdict) -> HeldChild | None:
    if not child.stack:
        return None
    frames = stacks.own_frames(stacks.python_frames(child.stack, child.stack_source))
    for index, (name, where) in enumerate(frames):
        if not _in(where, _QUEUES) or _function(name) not in ("_finalize_join", "put"):
            continue
        at_exit = _function(name) == "_finalize_join"
        return HeldChild(child.pid, f"{name} ({where})", at_exit, _feeder(child),
                         None if at_exit else _user(frames[index + 1:]))
    return None


def find(judged: Sequence[ProcessVerdict], waiting: set[int]) -> list[QueueJoin]:
    """Return, per parent waiting in ``join``, its waiting children held by their queues."""
    found = []
    for parent in judged:
        if parent.pid not in waiting:
            continue
        joining = _joining(parent)
        if joining is None:
            continue
        held = [_held(c) for c in judged if c.ppid == parent.pid and c.pid in waiting and c.start != "root"]
        children = tuple(h for h in held if h is not None)
        if children:
            found.append(QueueJoin(parent.pid, joining[0], joining[1], children))
    return found


def _child_line(child: HeldChild, parent: int) -> str:
    if not child.at_exit:
        called = f", called from your code {child.user}" if child.user else ""
        return (f"pid {child.pid} waits in {child.waits_in}{called}: the queue is full (its maxsize) and "
                f"nothing takes items off it while pid {parent} waits in join.")
    feeder = (f" for the queue's feeder thread, which is blocked writing an item into the queue's pipe in "
              f"{child.feeder}" if child.feeder else " for the queue's feeder thread")
    return (f"pid {child.pid} has returned from its target and waits at its exit, in {child.waits_in},"
            f"{feeder}: the pipe takes no more until pid {parent} reads it.")


def _story(story: QueueJoin) -> list[str]:
    """The evidence of one parent's join, a sentence per fact."""
    n = len(story.children)
    called = f", called from your code {story.user}" if story.user else ""
    lead = (f"Joined before its queue was read: pid {story.parent} joins {agree(n, 'process', 'processes')} "
            f"{', '.join(str(c.pid) for c in story.children)} before reading what {agree(n, 'it', 'they')} put "
            f"on a multiprocessing Queue; {agree(n, 'the child', 'the children')} cannot exit until "
            f"{agree(n, 'its', 'their')} items are read. pid {story.parent} waits in {story.join}{called}.")
    return [lead, *(_child_line(c, story.parent) for c in story.children)]


def told(found: Sequence[QueueJoin]) -> set[int]:
    """The processes whose waits these stories tell: the parents and their held children."""
    return {story.parent for story in found} | {c.pid for story in found for c in story.children}


def lines(found: Sequence[QueueJoin]) -> list[str]:
    """Say who joins whom, where each waits, why neither can move, and the fix."""
    said = [line for story in found for line in _story(story)]
    return said + [QUEUE_JOINED_BEFORE_READ.why, QUEUE_JOINED_BEFORE_READ.fix_line] if said else []


def causes(found: Sequence[QueueJoin], certainty: str) -> list[Cause]:
    """One ``join-before-queue-drained`` cause per parent that joins before it reads."""
    return [Cause(kind=QUEUE_JOINED_BEFORE_READ.cause, certainty=certainty, rule=QUEUE_JOINED_BEFORE_READ.rule,
                  parent=story.parent, processes=tuple(c.pid for c in story.children),
                  evidence=tuple(_story(story)), fix=QUEUE_JOINED_BEFORE_READ.fix)
            for story in found]
