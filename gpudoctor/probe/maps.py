"""Which GPU runtimes a process has loaded, from its memory mappings (``/proc/PID/maps``).

Read from outside the process, so it works on any process of the user's, supervised or
attached to. Loaded is not initialized: a mapped TensorFlow library says TensorFlow was
imported, not that its thread pools exist.
"""

from __future__ import annotations

import os

# Library file names (as mapped) -> the runtime id the diagnosis uses. TensorFlow's
# framework library, the CUDA driver and runtime, JAX's XLA extension, CuPy's backends.
_LIBRARIES: tuple[tuple[str, str], ...] = (
    ("libtensorflow_framework", "tensorflow"),
    ("_pywrap_tensorflow_internal", "tensorflow"),
    ("libcuda.so", "cuda-driver"),
    ("libcudart", "cuda-runtime"),
    ("xla_extension", "jax"),
    ("libxla", "jax"),
    ("jaxlib", "jax"),
    ("cupy_backends", "cupy"),
    ("libtorch_cuda", "torch.cuda"),
    ("libnvrtc", "nvrtc"),
)


def loaded_runtimes(pid: int) -> dict[str, tuple[str, str]]:
    """Return the GPU runtimes whose libraries ``pid`` has mapped: id -> (path, address)."""
    found: dict[str, tuple[str, str]] = {}
    with open(f"/proc/{pid}/maps") as maps:
        for line in maps:
            parts = line.split(None, 5)
            if len(parts) < 6:
                continue
            path = parts[5].strip()
            name = os.path.basename(path)
            for mark, runtime in _LIBRARIES:
                if runtime not in found and (mark in name or (mark == "jaxlib" and "/jaxlib/" in path)):
                    found[runtime] = (path, parts[0].split("-", 1)[0])
    return found
