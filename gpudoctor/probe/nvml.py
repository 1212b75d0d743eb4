"""Read NVIDIA GPUs through NVML: the only module of gpudoctor that imports ``pynvml``.

``pynvml`` here is NVIDIA's own binding from the ``nvidia-ml-py`` distribution, not
the deprecated ``pynvml`` distribution (which warns on import). Everything this
module returns treats "not available" as a value: ``None`` plus a reason, never an
exception, because a machine without a driver is a normal machine to report on.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import psutil

_COMPUTE_MODES = {
    0: "DEFAULT",
    1: "EXCLUSIVE_THREAD",
    2: "PROHIBITED",
    3: "EXCLUSIVE_PROCESS",
}


@dataclass(frozen=True)
class GpuProcess:
    """One process NVML says holds a compute context on a device."""

    pid: int
    used_memory: int | None  # None: the driver does not report it (MIG, WDDM)
    in_namespace: bool  # False: the PID does not exist here (container seeing host PIDs)


@dataclass(frozen=True)
class ProcessList:
    """The compute processes of one device, or why they are unknown."""

    processes: tuple[GpuProcess, ...] | None
    reason: str | None = None
    foreign_pids: tuple[int, ...] = ()  # PIDs NVML reports that do not exist in our namespace

    @property
    def pid_namespace_note(self) -> str | None:
        """Say why per-process memory cannot be attributed, when NVML's PIDs are not ours."""
        if not self.foreign_pids:
            return None
        pids = ", ".join(str(pid) for pid in self.foreign_pids)
        return (
            f"NVML reports PIDs {pids} that do not exist in this PID namespace "
            "(a container sees the host's PIDs): per-process GPU memory cannot be "
            "attributed to processes here"
        )


@dataclass(frozen=True)
class Device:
    """What NVML says about one GPU; each field is None when NVML could not tell."""

    index: int
    name: str | None
    uuid: str | None
    memory_total: int | None
    memory_used: int | None
    memory_free: int | None
    compute_mode: str | None
    mig_mode: bool | None
    persistence_mode: bool | None
    processes: ProcessList
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class NvmlReport:
    """The NVML part of the machine report."""

    available: bool
    reason: str | None
    driver_version: str | None = None
    cuda_driver_version: str | None = None
    devices: tuple[Device, ...] = ()


@dataclass(frozen=True)
class MemoryInfo:
    """Device memory in bytes at one instant."""

    used: int
    total: int


_lock = threading.Lock()
_init_reason: str | None = None
_initialized = False
_handles: dict[int, Any] = {}


def _describe_init_error(error: Exception) -> str:
    """Turn an nvmlInit failure into the one line the report shows."""
    import pynvml

    value = getattr(error, "value", None)
    if value == pynvml.NVML_ERROR_LIBRARY_NOT_FOUND:
        return "no NVIDIA driver: libnvidia-ml.so.1 not found"
    if value == pynvml.NVML_ERROR_DRIVER_NOT_LOADED:
        return "no NVIDIA driver: libnvidia-ml.so.1 is present but the kernel driver is not loaded"
    if value == pynvml.NVML_ERROR_NO_PERMISSION:
        return "NVML refused access: no permission to query the GPUs"
    return f"NVML unavailable: {error}"


def unavailable_reason() -> str | None:
    """Initialize NVML once per process; return why it is unusable, or None when it works."""
    global _initialized, _init_reason
    with _lock:
        if _initialized:
            return _init_reason
        _initialized = True
        try:
            import pynvml

            pynvml.nvmlInit()
        except ImportError:
            _init_reason = "nvidia-ml-py is not installed"
        except Exception as error:  # pynvml.NVMLError and OSError from a broken library
            _init_reason = _describe_init_error(error)
        return _init_reason


def _call(function: Any, *args: Any) -> tuple[Any, str | None]:
    """Call an NVML function; return (value, None) or (None, the error's text)."""
    try:
        value = function(*args)
    except Exception as error:  # every NVMLError subclass; a field may just be unsupported
        return None, str(error) or type(error).__name__
    if isinstance(value, bytes):
        value = value.decode(errors="replace")
    return value, None


def _handle(index: int) -> Any:
    """Return the cached NVML handle of device ``index`` (or None)."""
    import pynvml

    if index not in _handles:
        handle, _ = _call(pynvml.nvmlDeviceGetHandleByIndex, index)
        if handle is None:
            return None
        _handles[index] = handle
    return _handles[index]


def device_count() -> int:
    """Return the number of GPUs NVML sees (0 when NVML is unavailable)."""
    if unavailable_reason() is not None:
        return 0
    import pynvml

    count, _ = _call(pynvml.nvmlDeviceGetCount)
    return int(count or 0)


