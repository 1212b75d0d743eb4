"""Is there an NVIDIA GPU here, and what is it: read through gpudoctor's own NVML module.

The runner asks this before anything else: without a GPU there is nothing to check.
NVML is read in the runner's own process (it starts no CUDA context); every GPU
framework is left to the children.
"""

from __future__ import annotations

import datetime
import platform
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Gpus:
    """What NVML said: the devices, or why there are none (or why NVML could not be asked)."""

    devices: list[dict[str, Any]] = field(default_factory=list)
    driver_version: str | None = None
    cuda_driver_version: str | None = None
    reason: str | None = None  # why there is no GPU to check
    cannot_tell: bool = False  # NVML could not even be asked (a package missing for this interpreter)


def _library_loads() -> bool:
    """Tell whether the dynamic loader finds libnvidia-ml.so.1 (as nvidia-ml-py would)."""
    import ctypes

    try:
        ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return False
    return True


def look() -> Gpus:
    """Load libnvidia-ml through ``gpudoctor.probe.nvml`` and list the devices.

    When this interpreter lacks what that module needs (psutil, nvidia-ml-py), a machine
    without the library still has no GPU to check; one with it cannot be asked.
    """
    try:
        from gpudoctor.probe import nvml
    except ImportError as error:  # psutil (or gpudoctor's own files) missing for this interpreter
        if not _library_loads():
            return Gpus(reason="no NVIDIA driver: libnvidia-ml.so.1 not found")
        return Gpus(reason=f"cannot import gpudoctor.probe.nvml: {error}", cannot_tell=True)
    report = nvml.report()
    if not report.available:
        reason = report.reason or "NVML unavailable"
        if reason == "nvidia-ml-py is not installed" and not _library_loads():
            return Gpus(reason="no NVIDIA driver: libnvidia-ml.so.1 not found")
        return Gpus(reason=reason, cannot_tell=reason == "nvidia-ml-py is not installed")
    devices = [{
        "index": d.index,
        "name": d.name,
        "uuid": d.uuid,
        "memory_total": d.memory_total,
        "compute_mode": d.compute_mode,
        "mig_mode": d.mig_mode,
    } for d in report.devices]
    return Gpus(devices, report.driver_version, report.cuda_driver_version,
                None if devices else "NVML loads but lists no device")


def facts(gpus: Gpus) -> dict[str, Any]:
    """The machine block of ``gpu-check.json``: when, where, which GPUs and driver."""
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "host": platform.node(),
        "platform": platform.platform(),
        "devices": gpus.devices,
        "driver_version": gpus.driver_version,
        "cuda_driver_version": gpus.cuda_driver_version,
    }
