"""Explain a receiver that took shared memory from a queue after its sender had exited.

A framework may send shared memory between processes as a handle the receiver redeems
with the sender when it unpickles the item (torch.multiprocessing's default
``file_descriptor`` strategy: the storage's file descriptor is fetched from the sending
process's ``multiprocessing.resource_sharer``, pytorch/pytorch#65418). A producer that puts
its last items and returns leaves them queued with nobody to hand their descriptors over:
the consumer's next ``get()`` fails with FileNotFoundError, ConnectionRefusedError,
ConnectionResetError or EOFError, from frames of the framework's rebuild function and of
``resource_sharer``. Which files those are is knowledge (``Framework.shared_by_descriptor``);
this module tells which process had exited before the failing ``get()``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from gpudoctor import hazards
from gpudoctor.knowledge.framework import SharedByDescriptor
from gpudoctor.knowledge.registry import RECORDS
from gpudoctor.probe.failures import Frame, Raised, how_it_ended, is_helper

if TYPE_CHECKING:
    from gpudoctor.probe.diagnosis import ProcessVerdict
    from gpudoctor.probe.record import RunRecord

# The exceptions a receiver meets when the sender's resource_sharer is gone: its socket
# file removed (FileNotFoundError), nobody listening (ConnectionRefusedError), or the
# sender exiting during the handshake (ConnectionResetError, EOFError, BrokenPipeError).
TYPES = ("FileNotFoundError", "ConnectionRefusedError", "ConnectionResetError", "EOFError", "BrokenPipeError",
         "ConnectionAbortedError")
# CPython's module that hands a sent descriptor over, in the sending process.
_SHARER = "multiprocessing/resource_sharer.py"
_WAYS: tuple[SharedByDescriptor, ...] = tuple(r.shared_by_descriptor for r in RECORDS if r.shared_by_descriptor)
FRAMES: tuple[str, ...] = tuple(f for way in _WAYS for f in way.frames)


def _posix(path: str) -> str:
    return path.replace("\\", "/")


def _way(frames: Sequence[Frame]) -> SharedByDescriptor | None:
    """The framework's way of sharing the traceback went through, if it also reached the
    resource sharer (a descriptor fetched from the sender)."""
    paths = [_posix(f.path) for f in frames]
    if not any(p.endswith(_SHARER) for p in paths):
        return None
    return next((w for w in _WAYS if any(p.endswith(f) for p in paths for f in w.frames)), None)


def redeemed_from_sender(error: Raised) -> bool:
    """Tell whether ``error`` was raised while the receiver fetched a shared item's
    descriptor from its sender (the frames, not the message, say so)."""
    return error.type.rsplit(".", 1)[-1] in TYPES and _way(error.frames) is not None


# The hazard, its fix followed by the frameworks' own ways out.
HAZARD = replace(hazards.SHARED_TENSOR_SENDER_EXITED, fix="; ".join(
    [hazards.SHARED_TENSOR_SENDER_EXITED.fix.rstrip(".")] + [f"or, for {w.what}, {w.fix}" for w in _WAYS]) + ".")


def _ended(run: RunRecord) -> dict[int, float]:
    """When each process ended, seconds from the start: its parent's reaping, its own exit
    record, or the supervisor's last sight of it."""
    found: dict[int, float] = {}
    for e in run.events:
        t = e.get("t")
        if not isinstance(t, (int, float)):
            continue
        if e.get("event") == "reaped" and isinstance(e.get("child"), int):
            found.setdefault(e["child"], float(t))
        elif e.get("event") == "exit" and isinstance(e.get("pid"), int):
            found.setdefault(e["pid"], float(t))
    for track in run.processes:
        if not track.alive_at_stop:
            found.setdefault(track.pid, track.last_seen)
    return found


def _names(run: RunRecord) -> dict[int, str]:
    """"Process-1, running actor": what the bootstrap recorded of each multiprocessing Process."""
    found = {}
    for e in run.events:
        if e.get("event") == "process" and isinstance(e.get("pid"), int):
            target = str(e.get("target") or "").rsplit(".", 1)[-1]
            found[e["pid"]] = str(e.get("name") or "") + (f", running `{target}`" if target else "")
    return found


def senders(error_at: float | None, pid: int | None, run: RunRecord,
            judged: Sequence[ProcessVerdict]) -> list[tuple[ProcessVerdict, float]]:
    """The processes (not the receiver, not multiprocessing's helpers) that had ended
    before the receiver's exception, the latest first, with when they ended."""
    ended = _ended(run)
    found = [(p, ended[p.pid]) for p in judged
             if p.pid != pid and p.pid in ended and not is_helper(p.cmdline)
             and (error_at is None or ended[p.pid] <= error_at)]
    return sorted(found, key=lambda item: -item[1])


def lines(error: Raised, error_at: float | None, pid: int | None, run: RunRecord,
          judged: Sequence[ProcessVerdict]) -> list[str]:
    """What was sent, and which process had exited before the receiver redeemed it."""
    way = _way(error.frames)
    what = way.what if way else "shared memory"
    found = [f"The item taken from the queue held {what}, sent as a handle: unpickling it, pid {pid} connected "
             "to the sending process's `resource_sharer` to be handed its file descriptor, and failed."]
    gone = senders(error_at, pid, run, judged)
    names = _names(run)
    if not gone:
        return [*found, "gpudoctor did not see the sender end (it may have been outside the tree, or closed its "
                        "resource sharer)."]
    told = []
    for process, t in gone[:3]:
        name = f" ({names[process.pid]})" if names.get(process.pid) else ""
        how = how_it_ended(process.exit_code) if process.exit_code is not None else "ended"
        told.append(f"pid {process.pid}{name} {how} at t={t:.1f} s")
    when = f" (t={error_at:.1f} s)" if error_at is not None else ""
    return [*found, f"The sender had already exited when the receiver read the item{when}: "
                    + "; ".join(told) + "."]
