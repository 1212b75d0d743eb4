"""The runtimes the probe tells apart in a process, from the framework records and CUDA's own.

A framework's record names its runtimes (``Framework.runtimes``: the id the bootstrap
records when it is initialized, its names, whether it holds CUDA state, the libraries whose
mapping means it is loaded); the CUDA driver's runtimes belong to no framework and are
here. The probe (``/proc/PID/maps``, its explanations and charts), the hazards' wording and
the IPython extension read them from here.
"""

from __future__ import annotations

from gpudoctor.knowledge.framework import Runtime
from gpudoctor.knowledge.registry import RECORDS

# CUDA itself, under every framework: the driver (``cuInit`` ran), a context current in a
# thread, the runtime library and NVRTC (both mapped when loaded).
DRIVER = (
    Runtime("cuda-driver", "CUDA driver", "the CUDA driver (cuInit had run)", cuda=True, libraries=("libcuda.so",),
            evidence="libcuda is loaded and cuInit ran"),
    Runtime("cuda-runtime", "CUDA runtime", "the CUDA runtime library", cuda=True, libraries=("libcudart",)),
    Runtime("cuda-context", "CUDA context", "a current CUDA context", cuda=True,
            evidence="a CUDA context is current in this thread"),
    Runtime("nvrtc", "NVRTC", "NVRTC (CUDA's runtime compiler)", cuda=True, libraries=("libnvrtc",)),
)
RUNTIMES: tuple[Runtime, ...] = (*(r for f in RECORDS for r in f.runtimes), *DRIVER)
# The ids of the runtimes of no framework (the driver's, which the bootstrap records too).
DRIVER_IDS = tuple(r.id for r in DRIVER)
# Which framework each runtime of a framework belongs to (the probe's id, before any ":").
FRAMEWORK_OF = {r.id.rstrip(":"): f.name for f in RECORDS for r in f.runtimes}
# Library file names (as mapped) -> the runtime id, in the records' order.
LIBRARIES: tuple[tuple[str, str], ...] = tuple((mark, r.id.rstrip(":")) for r in RUNTIMES for mark in r.libraries)
# JAX's backends that hold GPU state ("jax:cuda"); its "jax:cpu" does not.
GPU_BACKENDS = ("cuda", "gpu", "rocm")


def bootstrap_tables() -> dict[str, list[object]]:
    """What the probe's bootstrap needs to tell the runtimes of a process apart, as data it
    reads (JSON): the top-level modules of every framework (while none is imported, the
    CUDA driver is not asked), and how each runtime that can be seen initialized is seen
    (``Runtime.seen``)."""
    roots = {module.split(".", 1)[0] for record in RECORDS for module in record.modules}
    roots |= {alias.split(".", 1)[0] for record in RECORDS for alias, _ in record.aliases}
    seen: list[object] = [[r.id.rstrip(":"), r.seen[0], list(r.seen[1]), r.seen[2]]
                          for r in RUNTIMES if r.seen is not None]
    return {"gpu_modules": list(sorted(roots)), "runtimes": seen}


def runtime(id_: str) -> Runtime | None:
    """The record of a runtime id the probe recorded ("jax:cpu" is JAX's)."""
    head = id_.split(":", 1)[0]
    for record in RUNTIMES:
        if record.id == id_ or (record.id.endswith(":") and record.id[:-1] == head):
            return record
    return None


def holds_cuda(id_: str) -> bool:
    """Does the runtime ``id_`` hold CUDA state (which does not survive fork())?"""
    head, _, backend = id_.partition(":")
    if backend:
        return backend in GPU_BACKENDS
    found = runtime(id_)
    return found is not None and found.cuda


def said(id_: str) -> str:
    """The runtime in a sentence: "PyTorch CUDA", "JAX (cpu backend)"."""
    found = runtime(id_)
    head, _, backend = id_.partition(":")
    if found is None:
        return id_
    return f"{found.said} ({backend} backend)" if backend else found.said


def legend(id_: str) -> str:
    """The runtime in a chart's legend: "PyTorch CUDA", "JAX cpu"."""
    found = runtime(id_)
    head, _, backend = id_.partition(":")
    if found is None:
        return id_
    return f"{found.display} {backend}" if backend else found.display
