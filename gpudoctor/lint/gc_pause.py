"""Pause Python's cyclic garbage collector while linting.

The analysis builds hundreds of thousands of small, long-lived objects (libcst trees, the
walks of shared modules) and drops almost nothing until the run ends. The collector cannot
know that: it traverses the growing heap again and again, for a large share of the
analysis time, and frees nothing (docs/performance.md, "The garbage collector").
Reference counting still frees everything that is not in a cycle.

When the process ends after the run (the command line, a worker), the collector is left
off: turning it back on would make it traverse the whole heap once to free what the exit
frees anyway (docs/performance.md), and what is alive then is set aside so that the
interpreter's collection at exit skips it too.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

_process_ends = False
_left_off = False  # a run of this process left the collector off (see process_ends_after_run)


def process_ends_after_run() -> None:
    """Say that this process exits once linting is done (called by its entry point)."""
    global _process_ends  # noqa: PLW0603 - one switch, for the life of the process
    _process_ends = True


def process_outlives_runs() -> None:
    """Say that this process goes on after each run (a server): the collector is turned
    back on after every run, as for a program that embeds the linter."""
    global _process_ends  # noqa: PLW0603
    _process_ends = False


def off_until_exit() -> None:
    """Turn the collector off for the rest of this process's life: a worker, which only
    analyses (file after file, each adding to its parses) and then exits."""
    process_ends_after_run()
    gc.disable()


@contextmanager
def paused() -> Iterator[None]:
    """Run the block with the collector off, and turn it back on after.

    In a process that ends after the run it stays off, and what is alive is set aside for
    the exit; a second run in that process (``--fix`` lints again) first frees what the
    first one left. A collector the embedding program turned off is left alone, and
    objects it froze stay frozen. In a program with threads the pause holds for all of
    them while the block runs: it costs their cyclic garbage some time, nothing more.
    """
    global _left_off  # noqa: PLW0603
    if _left_off:
        gc.unfreeze()
        gc.collect()
        _left_off = False
    elif not gc.isenabled():  # paused already (nested), or the embedding program chose so
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        if _process_ends:
            gc.freeze()
            _left_off = True
        else:
            gc.enable()
