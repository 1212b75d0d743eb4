"""Read the events the bootstrap wrote and index them per process."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

Event = dict[str, Any]


@dataclass(frozen=True)
class Origin:
    """How a process of the tree came to be, from its own events."""

    how: str  # "fork", "spawn", "exec"
    parent: int | None
    t: float | None  # seconds since the command started
    threads_at_fork: int | None = None
    runtimes_at_fork: tuple[str, ...] = ()
    dump_fd: int | None = None  # where faulthandler writes; None: the stack signal is unsafe


def read(path: Path, start_epoch: float) -> list[Event]:
    """Return the events in file order, times made relative to ``start_epoch``.

    A process killed mid-write can leave a partial last line; it is skipped.
    """
    try:
        lines = path.read_bytes().splitlines()
    except OSError:
        return []
    events: list[Event] = []
    for line in lines:
        event = parse_line(line)
        if event is not None:
            event["t"] = round(event["t"] - start_epoch, 4)
            events.append(event)
    return events


def parse_line(line: bytes) -> Event | None:
    """One event of the file (its time as written: seconds since the epoch), or None
    for a line that is not one (half written by a killed process)."""
    try:
        event = json.loads(line)
    except ValueError:
        return None
    if isinstance(event, dict) and isinstance(event.get("t"), (int, float)) and isinstance(event.get("event"), str):
        return event
    return None


class Tail:
    """Read an events file on from where the last read stopped, while processes still
    append to it (a line not yet ended is kept until it is)."""

    def __init__(self, path: Path | None) -> None:
        self._path = path
        self._offset = 0
        self._partial = b""

    def read(self) -> list[Event]:
        """Return the events written since the last read (their times as written)."""
        if self._path is None:
            return []
        try:
            with open(self._path, "rb") as f:
                f.seek(self._offset)
                chunk = f.read()
        except OSError:
            return []
        if not chunk:
            return []
        self._offset += len(chunk)
        lines = (self._partial + chunk).split(b"\n")
        self._partial = lines.pop()
        return [event for line in lines if (event := parse_line(line)) is not None]


def _fd(event: Event) -> int | None:
    value = event.get("dump_fd")
    return value if isinstance(value, int) else None


def origins(events: list[Event]) -> dict[int, Origin]:
    """Return each process's origin; a later exec'd start overrides a fork child record."""
    found: dict[int, Origin] = {}
    for event in events:
        pid = event.get("pid")
        if not isinstance(pid, int):
            continue
        if event["event"] == "fork-child":
            found[pid] = Origin(
                "fork",
                event.get("ppid"),
                event.get("t"),
                event.get("threads_at_fork"),
                tuple(event.get("runtimes_at_fork") or ()),
                _fd(event),
            )
        elif event["event"] == "start":
            found[pid] = Origin(event.get("how", "exec"), event.get("ppid"), event.get("t"),
                                dump_fd=_fd(event))
    return found


def exit_codes(events: list[Event]) -> dict[int, int | None]:
    """Return each process's exit code from the events (None: exited through Python, code unknown).

    A parent's ``reaped`` record (its os.waitpid saw the child's status) is the exact
    status, signals included; otherwise the process's own ``exit`` record counts.
    """
    codes: dict[int, int | None] = {}
    reaped: dict[int, int] = {}
    for event in events:
        if event["event"] == "reaped" and isinstance(event.get("child"), int) \
                and isinstance(event.get("code"), int):
            reaped[event["child"]] = event["code"]
        elif event["event"] == "exit" and isinstance(event.get("pid"), int):
            code = event.get("code")
            # os._exit records the code; an atexit record after it must not erase it.
            if codes.get(event["pid"]) is None:
                codes[event["pid"]] = code if isinstance(code, int) else None
    return {**codes, **reaped}
