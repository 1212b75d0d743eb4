"""What the real NVML answered that the tests' fake libnvidia-ml.so.1 does not reproduce.

The fake (tests/probe/fake_nvml/fake_nvml.c) is read as text: the functions it defines,
and the names its ``nvmlErrorString`` knows. Against a report of
gpucheck/truth/nvml_query.py this lists the functions the real library exports and the
fake lacks, and the shapes the fake fixes that the real driver gave otherwise.
"""

from __future__ import annotations

import re
from typing import Any

from gpucheck.truth.nvml_query import NO_INSTANCE

FAKE_SOURCE = "tests/probe/fake_nvml/fake_nvml.c"
_DEFINED = re.compile(r"^(?:nvmlReturn_t|const char \*)\s*(nvml\w+)\s*\(", re.MULTILINE)
_ERROR_TEXT = re.compile(r'case\s+NVML_(?:ERROR_)?(\w+):\s*return\s+"([^"]*)"')


def fake_functions(source: str) -> set[str]:
    """The NVML functions the fake defines."""
    return set(_DEFINED.findall(source))


def fake_error_texts(source: str) -> dict[str, str]:
    """Return-code name -> the text the fake's nvmlErrorString gives (others: "Unknown Error")."""
    return dict(_ERROR_TEXT.findall(source))


def _calls(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every recorded call of the report, by NVML function name."""
    found: dict[str, dict[str, Any]] = {}
    names = {"driver_version": "nvmlSystemGetDriverVersion", "nvml_version": "nvmlSystemGetNVMLVersion",
             "cuda_driver_version": "nvmlSystemGetCudaDriverVersion",
             "cuda_driver_version_v2": "nvmlSystemGetCudaDriverVersion_v2", "device_count": "nvmlDeviceGetCount_v2"}
    for key, name in names.items():
        if key in report:
            found[name] = report[key]
    per_device = {"name": "nvmlDeviceGetName", "uuid": "nvmlDeviceGetUUID", "memory_v1": "nvmlDeviceGetMemoryInfo",
                  "memory_v2": "nvmlDeviceGetMemoryInfo_v2", "compute_mode": "nvmlDeviceGetComputeMode",
                  "mig_mode": "nvmlDeviceGetMigMode", "persistence_mode": "nvmlDeviceGetPersistenceMode",
                  "compute_capability": "nvmlDeviceGetCudaComputeCapability",
                  "process_detail_list": "nvmlDeviceGetRunningProcessDetailList",
                  "process_utilization": "nvmlDeviceGetProcessUtilization"}
    for device in report.get("devices", [])[:1]:
        for key, name in per_device.items():
            if key in device:
                found[name] = device[key]
        found.update(device.get("processes", {}))
        accounting = device.get("accounting", {})
        if "mode" in accounting:
            found["nvmlDeviceGetAccountingMode"] = accounting["mode"]
        if "stats" in accounting:
            found["nvmlDeviceGetAccountingStats"] = accounting["stats"]
    return found


def gaps(report: dict[str, Any], source: str) -> list[str]:
    """One sentence per shape of ``report`` the fake does not reproduce."""
    defined = fake_functions(source)
    calls = _calls(report)
    lines = [f"missing function {name} (real: {call.get('name', 'exists')})"
             for name, call in sorted(calls.items()) if call.get("exists") and name not in defined]
    texts = fake_error_texts(source)
    seen_errors = {(call["name"], call.get("text")) for call in _all_calls(report) if call.get("code")}
    for name, text in sorted(seen_errors, key=str):
        if name in ("INSUFFICIENT_SIZE",) or text is None:
            continue
        if texts.get(name, "Unknown Error") != text:
            lines.append(f"error text of {name}: real {text!r}, fake {texts.get(name, 'Unknown Error')!r}")
    for device in report.get("devices", [])[:1]:
        lines += _device_gaps(device)
    return lines


def _all_calls(value: Any) -> list[dict[str, Any]]:
    if isinstance(value, dict):
        found = [value] if "exists" in value and "code" in value else []
        for item in value.values():
            found += _all_calls(item)
        return found
    if isinstance(value, list):
        return [call for item in value for call in _all_calls(item)]
    return []


def _device_gaps(device: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    mig = device.get("mig_mode", {})
    if mig.get("code") not in (None, 0):
        lines.append(f"nvmlDeviceGetMigMode returns {mig['name']} (the fake always answers)")
    elif "values" in mig and mig["values"][0] != mig["values"][1]:
        lines.append(f"MIG current {mig['values'][0]} != pending {mig['values'][1]} (the fake sets both alike)")
    memory = device.get("memory_v1", {}).get("values")
    if memory and memory["free"] + memory["used"] != memory["total"]:
        lines.append(f"memory v1: free + used = total - {memory['total'] - memory['free'] - memory['used']} bytes "
                     "(the fake makes free = total - used)")
    for name, listing in device.get("processes", {}).items():
        for entry in listing.get("entries", []):
            ids = (entry.get("gpuInstanceId"), entry.get("computeInstanceId"))
            if "gpuInstanceId" in entry and ids != (NO_INSTANCE, NO_INSTANCE):
                lines.append(f"{name}: instance IDs {ids} (the fake always gives 0xFFFFFFFF)")
                break
    return lines
