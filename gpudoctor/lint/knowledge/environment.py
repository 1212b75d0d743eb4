"""Environment variables GPU runtimes read once, at initialization (and what reads them).

``None`` means the CUDA driver itself reads the variable, so any driver initialization
makes a later write useless. Sources: CUDA programming guide "CUDA Environment
Variables"; TensorFlow GPU guide; JAX "GPU memory allocation"; CuPy "Environment
variables"; PyTorch "CUDA semantics" (PYTORCH_CUDA_ALLOC_CONF) and torch/cuda/__init__.py
(PYTORCH_NVML_BASED_CUDA_CHECK).
"""

from __future__ import annotations

READERS: dict[str, str | None] = {
    "CUDA_VISIBLE_DEVICES": None,
    "CUDA_DEVICE_ORDER": None,
    "TF_FORCE_GPU_ALLOW_GROWTH": "tensorflow",
    "TF_GPU_ALLOCATOR": "tensorflow",
    "XLA_PYTHON_CLIENT_PREALLOCATE": "jax",
    "XLA_PYTHON_CLIENT_MEM_FRACTION": "jax",
    "XLA_CLIENT_MEM_FRACTION": "jax",
    "XLA_PYTHON_CLIENT_ALLOCATOR": "jax",
    "JAX_PLATFORMS": "jax",
    "CUPY_GPU_MEMORY_LIMIT": "cupy",
    "PYTORCH_CUDA_ALLOC_CONF": "torch",
    "PYTORCH_NVML_BASED_CUDA_CHECK": "torch",
}
