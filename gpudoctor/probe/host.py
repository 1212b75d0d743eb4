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

from gpudoctor.knowledge.registry import READERS

# Read by the frameworks (at import, at driver init or when they build their runtime);
# each changes which devices a process sees, which framework it uses or how much GPU
# memory it takes, so the report shows them all, set or not. From the knowledge records.
GPU_ENV_VARS = tuple(READERS)

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


def _cgroup_text(text: str | None) -> str | None:
    if text is not None:
        return text
    try:
        return Path("/proc/self/cgroup").read_text()
    except OSError:
        return None


def cgroup_memory_dirs(root: Path = Path("/sys/fs/cgroup"),
                       cgroup_text: str | None = None) -> list[tuple[int, Path]]:
    """Return (cgroup version, directory) of this process's memory cgroup, best first.

    ``cgroup_text`` is the content of /proc/self/cgroup (read when None): a v2
    line is ``0::/path``, a v1 line ``N:memory[,...]:/path``. Inside a container the
    cgroup path is often not mounted at its host path, so the controller's root
    directory comes after each path.
    """
    text = _cgroup_text(cgroup_text)
    found: list[tuple[int, Path]] = []
    for line in (text or "").splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        relative = path.strip().lstrip("/")
        if controllers == "":
            found += [(2, root / relative), (2, root)]
        elif "memory" in controllers.split(","):
            found += [(1, root / "memory" / relative), (1, root / "memory")]
    return found


def cgroup_memory_limit(root: Path = Path("/sys/fs/cgroup"), cgroup_text: str | None = None) -> int | None:
    """Return the memory limit of this process's cgroup (v2 or v1), or None."""
    for version, directory in cgroup_memory_dirs(root, cgroup_text):
        candidate = directory / ("memory.max" if version == 2 else "memory.limit_in_bytes")
        if candidate.exists():  # the first readable candidate wins
            return _read_int(candidate)
    return None


def cgroup_oom_kills(root: Path = Path("/sys/fs/cgroup"), cgroup_text: str | None = None) -> int | None:
    """Return how many processes the OOM killer has killed in this process's cgroup, or None.

    cgroup v2 counts them in ``memory.events``, v1 (kernel 4.13+) in ``memory.oom_control``,
    both on an ``oom_kill N`` line.
    """
    for version, directory in cgroup_memory_dirs(root, cgroup_text):
        candidate = directory / ("memory.events" if version == 2 else "memory.oom_control")
        try:
            lines = candidate.read_text().splitlines()
        except OSError:
            continue
        for line in lines:
            key, _, value = line.partition(" ")
            if key == "oom_kill" and value.strip().isdigit():
                return int(value)
        return None  # the file is there but has no counter: an older kernel
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
