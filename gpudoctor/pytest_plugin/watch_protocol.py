"""The shapes of the JSON lines the plugin and its watcher exchange (the protocol itself is
described in watcher.py): one place that both ends are type-checked against.

Typing only: both ends write and read plain dicts; a line is trusted to have the shape
because only the plugin and the watcher it started write one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, TypedDict


class Arm(TypedDict):
    """The ``arm`` command: the test has ``seconds``; a process idle ``hang_after`` is hung."""

    cmd: Literal["arm"]
    seconds: float
    hang_after: float
    native_stacks: bool
    dump_fd: int
    start_epoch: float
    exclude: list[int]


class Readings(TypedDict):
    """The answer to ``sample``: every GPU reading of the test's processes so far."""

    nvml: str | None  # why NVML could not be read; None when it could
    # (monotonic time, {"device:pid": bytes or None}): a tuple when sent, a list when read.
    rounds: Sequence[Sequence[Any]]
    notes: list[str]
    processes: dict[str, dict[str, Any]]  # by PID: its parent and command line, for the report


class Final(Readings):
    """The answer to ``done``: the readings, the hang's diagnosis (the probe's JSON document)
    when the watch fired, and the processes the watcher killed."""

    hang: dict[str, Any] | None
    killed: list[int]
