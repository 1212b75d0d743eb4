"""How the children of a tree failed, as values that compare: the exception each died
of, and the latest streak of identical failures, which is what a crash loop looks like.

A child's exception comes from the bootstrap's ``exception`` events (an uncaught one,
or the one that ended a ``multiprocessing.Process``'s ``run``), its exit status from its
parent's ``reaped`` event (multiprocessing reaps its own workers). Two failures are the
same when their exit status and their exception (type and message) are: a spawn
``Pool`` started at import time makes every worker die of the same RuntimeError, and
the pool replaces each of them with one that dies the same way, for ever.

The supervisor feeds a ``Streak`` as the events come, to stop such a tree after
``--crash-loop`` identical failures in a row; the diagnosis replays the run's events
into one to explain it.
"""

from __future__ import annotations

import re
import signal
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from gpudoctor.probe.stacks import is_bootstrap, is_library

Event = dict[str, Any]

# How programs stop their own children (multiprocessing.Pool.terminate sends SIGTERM to
# every worker): such an end is neither a failure nor a clean one.
_STOPPED = frozenset({-signal.SIGTERM, -signal.SIGINT, -signal.SIGHUP})
# The longest message of an exception a report repeats: its first sentence, or this much.
_SHORT = 160


@dataclass(frozen=True)
class Frame:
    """One frame of a recorded exception's traceback."""

    path: str  # absolute, or CPython's name for code without a file ("<string>", "<frozen runpy>")
    line: int
    function: str
    text: str  # the source line, stripped ("" when the file could not be read)

    @property
    def where(self) -> str:
        """"function (path:line)", as stacks name a frame."""
        return f"{self.function} ({self.path}:{self.line})"

    @property
    def users(self) -> bool:
        """Tell whether the frame is in the user's own code: a file of theirs, never code
        without a file (``python -c``'s ``<string>``, ``<frozen runpy>``), a library's
        (``multiprocessing``) or gpudoctor's bootstrap."""
        where = f"{self.path}:{self.line}"
        return not self.path.startswith("<") and not is_library(where) and not is_bootstrap(where)


@dataclass(frozen=True)
class Raised:
    """The exception a process died of, as its bootstrap recorded it."""

    type: str  # "RuntimeError"; a class outside builtins with its module ("pkg.errors.Bad")
    message: str
    frames: tuple[Frame, ...] = ()  # outermost first

    @property
    def summary(self) -> str:
        """One line: the type and the message's first sentence ("RuntimeError: An attempt
        has been made to start a new process before the current process has finished its
        bootstrapping phase.")."""
        text = " ".join(self.message.split())
        if len(text) > _SHORT:
            end = re.search(r"[.!?](\s|$)", text)
            text = text[:end.end()].strip() if end and end.end() <= 2 * _SHORT else text[:_SHORT].rstrip() + "…"
        return f"{self.type}: {text}" if text else self.type

    @property
    def user_frame(self) -> Frame | None:
        """The innermost frame in the user's own code: the line of theirs that raised, or
        that called into the library that did (a ``Pool(...)`` line under spawn)."""
        return next((f for f in reversed(self.frames) if f.users), None)


def _frame(value: Any) -> Frame | None:
    if not isinstance(value, list) or len(value) != 4:
        return None
    path, line, function, text = value
    if not (isinstance(path, str) and isinstance(line, int) and isinstance(function, str) and isinstance(text, str)):
        return None
    return Frame(path, line, function, text)


def raised(events: Iterable[Event]) -> dict[int, Raised]:
    """Return the exception each process died of (its last record), by PID."""
    found: dict[int, Raised] = {}
    for event in events:
        pid = event.get("pid")
        if event.get("event") != "exception" or not isinstance(pid, int) or not isinstance(event.get("type"), str):
            continue
        frames = tuple(f for value in event.get("frames") or () if (f := _frame(value)) is not None)
        found[pid] = Raised(event["type"], str(event.get("message") or ""), frames)
    return found


def is_helper(argv: Sequence[str]) -> bool:
    """Tell multiprocessing's resource tracker and forkserver (children of a pool's parent
    that are no workers of it) by their command line."""
    return any("resource_tracker" in a or "forkserver" in a for a in argv)


def is_failure(code: int | None) -> bool:
    """Tell whether an exit status is a failure: not 0, and not the signal a parent stops
    its children with (SIGTERM, SIGINT, SIGHUP)."""
    return code is not None and code != 0 and code not in _STOPPED


def how_it_ended(code: int) -> str:
    """"exited with status 1", "died of SIGKILL"."""
    if code >= 0:
        return f"exited with status {code}"
    try:
        return f"died of {signal.Signals(-code).name}"
    except ValueError:
        return f"died of signal {-code}"


@dataclass(frozen=True)
class Ended:
    """A child as its parent reaped it: when, with which status, of which exception."""

    pid: int
    parent: int | None
    t: float  # seconds from the start, when its parent reaped it
    code: int
    exception: Raised | None

    @property
    def failure(self) -> tuple[int, str | None]:
        """What two identical failures share: the exit status and the exception."""
        return self.code, self.exception.summary if self.exception else None

    def describe(self) -> str:
        """"exited with status 1: RuntimeError: ...", "died of SIGSEGV"."""
        how = how_it_ended(self.code)
        return f"{how}: {self.exception.summary}" if self.exception else how


class Streak:
    """The latest run of children that failed the same way, in the order their parents
    reaped them. A child that ended cleanly ends the streak; one stopped by its parent
    (SIGTERM) neither ends it nor adds to it; a different failure starts a new one."""

    def __init__(self) -> None:
        self.ended: list[Ended] = []
        self._raised: dict[int, Raised] = {}

    def feed(self, events: Iterable[Event]) -> None:
        """Take the next events of the run, in file order (a child writes its exception
        before it exits, its parent the ``reaped`` record after)."""
        for event in events:
            if event.get("event") == "exception":
                self._raised.update(raised([event]))
                continue
            child, code, t = event.get("child"), event.get("code"), event.get("t")
            if event.get("event") != "reaped" or not isinstance(child, int) or not isinstance(code, int):
                continue
            exception = self._raised.pop(child, None)
            if code == 0:
                self.ended = []
            if not is_failure(code):
                continue
            parent = event.get("pid")
            ended = Ended(child, parent if isinstance(parent, int) else None,
                          float(t) if isinstance(t, (int, float)) else 0.0, code, exception)
            if self.ended and self.ended[-1].failure != ended.failure:
                self.ended = []
            self.ended.append(ended)

    @property
    def parents(self) -> list[int]:
        """The processes that started (and reaped) the children of the streak."""
        return sorted({e.parent for e in self.ended if e.parent is not None})


def streak(events: Iterable[Event]) -> Streak:
    """Replay a run's events into the streak they end with."""
    found = Streak()
    found.feed(events)
    return found
