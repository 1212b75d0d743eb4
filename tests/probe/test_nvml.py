"""gpudoctor.probe.nvml against real nvidia-ml-py and the fake libnvidia-ml.so.1.

Each case runs in a fresh interpreter: the library is loaded (via LD_LIBRARY_PATH)
and nvmlInit'd once per process.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from tests.probe.helpers import FakeNvml, unused_pid

NOT_FOUND = 13  # NVML_ERROR_FUNCTION_NOT_FOUND: what an older driver answers
NOT_SUPPORTED = 3
NO_PERMISSION = 4


def _ask(fake: FakeNvml, expression: str) -> Any:
    """Evaluate ``expression`` with gpudoctor.probe.nvml imported as ``nvml``; return it as JSON."""
    code = (
        "import dataclasses, json; from gpudoctor.probe import nvml;"
        f"value = {expression};"
        "print(json.dumps(dataclasses.asdict(value) if dataclasses.is_dataclass(value) else value))"
    )
    done = subprocess.run([sys.executable, "-c", code], env=fake.env(), capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_process_list_falls_back_from_v3_to_v2(fake_nvml: FakeNvml) -> None:
    fake_nvml.add_device()
    fake_nvml.processes = [(0, 1, 123 << 20)]
    fake_nvml.failures = {"nvmlDeviceGetComputeRunningProcesses_v3": NOT_FOUND}
    listed = _ask(fake_nvml, "nvml.processes(0)")
    assert listed["processes"] == [{"pid": 1, "used_memory": 123 << 20, "in_namespace": True}]
    assert listed["reason"] is None


def test_no_process_call_at_all_is_a_reason_not_an_error(fake_nvml: FakeNvml) -> None:
    fake_nvml.add_device()
    fake_nvml.failures = {
        "nvmlDeviceGetComputeRunningProcesses_v3": NOT_FOUND,
        "nvmlDeviceGetComputeRunningProcesses_v2": NOT_FOUND,
    }
    listed = _ask(fake_nvml, "nvml.processes(0)")
    assert listed["processes"] is None
    assert "neither the v3 nor the v2" in listed["reason"]


def test_permission_error_on_process_list(fake_nvml: FakeNvml) -> None:
    fake_nvml.add_device()
    fake_nvml.failures = {"nvmlDeviceGetComputeRunningProcesses_v3": NO_PERMISSION}
    listed = _ask(fake_nvml, "nvml.processes(0)")
    assert listed["processes"] is None
    assert "Insufficient Permissions" in listed["reason"]


def test_unreported_process_memory_is_none(fake_nvml: FakeNvml) -> None:
    fake_nvml.add_device()
    fake_nvml.processes = [(0, 1, None)]
    listed = _ask(fake_nvml, "nvml.processes(0)")
    assert listed["processes"] == [{"pid": 1, "used_memory": None, "in_namespace": True}]


def test_host_pids_in_a_container_are_detected_not_guessed(fake_nvml: FakeNvml) -> None:
    foreign = unused_pid()
    fake_nvml.add_device()
    fake_nvml.processes = [(0, foreign, 5 << 30), (0, 1, 1 << 20)]
    listed = _ask(fake_nvml, "nvml.processes(0)")
    assert listed["foreign_pids"] == [foreign]
    assert {"pid": foreign, "used_memory": 5 << 30, "in_namespace": False} in listed["processes"]
    note = _ask(fake_nvml, "nvml.processes(0).pid_namespace_note")
    assert str(foreign) in note and "PID namespace" in note


def test_unsupported_field_is_none_with_a_note(fake_nvml: FakeNvml) -> None:
    fake_nvml.add_device(compute_mode=3)
    fake_nvml.failures = {"nvmlDeviceGetComputeMode": NOT_SUPPORTED}
    report = _ask(fake_nvml, "nvml.report()")
    device = report["devices"][0]
    assert device["compute_mode"] is None
    assert device["notes"] == ["compute mode: Not Supported"]
    assert device["memory_total"] == 16 << 30


def test_memory_follows_the_device(fake_nvml: FakeNvml) -> None:
    fake_nvml.add_device(total=8 << 30, used=7 << 30)
    assert _ask(fake_nvml, "nvml.memory(0)") == {"used": 7 << 30, "total": 8 << 30}
    assert _ask(fake_nvml, "nvml.memory(5)") is None  # no such device: a value, not an error


def test_init_failure_makes_every_query_unavailable(fake_nvml: FakeNvml) -> None:
    fake_nvml.failures = {"nvmlInit": NO_PERMISSION}
    assert _ask(fake_nvml, "nvml.unavailable_reason()") == (
        "NVML refused access: no permission to query the GPUs")
    assert _ask(fake_nvml, "nvml.device_count()") == 0
    assert _ask(fake_nvml, "nvml.processes(0)")["processes"] is None