def memory(index: int) -> MemoryInfo | None:
    """Return device ``index``'s memory use: the cheap query (~12 µs) sampled at high rate."""
    if unavailable_reason() is not None:
        return None
    import pynvml

    handle = _handle(index)
    info, _ = _call(pynvml.nvmlDeviceGetMemoryInfo, handle) if handle is not None else (None, "")
    if info is None:
        return None
    return MemoryInfo(used=int(info.used), total=int(info.total))


def _raw_processes(handle: Any) -> tuple[list[Any] | None, str | None]:
    """Ask for compute processes with the v3 call, falling back to v2 on older drivers."""
    import pynvml

    for function in (
        pynvml.nvmlDeviceGetComputeRunningProcesses_v3,
        pynvml.nvmlDeviceGetComputeRunningProcesses_v2,
    ):
        try:
            return list(function(handle)), None
        except pynvml.NVMLError_FunctionNotFound:
            continue
        except pynvml.NVMLError as error:
            return None, f"process list unavailable: {error}"
    return None, "process list unavailable: the driver has neither the v3 nor the v2 call"


def processes(index: int) -> ProcessList:
    """Return device ``index``'s compute processes (~4.5 ms under a driver-global lock)."""
    reason = unavailable_reason()
    if reason is not None:
        return ProcessList(None, reason)
    handle = _handle(index)
    if handle is None:
        return ProcessList(None, f"no NVML handle for device {index}")
    raw, why = _raw_processes(handle)
    if raw is None:
        return ProcessList(None, why)
    found = tuple(
        GpuProcess(
            pid=int(item.pid),
            used_memory=None if item.usedGpuMemory is None else int(item.usedGpuMemory),
            in_namespace=psutil.pid_exists(int(item.pid)),
        )
        for item in raw
    )
    # Only a PID that holds memory (or whose memory is hidden) says anything about the
    # namespace: NVML can briefly list a process that has just exited with 0 bytes.
    foreign = tuple(
        p.pid for p in found if not p.in_namespace and (p.used_memory is None or p.used_memory > 0)
    )
    return ProcessList(found, None, foreign)


def _cuda_version(raw: int | None) -> str | None:
    """Format NVML's CUDA driver version integer (12040) as "12.4"."""
    if raw is None:
        return None
    return f"{raw // 1000}.{(raw % 1000) // 10}"


def _device(index: int) -> Device:
    """Collect everything the machine report shows about one device."""
    import pynvml

    handle = _handle(index)
    if handle is None:
        return Device(index, None, None, None, None, None, None, None, None,
                      ProcessList(None, "no NVML handle"), ("no NVML handle",))
    notes: list[str] = []

    def field(label: str, function: Any, *args: Any) -> Any:
        value, error = _call(function, handle, *args)
        if error is not None:
            notes.append(f"{label}: {error}")
        return value

    name = field("name", pynvml.nvmlDeviceGetName)
    uuid = field("uuid", pynvml.nvmlDeviceGetUUID)
    info = field("memory", pynvml.nvmlDeviceGetMemoryInfo)
    mode = field("compute mode", pynvml.nvmlDeviceGetComputeMode)
    mig = field("MIG mode", pynvml.nvmlDeviceGetMigMode)
    persistence = field("persistence mode", pynvml.nvmlDeviceGetPersistenceMode)
    return Device(
        index=index,
        name=name,
        uuid=uuid,
        memory_total=None if info is None else int(info.total),
        memory_used=None if info is None else int(info.used),
        memory_free=None if info is None else int(info.free),
        compute_mode=None if mode is None else _COMPUTE_MODES.get(int(mode), f"MODE_{mode}"),
        mig_mode=None if mig is None else bool(mig[0]),
        persistence_mode=None if persistence is None else bool(persistence),
        processes=processes(index),
        notes=tuple(notes),
    )


def report() -> NvmlReport:
    """Return the NVML section of the machine report."""
    reason = unavailable_reason()
    if reason is not None:
        return NvmlReport(available=False, reason=reason)
    import pynvml

    driver, _ = _call(pynvml.nvmlSystemGetDriverVersion)
    cuda, _ = _call(pynvml.nvmlSystemGetCudaDriverVersion_v2)
    if cuda is None:
        cuda, _ = _call(pynvml.nvmlSystemGetCudaDriverVersion)
    devices = tuple(_device(index) for index in range(device_count()))
    return NvmlReport(
        available=True,
        reason=None,
        driver_version=driver,
        cuda_driver_version=_cuda_version(cuda),
        devices=devices,
    )
