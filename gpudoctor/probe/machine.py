"""Assemble the machine report (NVML, frameworks, host) and its JSON form."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from gpudoctor.probe import frameworks, host, nvml


@dataclass(frozen=True)
class MachineReport:
    """Everything ``gpudoctor probe`` says about this machine."""

    nvml: nvml.NvmlReport
    frameworks: dict[str, frameworks.Framework]
    host: host.HostReport


def collect() -> MachineReport:
    """Gather the report; each part degrades to "not available", none raises."""
    return MachineReport(nvml=nvml.report(), frameworks=frameworks.report(), host=host.report())


def _device_json(device: nvml.Device) -> dict[str, Any]:
    listed = device.processes
    return {
        "index": device.index,
        "name": device.name,
        "uuid": device.uuid,
        "memory": {
            "total": device.memory_total,
            "used": device.memory_used,
            "free": device.memory_free,
        },
        "compute_mode": device.compute_mode,
        "mig_mode": device.mig_mode,
        "persistence_mode": device.persistence_mode,
        "processes": None
        if listed.processes is None
        else [asdict(p) for p in listed.processes],
        "processes_reason": listed.reason,
        "pid_namespace_mismatch": bool(listed.foreign_pids),
        "notes": list(device.notes) + ([listed.pid_namespace_note] if listed.foreign_pids else []),
    }


def to_json(report: MachineReport) -> dict[str, Any]:
    """Return the ``{"machine": ...}`` document ``gpudoctor probe --json`` prints."""
    n = report.nvml
    h = report.host
    return {
        "machine": {
            "python": h.python,
            "executable": h.executable,
            "platform": h.platform,
            "start_method": h.start_method,
            "start_methods": list(h.start_methods),
            "nvml": {
                "available": n.available,
                "reason": n.reason,
                "driver_version": n.driver_version,
                "cuda_driver_version": n.cuda_driver_version,
                "devices": [_device_json(d) for d in n.devices],
            },
            "frameworks": {name: asdict(f) for name, f in report.frameworks.items()},
            "host": {
                "cpu_count": h.cpu_count,
                "memory_total": h.memory_total,
                "memory_available": h.memory_available,
                "cgroup_memory_limit": h.cgroup_memory_limit,
                "shm_total": h.shm_total,
                "shm_free": h.shm_free,
                "env": h.env,
            },
        }
    }
