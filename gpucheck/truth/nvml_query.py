"""The child of ``nvml_shapes``: ask the real NVML everything gpudoctor reads, raw.

Run as ``python -m gpucheck.truth.nvml_query [--pid PID]``; prints one JSON line. It
calls libnvidia-ml.so.1 through ctypes with its own copies of the C structs (nvml.h
of the NVML 12 API), not through nvidia-ml-py, so that the values are what the driver
wrote: ``usedGpuMemory`` as the raw 64-bit value (NVML_VALUE_NOT_AVAILABLE is all ones),
the instance IDs as given, each failure as its return code and name. Every call is
recorded as ``{"exists", "code", "name", "text", ...values}``; a function the library
does not export is ``{"exists": false}``.
"""

from __future__ import annotations

import ctypes
import json
import os
import sys
from typing import Any

NOT_AVAILABLE_64 = (1 << 64) - 1  # NVML_VALUE_NOT_AVAILABLE in an unsigned long long
NO_INSTANCE = 0xFFFFFFFF  # gpuInstanceId / computeInstanceId without MIG

RETURN_NAMES = {
    0: "SUCCESS", 1: "UNINITIALIZED", 2: "INVALID_ARGUMENT", 3: "NOT_SUPPORTED", 4: "NO_PERMISSION",
    5: "ALREADY_INITIALIZED", 6: "NOT_FOUND", 7: "INSUFFICIENT_SIZE", 8: "INSUFFICIENT_POWER",
    9: "DRIVER_NOT_LOADED", 10: "TIMEOUT", 11: "IRQ_ISSUE", 12: "LIBRARY_NOT_FOUND", 13: "FUNCTION_NOT_FOUND",
    14: "CORRUPTED_INFOROM", 15: "GPU_IS_LOST", 16: "RESET_REQUIRED", 17: "OPERATING_SYSTEM",
    18: "LIB_RM_VERSION_MISMATCH", 19: "IN_USE", 20: "MEMORY", 21: "NO_DATA", 22: "VGPU_ECC_NOT_SUPPORTED",
    23: "INSUFFICIENT_RESOURCES", 24: "FREQ_NOT_SUPPORTED", 25: "ARGUMENT_VERSION_MISMATCH", 26: "DEPRECATED",
    27: "NOT_READY", 28: "GPU_NOT_FOUND", 29: "INVALID_STATE", 999: "UNKNOWN",
}
INSUFFICIENT_SIZE = 7


