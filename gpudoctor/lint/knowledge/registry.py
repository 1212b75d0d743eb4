"""All framework tables merged into one lookup, built once per process."""

from __future__ import annotations

from functools import lru_cache

from gpudoctor.lint.knowledge import cupy, jax, numba, pycuda, tensorflow, torch
from gpudoctor.lint.knowledge.table import Api, ApiTable

FRAMEWORKS = ("tensorflow", "cupy", "torch", "jax", "numba", "pycuda")
FRAMEWORK_MODULES = {
    "tensorflow": "tensorflow", "keras": "tensorflow", "cupy": "cupy", "cupyx": "cupy",
    "torch": "torch", "jax": "jax", "jaxlib": "jax", "numba": "numba", "pycuda": "pycuda",
}
DISPLAY = {
    "tensorflow": "TensorFlow", "cupy": "CuPy", "torch": "PyTorch", "jax": "JAX",
    "numba": "Numba CUDA", "pycuda": "PyCUDA",
}


@lru_cache(maxsize=1)
def api_table() -> ApiTable:
    """Return the merged table of every framework's APIs."""
    return ApiTable((*tensorflow.TABLE, *cupy.TABLE, *torch.TABLE, *jax.TABLE,
                     *numba.TABLE, *pycuda.TABLE))


def initializing_import(module: str) -> Api | None:
    """Return the entry for a module whose import alone initializes CUDA."""
    return pycuda.INITIALIZING_IMPORTS.get(module)


def framework_of_module(qualname: str) -> str | None:
    """Return the framework a qualified name belongs to (``keras`` counts as TensorFlow)."""
    return FRAMEWORK_MODULES.get(qualname.split(".", 1)[0])
