"""What the live view shows at one moment: a snapshot of the watched tree, as plain data.

The supervisor already scans the tree every tick and the sampler already reads GPU
memory; a snapshot is built from what they hold, a few times a second and only while a
view is open, never by sampling anything again. Two things are read here and nowhere
else: the events file (each process's origin: a fork child, a spawn child), read on
from where the last snapshot stopped, and each process's memory mappings (the GPU
runtimes it loaded), read again only when its virtual size changed (mapping a library
changes it) and at most every ``_MAPS_EVERY`` seconds.

Rendering a snapshot (``live_render``) is a pure function of it, so the view is tested
without a terminal.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from gpudoctor.probe import events as run_events

if TYPE_CHECKING:
    from gpudoctor.probe.attach import Observed
    from gpudoctor.probe.record import Limits
    from gpudoctor.probe.tree import Tree

_MAPS_EVERY = 2.0
# A process that waited this long without CPU progress is counted as not progressing.
IDLE_MIN = 1.0


@dataclass(frozen=True)
class ProcessLine:
    """One process as the view shows it."""

    pid: int
    role: str  # "launcher", "fork child", "spawn child", "resource tracker", ...
    runtimes: tuple[str, ...]  # GPU runtimes mapped into it (``maps.loaded_runtimes`` ids)
    threads: int
    cpu_percent: float | None  # of one core since the previous snapshot (None: first look)
    idle_s: float  # waiting without CPU progress for so long (0: it runs)
    stopped: bool  # held by SIGSTOP or a tracer
    rss: int
    gpu: int | None  # bytes on all GPUs (NVML); None: not known (no NVML, or not listed)


@dataclass(frozen=True)
class Snapshot:
    """The tree at one moment, and how far it is from a verdict."""

    title: str  # what is watched: the command, or the attached PIDs
    elapsed: float  # seconds since the watch began
    processes: tuple[ProcessLine, ...]  # the live ones, the root first
    quiet_s: float  # nothing in the tree has moved for so long
    hang_after: float  # a tree quiet for this long, every process idle, is hung
    timeout: float | None = None
    stopping: str | None = None  # why the tree is being stopped, once it is
    attached: bool = False  # --pid: the verdict comes at the end of the watch window
    gpu_note: str | None = None  # why there is no GPU column data ("no NVML")

    @property
    def idle(self) -> tuple[ProcessLine, ...]:
        """The processes that have not progressed for at least ``IDLE_MIN`` seconds."""
        return tuple(p for p in self.processes if p.idle_s >= IDLE_MIN)

    @property
    def all_idle_s(self) -> float:
        """For how long every live process has been idle and the tree quiet (0: not all are)."""
        if not self.processes or len(self.idle) < len(self.processes):
            return 0.0
        return min(self.quiet_s, *(p.idle_s for p in self.processes))


def role(pid: int, root: int, cmdline: tuple[str, ...], origin: run_events.Origin | None) -> str:
    """Name what a process is to the tree, from what the probe knows of it."""
    if pid == root:
        return "launcher"
    text = " ".join(cmdline[:4])
    if "resource_tracker" in text:
        return "resource tracker"
    if "forkserver" in text:
        return "forkserver"
    if origin is not None and origin.how == "fork":
        return "fork child"
    if origin is not None and origin.how == "spawn" or "spawn_main" in text or "--multiprocessing-fork" in text:
        return "spawn child"
    program = os.path.basename(cmdline[0]) if cmdline else ""
    return f"exec {program}" if program else "exec"


class _EventsTail:
    """Read an events file on from where the last read stopped; keep the origins."""

    def __init__(self, path: Path | None) -> None:
        self._tail = run_events.Tail(path)
        self._events: list[run_events.Event] = []
        self.origins: dict[int, run_events.Origin] = {}

    def read(self) -> None:
        fresh = self._tail.read()
        if fresh:
            self._events += fresh
            self.origins = run_events.origins(self._events)


class _Runtimes:
    """The runtimes each process has mapped, re-read when its virtual size changes."""

    def __init__(self) -> None:
        self._known: dict[int, tuple[int, float, tuple[str, ...]]] = {}  # pid -> (vsize, when, ids)

    def of(self, pid: int, vsize: int, now: float) -> tuple[str, ...]:
        from gpudoctor.probe.maps import loaded_runtimes

        known = self._known.get(pid)
        if known is not None and (known[0] == vsize or now - known[1] < _MAPS_EVERY):
            return known[2]
        try:
            found = tuple(loaded_runtimes(pid))
        except OSError:
            found = known[2] if known else ()
        self._known[pid] = (vsize, now, found)
        return found

    def forget(self, live: set[int]) -> None:
        for pid in set(self._known) - live:
            del self._known[pid]


class TreeSnapshots:
    """Build snapshots of a supervised tree from the supervisor's own state."""

    def __init__(self, title: str, start: float, limits: Limits, events_path: Path | None,
                 gpu: Callable[[], Mapping[int, int] | None], runtimes: bool = True) -> None:
        self._title = title
        self._start = start
        self._limits = limits
        self._events = _EventsTail(events_path)
        self._gpu = gpu
        self._runtimes = _Runtimes() if runtimes else None
        self._cpu: dict[int, tuple[float, float]] = {}  # pid -> (CPU seconds, when) at the last snapshot

    def take(self, tree: Tree, live: set[int], now: float, stopping: str | None = None) -> Snapshot:
        """Return the tree's snapshot at ``now`` (``live``: the live PIDs of the last scan)."""
        self._events.read()
        gpu = self._gpu()
        lines = []
        for pid in sorted(live, key=lambda p: (p != tree.root, p)):
            track = tree.tracks.get(pid)
            if track is None:
                continue
            before = self._cpu.get(pid)
            percent = None
            if before is not None and now > before[1]:
                percent = max(0.0, 100.0 * (track.cpu - before[0]) / (now - before[1]))
            self._cpu[pid] = (track.cpu, now)
            runtimes = self._runtimes.of(pid, track.vsize, now) if self._runtimes else ()
            lines.append(ProcessLine(
                pid=pid, role=track.rank.label() if track.rank is not None
                else role(pid, tree.root, track.cmdline, self._events.origins.get(pid)),
                runtimes=runtimes, threads=track.threads, cpu_percent=percent,
                idle_s=track.idle_for(now), stopped=track.stopped_since is not None, rss=track.rss,
                gpu=None if gpu is None else gpu.get(pid)))
        for pid in set(self._cpu) - live:
            del self._cpu[pid]
        if self._runtimes:
            self._runtimes.forget(live)
        return Snapshot(self._title, now - self._start, tuple(lines), tree.quiet_for(now),
                        self._limits.hang_after, self._limits.timeout, stopping,
                        gpu_note=None if gpu is not None else "no NVML")


def attached_snapshot(title: str, observed: Mapping[int, Observed], elapsed: float, window: float) -> Snapshot:
    """A snapshot of an attached tree (``gpudoctor probe --pid``) from what attach read."""
    from gpudoctor.probe.attach import stalled

    lines = []
    for pid, seen in sorted(observed.items(), key=lambda item: (item[1].start != "root", item[0])):
        if seen.exited:
            continue
        idle = elapsed if stalled(seen, elapsed) else 0.0
        lines.append(ProcessLine(
            pid=pid, role={"root": "attached", "fork": "fork child", "spawn": "spawn child"}.get(seen.start, "exec"),
            runtimes=tuple(seen.runtimes), threads=seen.threads,
            cpu_percent=100.0 * seen.cpu_used / elapsed if elapsed > 0 else None,
            idle_s=idle, stopped=seen.state in ("stopped", "tracing-stop"), rss=seen.rss_peak, gpu=None))
    quiet = min((p.idle_s for p in lines), default=0.0)
    return Snapshot(title, elapsed, tuple(lines), quiet, window, attached=True,
                    gpu_note="GPU memory is read at the end")
