"""The shape of a knowledge-table entry and the lookup over all tables.

A pattern is a fully qualified name (``cupy.cuda.Device.use``); one ending in ``.*``
covers every deeper name (``cupy.*``). The most specific pattern wins, so a table
states a broad rule ("every cupy call makes a GPU array") and then its exceptions.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

# Effects of calling (or, for ATTRIBUTE entries, reading) an API.
DRIVER_INIT = "driver-init"  # cuInit ran: a forked child can no longer use CUDA
RUNTIME_INIT = "runtime-init"  # the framework built its context/allocator/thread pools
GPU_OBJECT = "gpu-object"  # runtime init, and the result lives on the device
HOST_COPY = "host-copy"  # the result is a host copy of a device object
INERT = "inert"  # explicitly no effect (an exception to a broad pattern)
TF_CONFIG = "tf-config"  # TensorFlow device configuration: must precede runtime init

INIT_EFFECTS = frozenset({DRIVER_INIT, RUNTIME_INIT, GPU_OBJECT})


@dataclass(frozen=True)
class Api:
    """One API pattern and what it does."""

    pattern: str
    effect: str
    framework: str
    source: str
    attribute: bool = False  # the effect happens on attribute access, not only on call

    @property
    def level(self) -> str | None:
        """Return "driver" or "runtime" for initializing entries, else None."""
        if self.effect == DRIVER_INIT:
            return "driver"
        if self.effect in (RUNTIME_INIT, GPU_OBJECT):
            return "runtime"
        return None


class ApiTable:
    """All entries of all frameworks, looked up by qualified name."""

    def __init__(self, entries: Iterable[Api]) -> None:
        self._exact: dict[str, Api] = {}
        self._prefix: dict[str, Api] = {}
        for entry in entries:
            if entry.pattern.endswith(".*"):
                self._prefix[entry.pattern[:-2]] = entry
            else:
                self._exact[entry.pattern] = entry

    def lookup(self, qualname: str) -> Api | None:
        """Return the most specific entry for ``qualname``, if any."""
        hit = self._exact.get(qualname)
        if hit is not None:
            return hit
        parts = qualname.split(".")
        for cut in range(len(parts) - 1, 0, -1):
            hit = self._prefix.get(".".join(parts[:cut]))
            if hit is not None:
                return hit
        return None