class ProcessInfoV1(ctypes.Structure):
    _fields_ = [("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong)]


class ProcessInfo(ctypes.Structure):  # nvmlProcessInfo_v2_t, also what the _v3 calls fill
    _fields_ = [("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong),
                ("gpuInstanceId", ctypes.c_uint), ("computeInstanceId", ctypes.c_uint)]


class ProcessDetail(ctypes.Structure):  # nvmlProcessDetail_v1_t
    _fields_ = [("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong),
                ("gpuInstanceId", ctypes.c_uint), ("computeInstanceId", ctypes.c_uint),
                ("usedGpuCcProtectedMemory", ctypes.c_ulonglong)]


class ProcessDetailList(ctypes.Structure):  # nvmlProcessDetailList_v1_t
    _fields_ = [("version", ctypes.c_uint), ("mode", ctypes.c_uint), ("numProcArrayEntries", ctypes.c_uint),
                ("procArray", ctypes.POINTER(ProcessDetail))]


class Memory(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]


class MemoryV2(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint), ("total", ctypes.c_ulonglong), ("reserved", ctypes.c_ulonglong),
                ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]


class UtilizationSample(ctypes.Structure):  # nvmlProcessUtilizationSample_t
    _fields_ = [("pid", ctypes.c_uint), ("timeStamp", ctypes.c_ulonglong), ("smUtil", ctypes.c_uint),
                ("memUtil", ctypes.c_uint), ("encUtil", ctypes.c_uint), ("decUtil", ctypes.c_uint)]


class AccountingStats(ctypes.Structure):
    _fields_ = [("gpuUtilization", ctypes.c_uint), ("memoryUtilization", ctypes.c_uint),
                ("maxMemoryUsage", ctypes.c_ulonglong), ("time", ctypes.c_ulonglong),
                ("startTime", ctypes.c_ulonglong), ("isRunning", ctypes.c_uint), ("reserved", ctypes.c_uint * 5)]


def struct_version(struct: type[ctypes.Structure], version: int) -> int:
    """NVML_STRUCT_VERSION: the struct's size with the version in the top byte."""
    return ctypes.sizeof(struct) | (version << 24)


def fields(value: ctypes.Structure) -> dict[str, Any]:
    """A struct's fields as plain values (arrays as lists; the pointer of a list left out)."""
    found: dict[str, Any] = {}
    for field in value._fields_:
        name = field[0]
        item = getattr(value, name)
        if name != "procArray":
            found[name] = list(item) if isinstance(item, ctypes.Array) else item
    return found


class Nvml:
    """libnvidia-ml.so.1, each call recorded with its return code."""

    def __init__(self, library: ctypes.CDLL) -> None:
        self.library = library
        self._error_string = getattr(library, "nvmlErrorString", None)
        if self._error_string is not None:
            self._error_string.restype = ctypes.c_char_p
            self._error_string.argtypes = [ctypes.c_int]

    def exists(self, name: str) -> bool:
        return hasattr(self.library, name)

    def call(self, name: str, *args: Any) -> dict[str, Any]:
        """Call ``name``; return its code, the code's name and NVML's text for it."""
        if not self.exists(name):
            return {"exists": False}
        function = getattr(self.library, name)
        function.restype = ctypes.c_int
        code = int(function(*args))
        found: dict[str, Any] = {"exists": True, "code": code, "name": RETURN_NAMES.get(code, f"CODE_{code}")}
        if code and self._error_string is not None:
            found["text"] = (self._error_string(code) or b"").decode(errors="replace")
        return found


def _string(nvml: Nvml, name: str, *args: Any) -> dict[str, Any]:
    buffer = ctypes.create_string_buffer(256)
    found = nvml.call(name, *args, buffer, ctypes.c_uint(len(buffer)))
    if found.get("code") == 0:
        found["value"] = buffer.value.decode(errors="replace")
    return found


def _ints(nvml: Nvml, name: str, handle: Any, *kinds: Any) -> dict[str, Any]:
    values = [kind() for kind in kinds]
    found = nvml.call(name, *(a for a in (handle,) if a is not None), *(ctypes.byref(v) for v in values))
    if found.get("code") == 0:
        found["values"] = [v.value for v in values]
    return found


def _entry(item: ctypes.Structure) -> dict[str, Any]:
    entry = fields(item)
    used = entry.get("usedGpuMemory")
    entry["used_not_available"] = used == NOT_AVAILABLE_64
    return entry


def processes(nvml: Nvml, handle: Any, name: str, struct: type[ctypes.Structure]) -> dict[str, Any]:
    """A process list by the driver's two-call protocol (ask the count, then fill)."""
    count = ctypes.c_uint(0)
    first = nvml.call(name, handle, ctypes.byref(count), None)
    if not first.get("exists"):
        return first
    found = {"exists": True, "probe": {"code": first["code"], "name": first["name"], "count": count.value}}
    size = count.value + 8
    infos = (struct * size)()
    count = ctypes.c_uint(size)
    second = nvml.call(name, handle, ctypes.byref(count), infos)
    found.update({k: second[k] for k in ("code", "name", "text") if k in second})
    if second["code"] == 0:
        found["entries"] = [_entry(infos[i]) for i in range(count.value)]
    return found


def detail_list(nvml: Nvml, handle: Any) -> dict[str, Any]:
    """nvmlDeviceGetRunningProcessDetailList for compute processes (mode 0)."""
    if not nvml.exists("nvmlDeviceGetRunningProcessDetailList"):
        return {"exists": False}
    listing = ProcessDetailList(version=struct_version(ProcessDetailList, 1), mode=0, numProcArrayEntries=0)
    first = nvml.call("nvmlDeviceGetRunningProcessDetailList", handle, ctypes.byref(listing))
    size = listing.numProcArrayEntries + 8
    array = (ProcessDetail * size)()
    listing = ProcessDetailList(version=struct_version(ProcessDetailList, 1), mode=0, numProcArrayEntries=size,
                                procArray=ctypes.cast(array, ctypes.POINTER(ProcessDetail)))
    found = nvml.call("nvmlDeviceGetRunningProcessDetailList", handle, ctypes.byref(listing))
    found["probe"] = {"code": first["code"], "name": first["name"]}
    if found["code"] == 0:
        found["entries"] = [_entry(array[i]) for i in range(listing.numProcArrayEntries)]
    return found


def utilization(nvml: Nvml, handle: Any) -> dict[str, Any]:
    count = ctypes.c_uint(0)
    first = nvml.call("nvmlDeviceGetProcessUtilization", handle, None, ctypes.byref(count), ctypes.c_ulonglong(0))
    if not first.get("exists") or first["code"] not in (0, INSUFFICIENT_SIZE) or count.value == 0:
        return {**first, "count": count.value}
    samples = (UtilizationSample * count.value)()
    found = nvml.call("nvmlDeviceGetProcessUtilization", handle, samples, ctypes.byref(count),
                      ctypes.c_ulonglong(0))
    found["probe"] = {"code": first["code"], "name": first["name"]}
    if found["code"] == 0:
        found["samples"] = [fields(samples[i]) for i in range(count.value)]
    return found


def accounting(nvml: Nvml, handle: Any, pid: int | None) -> dict[str, Any]:
    found: dict[str, Any] = {"mode": _ints(nvml, "nvmlDeviceGetAccountingMode", handle, ctypes.c_int)}
    if pid is not None:
        stats = AccountingStats()
        found["stats"] = nvml.call("nvmlDeviceGetAccountingStats", handle, ctypes.c_uint(pid), ctypes.byref(stats))
        if found["stats"].get("code") == 0:
            found["stats"]["values"] = fields(stats)
    return found


PROCESS_CALLS = (
    ("nvmlDeviceGetComputeRunningProcesses_v3", ProcessInfo),
    ("nvmlDeviceGetComputeRunningProcesses_v2", ProcessInfo),
    ("nvmlDeviceGetComputeRunningProcesses", ProcessInfoV1),
    ("nvmlDeviceGetGraphicsRunningProcesses_v3", ProcessInfo),
    ("nvmlDeviceGetGraphicsRunningProcesses_v2", ProcessInfo),
    ("nvmlDeviceGetGraphicsRunningProcesses", ProcessInfoV1),
    ("nvmlDeviceGetMPSComputeRunningProcesses_v3", ProcessInfo),
)


def device(nvml: Nvml, index: int, pid: int | None) -> dict[str, Any]:
    """Everything about device ``index``."""
    handle = ctypes.c_void_p()
    got = nvml.call("nvmlDeviceGetHandleByIndex_v2", ctypes.c_uint(index), ctypes.byref(handle))
    if got.get("code") != 0:
        return {"handle": got}
    memory = Memory()
    memory_v1 = nvml.call("nvmlDeviceGetMemoryInfo", handle, ctypes.byref(memory))
    if memory_v1.get("code") == 0:
        memory_v1["values"] = fields(memory)
    memory2 = MemoryV2(version=struct_version(MemoryV2, 2))
    memory_v2 = nvml.call("nvmlDeviceGetMemoryInfo_v2", handle, ctypes.byref(memory2))
    if memory_v2.get("code") == 0:
        memory_v2["values"] = fields(memory2)
    found: dict[str, Any] = {
        "name": _string(nvml, "nvmlDeviceGetName", handle),
        "uuid": _string(nvml, "nvmlDeviceGetUUID", handle),
        "memory_v1": memory_v1,
        "memory_v2": memory_v2,
        "compute_mode": _ints(nvml, "nvmlDeviceGetComputeMode", handle, ctypes.c_int),
        "mig_mode": _ints(nvml, "nvmlDeviceGetMigMode", handle, ctypes.c_uint, ctypes.c_uint),
        "persistence_mode": _ints(nvml, "nvmlDeviceGetPersistenceMode", handle, ctypes.c_int),
        "compute_capability": _ints(nvml, "nvmlDeviceGetCudaComputeCapability", handle, ctypes.c_int, ctypes.c_int),
        "processes": {name: processes(nvml, handle, name, struct) for name, struct in PROCESS_CALLS},
        "process_detail_list": detail_list(nvml, handle),
        "process_utilization": utilization(nvml, handle),
        "accounting": accounting(nvml, handle, pid),
    }
    if pid is not None:
        listed = found["processes"]["nvmlDeviceGetComputeRunningProcesses_v3"].get("entries")
        found["pid_listed"] = None if listed is None else any(entry["pid"] == pid for entry in listed)
    return found


def query(pid: int | None) -> dict[str, Any]:
    try:
        library = ctypes.CDLL("libnvidia-ml.so.1")
    except OSError as error:
        return {"library": None, "reason": f"libnvidia-ml.so.1 cannot be loaded: {error}"}
    nvml = Nvml(library)
    init = nvml.call("nvmlInit_v2")
    report: dict[str, Any] = {"library": True, "init": init, "query_pid": os.getpid(), "child_pid": pid}
    if init.get("code") != 0:
        return report
    report["driver_version"] = _string(nvml, "nvmlSystemGetDriverVersion")
    report["nvml_version"] = _string(nvml, "nvmlSystemGetNVMLVersion")
    report["cuda_driver_version"] = _ints(nvml, "nvmlSystemGetCudaDriverVersion", None, ctypes.c_int)
    report["cuda_driver_version_v2"] = _ints(nvml, "nvmlSystemGetCudaDriverVersion_v2", None, ctypes.c_int)
    count = _ints(nvml, "nvmlDeviceGetCount_v2", None, ctypes.c_uint)
    report["device_count"] = count
    devices = count.get("values", [0])[0]
    report["devices"] = [device(nvml, index, pid) for index in range(devices)]
    # A call that must fail, to record how (the device calls above record their own).
    report["errors"] = {
        "handle_past_the_end": nvml.call("nvmlDeviceGetHandleByIndex_v2", ctypes.c_uint(devices + 7),
                                         ctypes.byref(ctypes.c_void_p())),
    }
    nvml.call("nvmlShutdown")
    return report


def main(argv: list[str]) -> int:
    pid = int(argv[argv.index("--pid") + 1]) if "--pid" in argv else None
    print(json.dumps(query(pid)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
