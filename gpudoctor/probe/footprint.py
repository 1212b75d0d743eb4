"""Measure the host memory of a process tree for ``--memory-limit``.

Summing RSS counts a page once per process that maps it: a parent holding 300 MiB
and three idle fork workers sharing those pages would add up to 1.2 GiB. The
proportional set size (PSS) splits each shared page between its sharers, so the
tree's total is what it really occupies. PSS comes from /proc/PID/smaps_rollup,
which the kernel computes by walking the page tables: it is read only when the
cheap RSS total (an upper bound of the PSS total) is over the limit.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import psutil

# From most to least exact; a process whose smaps cannot be read falls back to RSS.
MEASURES = ("pss", "uss", "rss")


@dataclass(frozen=True)
class Footprint:
    """One process's memory at one moment: its RSS, and, where /proc/PID/smaps_rollup was
    readable, its PSS and USS (the pages no other process maps: what it holds alone)."""

    rss: int
    pss: int | None = None
    uss: int | None = None

    def measured(self) -> tuple[int, str]:
        """The most exact measure there is, and its name."""
        for measure in MEASURES:
            value = getattr(self, measure)
            if value is not None:
                return int(value), measure
        return self.rss, "rss"  # not reached: rss is always there

    def to_json(self) -> dict[str, int | None]:
        return {"rss": self.rss, "pss": self.pss, "uss": self.uss}


def footprint(pid: int) -> Footprint | None:
    """Return one process's footprint, or None if it is gone."""
    try:
        process = psutil.Process(pid)
        try:
            full = process.memory_full_info()
        except psutil.AccessDenied:
            return Footprint(int(process.memory_info().rss))
    except psutil.Error:
        return None
    pss, uss = getattr(full, "pss", None), getattr(full, "uss", None)
    return Footprint(int(full.rss), None if pss is None else int(pss), None if uss is None else int(uss))


def process_memory(pid: int) -> tuple[int, str] | None:
    """Return (bytes, measure) for one process, or None if it is gone."""
    found = footprint(pid)
    return None if found is None else found.measured()


def tree_memory(pids: Iterable[int]) -> tuple[int, set[str], dict[int, Footprint]]:
    """Return the tree's total memory, the measures it was counted with, and each
    process's footprint."""
    total, used, each = 0, set(), {}
    for pid in pids:
        found = footprint(pid)
        if found is not None:
            each[pid] = found
            amount, measure = found.measured()
            total += amount
            used.add(measure)
    return total, used, each


def describe(used: set[str]) -> str | None:
    """Name the measures used, most exact first: "pss", "pss+rss"."""
    return "+".join(m for m in MEASURES if m in used) or None
