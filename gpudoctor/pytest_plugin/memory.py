"""Turn the watcher's GPU readings into what the memory markers and ``gpu_monitor`` report."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gpudoctor.probe.command_text import short_command
from gpudoctor.probe.units import format_size

Round = Sequence[Any]  # [monotonic time, {"device:pid": bytes or None}]


@dataclass(frozen=True)
class ProcessMemory:
    """The GPU memory one process of the test held on one device."""

    pid: int
    device: int
    peak: int | None
    at_start: int
    at_end: int
    role: str


@dataclass(frozen=True)
class MemoryUse:
    """The GPU memory of the test's processes over one window of readings."""

    peak: int  # the largest total of one reading: the processes held it at the same time
    at_start: int
    at_end: int
    processes: tuple[ProcessMemory, ...]
    hidden: bool  # NVML reported a process without its memory (MIG, WDDM)
    readings: int

    @property
    def leaked(self) -> int:
        return self.at_end - self.at_start


def _role(pid: int, root: int, info: dict[str, Any]) -> str:
    if pid == root:
        return "test process"
    details = info.get(str(pid)) or {}
    parent = details.get("ppid")
    command = short_command(details.get("cmdline") or [], limit=60)
    return f"child of {parent}" + (f": {command}" if command else "")


def analyse(rounds: Sequence[Round], since: float, root: int, info: dict[str, Any]) -> MemoryUse:
    """Summarize the readings taken at or after ``since`` (the first is the baseline)."""
    window = [(float(t), held) for t, held in rounds if float(t) >= since] or \
        [(float(t), held) for t, held in rounds[-1:]]
    peaks: dict[str, int | None] = {}
    hidden = False
    best = 0
    for _, held in window:
        hidden = hidden or any(v is None for v in held.values())
        best = max(best, sum(v for v in held.values() if v is not None))
        for key, value in held.items():
            old = peaks.get(key, 0)
            peaks[key] = None if value is None or old is None else max(old, value)
    first = window[0][1] if window else {}
    last = window[-1][1] if window else {}
    processes = tuple(
        ProcessMemory(pid=int(key.split(":")[1]), device=int(key.split(":")[0]), peak=peak,
                      at_start=first.get(key) or 0, at_end=last.get(key) or 0,
                      role=_role(int(key.split(":")[1]), root, info))
        for key, peak in sorted(peaks.items(), key=lambda kv: (-(kv[1] or 0), kv[0]))
    )
    return MemoryUse(peak=best, at_start=sum(v or 0 for v in first.values()),
                     at_end=sum(v or 0 for v in last.values()), processes=processes,
                     hidden=hidden, readings=len(window))


def table(use: MemoryUse) -> str:
    """Format the per-process table of a memory report."""
    rows = [("pid", "GPU", "peak", "at start", "at end", "process")]
    rows += [(str(p.pid), str(p.device), format_size(p.peak), format_size(p.at_start),
              format_size(p.at_end), p.role) for p in use.processes]
    rows.append(("all", "", format_size(use.peak), format_size(use.at_start), format_size(use.at_end),
                 f"together ({use.readings} NVML readings)"))
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    return "\n".join("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False)) + "  " + row[5]
                     for row in rows)
