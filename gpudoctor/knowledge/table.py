"""The shape of a knowledge-table entry and the lookup over all tables.

A pattern is a fully qualified name (``cupy.cuda.Device.use``); one ending in ``.*``
covers every deeper name (``cupy.*``). The most specific pattern wins, so a table
states a broad rule ("every cupy call makes a GPU array") and then its exceptions.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TypedDict

from gpudoctor.knowledge.names import StrEnum

# Effects of calling (or, for ATTRIBUTE entries, reading) an API.
DRIVER_INIT = "driver-init"  # cuInit ran: a forked child can no longer use CUDA
RUNTIME_INIT = "runtime-init"  # the framework built its context/allocator/thread pools
GPU_OBJECT = "gpu-object"  # runtime init, and the result lives on the device
# Runtime init, and the result is bound to the framework's runtime without living on the
# device (a TensorFlow summary writer): a process handed one uses the framework; sending
# it copies no device memory.
RUNTIME_OBJECT = "runtime-object"
HOST_COPY = "host-copy"  # the result is a host copy of a device object
INERT = "inert"  # explicitly no effect (an exception to a broad pattern)
TF_CONFIG = "tf-config"  # TensorFlow device configuration: must precede runtime init

INIT_EFFECTS = frozenset({DRIVER_INIT, RUNTIME_INIT, GPU_OBJECT, RUNTIME_OBJECT})


class InitLevel(StrEnum):
    """How far an initializing API took its framework."""

    DRIVER = "driver"  # the CUDA driver is initialized (cuInit): a forked child cannot use CUDA
    RUNTIME = "runtime"  # the framework's context, allocator or thread pools exist too

# Conditions under which an entry's effect happens (``Api.when``, ``Api.keys``); when they
# do not hold the call is inert, and so is any call passing the literal ``enabled=False``.
ON_CUDA = "cuda-device"  # the device argument names CUDA (or is left out and ``cuda_default``)
ON_NO_ARGUMENTS = "no-arguments"  # called with no argument at all


class Conditions(TypedDict, total=False):
    """The optional fields of an Api, as a framework's table passes them on."""

    attribute: bool
    when: str | None
    cuda_default: bool
    keys: frozenset[str]
    returns: str | None


@dataclass(frozen=True)
class Api:
    """One API pattern and what it does."""

    pattern: str
    effect: str
    framework: str
    source: str
    attribute: bool = False  # the effect happens on attribute access, not only on call
    when: str | None = None  # ON_CUDA or ON_NO_ARGUMENTS: the effect depends on the arguments
    cuda_default: bool = False  # with ON_CUDA: a call naming no device means CUDA
    # Only when the first argument is one of these strings (``config.update("jax_platforms", ...)``).
    keys: frozenset[str] = frozenset()
    # The qualified name the result is known by, so that a method called on it is looked
    # up (``cupy.get_default_memory_pool()`` returns a ``cupy.cuda.MemoryPool``).
    returns: str | None = None

    @property
    def level(self) -> InitLevel | None:
        """How far an initializing entry takes its framework; None for the others."""
        if self.effect == DRIVER_INIT:
            return InitLevel.DRIVER
        if self.effect in (RUNTIME_INIT, GPU_OBJECT, RUNTIME_OBJECT):
            return InitLevel.RUNTIME
        return None


class ApiTable:
    """All entries of all frameworks, looked up by qualified name; ``aliases`` maps other
    spellings of a namespace (prefix -> prefix) onto the one the entries are written under."""

    def __init__(self, entries: Iterable[Api], aliases: Iterable[tuple[str, str]] = ()) -> None:
        self._aliases = tuple(aliases)
        self._exact: dict[str, Api] = {}
        self._prefix: dict[str, Api] = {}
        for entry in entries:
            if entry.pattern.endswith(".*"):
                self._prefix[entry.pattern[:-2]] = entry
            else:
                self._exact[entry.pattern] = entry

    def lookup(self, qualname: str) -> Api | None:
        """Return the most specific entry for ``qualname``, if any."""
        for prefix, target in self._aliases:
            if qualname.startswith(prefix):
                qualname = target + qualname[len(prefix):]
                break
        hit = self._exact.get(qualname)
        if hit is not None:
            return hit
        parts = qualname.split(".")
        for cut in range(len(parts) - 1, 0, -1):
            hit = self._prefix.get(".".join(parts[:cut]))
            if hit is not None:
                return hit
        return None
