"""Pause Python's cyclic garbage collector while linting.

The analysis builds hundreds of thousands of small, long-lived objects (libcst trees, the
walks of shared modules) and drops almost nothing until the run ends. The collector cannot
know that: it traverses the growing heap again and again, which on a real repository was a
third of the analysis time and freed nothing (the peak memory with and without it is the
same). Reference counting still frees everything that is not in a cycle.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused() -> Iterator[None]:
    """Run the block with the collector off; the objects alive before it (modules, the
    interpreter's own) are set aside so that a collection after it does not traverse them."""
    if not gc.isenabled():  # paused already (nested, or the embedding program chose so)
        yield
        return
    gc.freeze()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        gc.unfreeze()
