"""Make the probe's sentences agree in number: "1 native thread", "pid 7 was forked".

A diagnosis counts what it found, and a count of one is the common case (one worker, one
fork): "1 native threads" or "18944 were forked" reads as a program that did not look.
"""

from __future__ import annotations

from collections.abc import Sequence


def plural(count: int, noun: str, nouns: str | None = None) -> str:
    """Return the count with its noun: "1 process", "3 processes", "1 native thread"."""
    if count == 1:
        return f"{count} {noun}"
    return f"{count} {nouns or (noun + 'es' if noun.endswith(('s', 'sh', 'ch', 'x')) else noun + 's')}"


def agree(count: int, one: str, many: str) -> str:
    """Return the word for ``count`` things: ``agree(1, "was", "were")`` is "was"."""
    return one if count == 1 else many


def pids(numbers: Sequence[int]) -> str:
    """Name processes by PID as a sentence does: "pid 7", "pids 7, 8"."""
    return f"{agree(len(numbers), 'pid', 'pids')} {', '.join(map(str, numbers))}"
