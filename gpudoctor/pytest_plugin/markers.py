"""The plugin's markers: their documentation for ``pytest --markers``, and their arguments.

Standard library and ``gpudoctor.probe.units`` only: this module is imported at
pytest startup, so it must cost nothing.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from gpudoctor.probe.units import MAX_SIZE, parse_size

FORK_SAFE = "fork_safe"
HANG_TIMEOUT = "hang_timeout"
MEMORY_LIMIT = "gpu_memory_limit"
LEAK_LIMIT = "gpu_memory_leak_limit"
NAMES = (FORK_SAFE, HANG_TIMEOUT, MEMORY_LIMIT, LEAK_LIMIT)

# One line each, as pytest shows them: "name(args): what it does".
DOCS = (
    f"{FORK_SAFE}(check=True, threads=False): fail the test if, while it ran, any process of its tree "
    "forked while it had a GPU runtime (or TensorFlow's runtime and its thread pools) "
    "initialized; threads=True also fails a fork from a process with more than one native thread. "
    "The report names the fork site and the runtimes. fork_safe(False) exempts a test from "
    "--gpudoctor-fork-safe.",
    f"{HANG_TIMEOUT}(seconds, hang_after=None, native_stacks=True): after SECONDS, dump the stacks "
    "of the test process and of all its child processes, explain the hang (gpudoctor's "
    "diagnosis), kill the children and fail the test; the session goes on. hang_timeout(0) "
    "exempts a test from --gpudoctor-hang-timeout.",
    f"{MEMORY_LIMIT}(size): fail the test if the GPU memory its processes hold together "
    '(NVML, sampled) exceeds SIZE, e.g. "2 GiB", "512MiB" or a number of bytes; not checked without NVML.',
    f"{LEAK_LIMIT}(size): fail the test if its processes hold more than SIZE more GPU memory "
    'at its end than at its start, e.g. "64 MiB" or a number of bytes; not checked without NVML.',
)


class MarkerError(ValueError):
    """A marker was given arguments it cannot take; the message names the marker."""


class _Marker(Protocol):
    """The part of a ``pytest.Mark`` read here: read-only, as pytest's is."""

    @property
    def name(self) -> str: ...
    @property
    def args(self) -> tuple[Any, ...]: ...
    @property
    def kwargs(self) -> Mapping[str, Any]: ...


class _Item(Protocol):
    """The part of a ``pytest.Item`` read here (pytest itself is not imported: see above)."""

    def get_closest_marker(self, name: str) -> _Marker | None: ...


@dataclass(frozen=True)
class ForkSafe:
    """``fork_safe``: which forks count as unsafe."""

    threads: bool = False


@dataclass(frozen=True)
class HangTimeout:
    """``hang_timeout``: the deadline of the test's call, and how to judge a stall."""

    seconds: float
    hang_after: float | None = None  # stalled this long counts as hung; default: half the deadline
    native_stacks: bool = True

    @property
    def stall_threshold(self) -> float:
        """Return how long a process must wait without CPU progress to be called hung."""
        return self.hang_after if self.hang_after is not None else self.seconds / 2


@dataclass(frozen=True)
class Plan:
    """What one test asked the plugin to check."""

    fork_safe: ForkSafe | None = None
    hang: HangTimeout | None = None
    memory_limit: int | None = None
    leak_limit: int | None = None

    @property
    def needs_gpu(self) -> bool:
        return self.memory_limit is not None or self.leak_limit is not None

    @property
    def needs_instrumentation(self) -> bool:
        return self.fork_safe is not None or self.hang is not None


def _bind(marker: _Marker, names: tuple[str, ...], required: int) -> dict[str, Any]:
    """Match a marker's positional and keyword arguments to ``names``; raise MarkerError."""
    if len(marker.args) > len(names):
        raise MarkerError(f"{marker.name} takes at most {len(names)} positional argument(s)")
    bound = dict(zip(names, marker.args, strict=False))
    for key, value in marker.kwargs.items():
        if key not in names:
            raise MarkerError(f"{marker.name} has no argument {key!r} (it takes {', '.join(names)})")
        if key in bound:
            raise MarkerError(f"{marker.name} got {key!r} twice")
        bound[key] = value
    missing = [n for n in names[:required] if n not in bound]
    if missing:
        raise MarkerError(f"{marker.name} needs {', '.join(missing)}, e.g. @pytest.mark.{marker.name}"
                          f"({'30' if marker.name == HANG_TIMEOUT else repr('2 GiB')})")
    return bound


