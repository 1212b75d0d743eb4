"""Which GPU runtimes a process has loaded, from its memory mappings (``/proc/PID/maps``).

Read from outside the process, so it works on any process of the user's, supervised or
attached to. Loaded is not initialized: a mapped TensorFlow library says TensorFlow was
imported, not that its thread pools exist.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

# Library file names (as mapped) -> the runtime id the diagnosis uses. TensorFlow's
# framework library, the CUDA driver and runtime, JAX's XLA extension, CuPy's backends.
_LIBRARIES: tuple[tuple[str, str], ...] = (
    ("libtensorflow_framework", "tensorflow"),
    ("_pywrap_tensorflow_internal", "tensorflow"),
    ("libcuda.so", "cuda-driver"),
    ("libcudart", "cuda-runtime"),
    ("xla_extension", "jax"),
    ("libxla", "jax"),
    # jaxlib's runtime extension (``jaxlib/_jax.so`` in jaxlib 0.10.2's wheel; xla_extension
    # in older ones): not any file under jaxlib/, which another library may map without JAX's
    # runtime (Keras maps ``jaxlib/cpu/_lapack.so`` for its linear algebra).
    ("_jax.", "jax"),
    ("cupy_backends", "cupy"),
    ("libtorch_cuda", "torch.cuda"),
    ("libnvrtc", "nvrtc"),
)


def loaded_runtimes(pid: int) -> dict[str, tuple[str, str]]:
    """Return the GPU runtimes whose libraries ``pid`` has mapped: id -> (path, address)."""
    with open(f"/proc/{pid}/maps") as maps:
        return runtimes_in(maps)


def runtimes_in(lines: Iterable[str]) -> dict[str, tuple[str, str]]:
    """The runtimes of the libraries a ``/proc/PID/maps`` text maps: id -> (path, address)."""
    found: dict[str, tuple[str, str]] = {}
    for line in lines:
        parts = line.split(None, 5)
        if len(parts) < 6:
            continue
        path = parts[5].strip()
        name = os.path.basename(path)
        for mark, runtime in _LIBRARIES:
            if runtime not in found and (name.startswith(mark) and "/jaxlib/" in path if mark == "_jax."
                                         else mark in name):
                found[runtime] = (path, parts[0].split("-", 1)[0])
    return found
