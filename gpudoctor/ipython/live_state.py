"""What this process holds right now that decides whether a fork is safe.

The evidence is the probe's: ``initialized_runtimes`` and ``native_threads`` of the
bootstrap, which look only at modules already imported (and ask an already-loaded
libcuda whether ``cuInit`` ran), so reading it never initializes a runtime. The start
method is read the same way: ``get_start_method(allow_none=True)`` does not fix the
default the way a plain ``get_start_method()`` would.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import threading
from dataclasses import dataclass

from gpudoctor.knowledge.registry import FRAMEWORK_MODULES
from gpudoctor.knowledge.runtimes import bootstrap_tables
from gpudoctor.probe.bootstrap import sitecustomize as detect

detect.configure(bootstrap_tables())  # (the kernel reads its own runtimes with the bootstrap's code)


@dataclass(frozen=True)
class LiveState:
    """One reading of the process."""

    pid: int
    runtimes: tuple[str, ...]  # the bootstrap's names: "tensorflow", "torch.cuda", "jax:cpu", "cuda-driver"
    imported: tuple[str, ...]  # frameworks (knowledge names) with a module imported
    native_threads: int | None  # None: /proc cannot tell
    python_threads: int
    start_method: str  # what a Pool() made now would use
    method_chosen: bool  # set by set_start_method (else the platform's default)


def framework_of(runtime: str) -> str | None:
    """The framework a runtime of the bootstrap belongs to ("torch.cuda" -> "torch");
    None for the CUDA driver, which any of them may have initialized."""
    module = runtime.split(":", 1)[0]
    while module:
        if module in FRAMEWORK_MODULES:
            return FRAMEWORK_MODULES[module]
        module = module.rpartition(".")[0]
    return None


def imported_frameworks() -> tuple[str, ...]:
    """The frameworks one of whose modules is imported (importing one initializes nothing)."""
    modules = sys.modules
    return tuple(dict.fromkeys(name for module, name in FRAMEWORK_MODULES.items() if module in modules))


def start_method() -> tuple[str, bool]:
    """The start method a ``Pool()`` would use now, and whether the program chose it."""
    chosen = multiprocessing.get_start_method(allow_none=True)
    if chosen is not None:
        return chosen, True
    # The platform's default is the first of the methods it supports.
    return multiprocessing.get_all_start_methods()[0], False


def runtimes() -> tuple[str, ...]:
    return tuple(detect.initialized_runtimes())


def native_threads() -> int | None:
    return detect.native_threads()


def read() -> LiveState:
    method, chosen = start_method()
    return LiveState(os.getpid(), runtimes(), imported_frameworks(), native_threads(),
                     threading.active_count(), method, chosen)


def evidence(runtime: str) -> str:
    """What was seen, in words: "its eager context exists"."""
    from gpudoctor.knowledge.runtimes import runtime as record

    found = record(runtime)
    return found.evidence if found is not None else "seen initialized"