def _shown(value: Any) -> str:
    """``value`` as the message shows it: its repr, cut short."""
    text = repr(value)
    return text if len(text) <= 60 else text[:59] + "…"


def _size(marker: _Marker) -> int:
    """Read a size: "2 GiB", "512MiB", "1.5GB", or a number of bytes; at least 1 byte, at most 1 EiB."""
    value = _bind(marker, ("size",), 1)["size"]
    wrong = MarkerError(f"{marker.name}: expected a size such as '512 MiB', '2GiB' or a number of bytes "
                        f"> 0, got {_shown(value)}")
    too_large = MarkerError(f"{marker.name}: expected a size of at most 1 EiB, got {_shown(value)}")
    if isinstance(value, bool):  # an int to Python, no size to anyone
        raise wrong
    if isinstance(value, numbers.Real):
        try:
            size = int(value) if isinstance(value, numbers.Integral) else float(value)
        except (OverflowError, ValueError):
            raise too_large from None
        if (isinstance(size, float) and not math.isfinite(size)) or size < 1:
            raise wrong
        if size > MAX_SIZE:
            raise too_large
        return int(size)
    if not isinstance(value, str):
        raise wrong
    try:
        size = parse_size(value)
    except ValueError as error:
        raise (too_large if str(error).startswith("not a possible size") else wrong) from None
    if size < 1:
        raise wrong
    return size


def _seconds(marker: _Marker, value: Any, what: str, none: bool = False) -> float:
    """Read a finite number of seconds, more than 0; 0 too (meaning none) where ``none`` says so."""
    least = "0 (none) or more" if none else "more than 0"
    wrong = MarkerError(f"{marker.name}: {what} must be a finite number of seconds, {least}, got {_shown(value)}")
    if isinstance(value, bool):  # hang_timeout(True) is no deadline of 1 s
        raise wrong
    try:
        seconds = float(value)
    except (TypeError, ValueError, OverflowError):  # OverflowError: an int of 400 digits
        raise wrong from None
    if not math.isfinite(seconds) or seconds < 0 or (seconds == 0 and not none):
        raise wrong
    return seconds


def _flag(marker: _Marker, bound: Mapping[str, Any], what: str, default: bool) -> bool:
    """Read a True/False argument: a string such as "no" would be true, and is refused."""
    value = bound.get(what, default)
    if not isinstance(value, bool):
        raise MarkerError(f"{marker.name}: {what} must be True or False, got {_shown(value)}")
    return value


def _hang(marker: _Marker) -> HangTimeout | None:
    bound = _bind(marker, ("seconds", "hang_after", "native_stacks"), 1)
    seconds = _seconds(marker, bound["seconds"], "seconds", none=True)
    after = bound.get("hang_after")
    stall = None if after is None else _seconds(marker, after, "hang_after")
    native_stacks = _flag(marker, bound, "native_stacks", True)
    if seconds == 0:  # as pytest-timeout's timeout(0): no deadline for this test
        return None
    return HangTimeout(seconds, stall, native_stacks)


def _fork_safe(marker: _Marker) -> ForkSafe | None:
    bound = _bind(marker, ("check", "threads"), 0)
    check, threads = _flag(marker, bound, "check", True), _flag(marker, bound, "threads", False)
    return ForkSafe(threads) if check else None


def plan_for(item: _Item, hang_timeout: float | None = None, fork_safe: bool = False) -> Plan | None:
    """Return what ``item``'s markers ask for, or None when it asks for nothing.

    ``hang_timeout`` and ``fork_safe`` are the run's settings for every test; a marker on
    the test (or its class or module: the closest one) wins over them.
    """
    found = {name: item.get_closest_marker(name) for name in NAMES}
    if not any(found.values()) and hang_timeout is None and not fork_safe:
        return None
    fork, hang = found[FORK_SAFE], found[HANG_TIMEOUT]
    limit, leak = found[MEMORY_LIMIT], found[LEAK_LIMIT]
    plan = Plan(
        fork_safe=(ForkSafe() if fork_safe else None) if fork is None else _fork_safe(fork),
        hang=(None if hang_timeout is None else HangTimeout(hang_timeout)) if hang is None else _hang(hang),
        memory_limit=None if limit is None else _size(limit),
        leak_limit=None if leak is None else _size(leak),
    )
    return None if plan == Plan() else plan
