"""Tell which processes can never finish, whatever CPU they use, from the bootstrap's events.

A hang is normally seen as a tree without CPU progress for --hang-after. A
``multiprocessing.Pool`` whose result-handler thread (``Pool._handle_results``) died of an
exception (a callback that raised, an exception that could not be unpickled) never
completes its outstanding jobs: ``join()`` and ``get()`` wait for ever, and the pool's
worker-handler thread, whose wait includes the result pipe nobody reads any more, may
loop without pause (python/cpython#83371). Such a process burns CPU and makes no progress:
the supervisor then measures its progress by its main thread alone (``Tree.wedge``), so
that a main thread waiting for the dead pool is seen waiting.
"""

from __future__ import annotations

from collections.abc import Iterable

from gpudoctor.probe.events import Event

_POOL = "multiprocessing/pool.py"
_RESULT_HANDLER = "_handle_results"


def _frames(event: Event) -> list[tuple[str, str]]:
    found = []
    for frame in event.get("frames") or ():
        if isinstance(frame, list) and len(frame) >= 3:
            found.append((str(frame[0]).replace("\\", "/"), str(frame[2])))
    return found


def result_handler_died(event: Event) -> bool:
    """Tell whether ``event`` is the death of a Pool's result-handler thread."""
    return event.get("event") == "thread-exception" and any(
        path.endswith(_POOL) and function.rsplit(".", 1)[-1] == _RESULT_HANDLER for path, function in _frames(event))


def wedged(events: Iterable[Event]) -> set[int]:
    """The processes whose Pool lost its result handler, in ``events``."""
    return {e["pid"] for e in events if isinstance(e.get("pid"), int) and result_handler_died(e)}
