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

import psutil

# From most to least exact; a process whose smaps cannot be read falls back to RSS.
MEASURES = ("pss", "uss", "rss")


def process_memory(pid: int) -> tuple[int, str] | None:
    """Return (bytes, measure) for one process, or None if it is gone."""
    try:
        process = psutil.Process(pid)
        try:
            full = process.memory_full_info()
        except psutil.AccessDenied:
            return int(process.memory_info().rss), "rss"
    except psutil.Error:
        return None
    for measure in MEASURES:
        value = getattr(full, measure, None)
        if value is not None:
            return int(value), measure
    return None


def tree_memory(pids: Iterable[int]) -> tuple[int, set[str]]:
    """Return the tree's total memory and the measures it was counted with."""
    total, used = 0, set()
    for pid in pids:
        found = process_memory(pid)
        if found is not None:
            total += found[0]
            used.add(found[1])
    return total, used


def describe(used: set[str]) -> str | None:
    """Name the measures used, most exact first: "pss", "pss+rss"."""
    return "+".join(m for m in MEASURES if m in used) or None
