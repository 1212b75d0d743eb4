"""Describe the host: Python, start method, GPU-related environment, memory limits."""

from __future__ import annotations

import multiprocessing
import os
import platform
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

import psutil

# Read by the frameworks when they initialize; each changes how much GPU memory a
# process takes or which devices it sees, so the report shows them all, set or not.
GPU_ENV_VARS = (
    "CUDA_VISIBLE_DEVICES",
    "CUDA_DEVICE_ORDER",
    "TF_FORCE_GPU_ALLOW_GROWTH",
    "TF_GPU_ALLOCATOR",
    "XLA_PYTHON_CLIENT_PREALLOCATE",
    "XLA_PYTHON_CLIENT_MEM_FRACTION",
    "XLA_CLIENT_MEM_FRACTION",
    "XLA_PYTHON_CLIENT_ALLOCATOR",
    "CUPY_GPU_MEMORY_LIMIT",
    "PYTORCH_CUDA_ALLOC_CONF",
    "PYTORCH_NVML_BASED_CUDA_CHECK",
    "JAX_PLATFORMS",
)

# cgroup v1 reports "no limit" as a huge page-aligned number rather than "max".
_UNLIMITED_V1 = 1 << 60


@dataclass(frozen=True)
class HostReport:
    """Everything about the machine that is not a GPU."""

    python: str
    executable: str
    platform: str
    start_method: str
    start_methods: tuple[str, ...]
    cpu_count: int | None
    memory_total: int
    memory_available: int
    cgroup_memory_limit: int | None  # None: no limit, or none readable
    shm_total: int | None
    shm_free: int | None
    env: dict[str, str | None]


def default_start_method() -> tuple[str, tuple[str, ...]]:
    """Return this interpreter's default start method and all it supports.

    ``get_all_start_methods`` lists the default first; unlike ``get_start_method``
    it does not fix the method for this process as a side effect.
    """
    methods = tuple(multiprocessing.get_all_start_methods())
    return methods[0], methods


def _read_int(path: Path) -> int | None:
    """Read a cgroup file holding one integer or "max"; None when absent or unlimited."""
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    if not text.isdigit():
        return None
    value = int(text)
    return None if value >= _UNLIMITED_V1 else value


def cgroup_memory_limit(root: Path = Path("/sys/fs/cgroup")) -> int | None:
    """Return the memory limit of this process's cgroup (v2 or v1), or None."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    candidates: list[Path] = []
    for line in lines:
        _, controllers, path = line.split(":", 2)
        relative = path.lstrip("/")
        if controllers == "":
            candidates += [root / relative / "memory.max", root / "memory.max"]
        elif "memory" in controllers.split(","):
            base = root / "memory"
            candidates += [base / relative / "memory.limit_in_bytes", base / "memory.limit_in_bytes"]
    # Inside a container the cgroup path is often not mounted at its host path,
    # so the first readable candidate wins.
    for candidate in candidates:
        if candidate.exists():
            return _read_int(candidate)
    return None


def _shm() -> tuple[int | None, int | None]:
    """Return the size and free space of /dev/shm (PyTorch and NCCL share memory there)."""
    try:
        usage = shutil.disk_usage("/dev/shm")
    except OSError:
        return None, None
    return usage.total, usage.free


def report() -> HostReport:
    """Collect the host section of the machine report."""
    method, methods = default_start_method()
    memory = psutil.virtual_memory()
    shm_total, shm_free = _shm()
    return HostReport(
        python=platform.python_version(),
        executable=sys.executable,
        platform=sys.platform,
        start_method=method,
        start_methods=methods,
        cpu_count=os.cpu_count(),
        memory_total=int(memory.total),
        memory_available=int(memory.available),
        cgroup_memory_limit=cgroup_memory_limit(),
        shm_total=shm_total,
        shm_free=shm_free,
        env={name: os.environ.get(name) for name in GPU_ENV_VARS},
    )
