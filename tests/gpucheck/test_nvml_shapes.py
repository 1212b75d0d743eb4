"""``nvml_shapes``: the raw NVML query run against the fake library, the list of shapes the
fake does not reproduce, and the holder-then-query sequence of the part."""

from __future__ import annotations

import ctypes.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gpucheck.parts import nvml_shapes
from gpucheck.truth import fake_gaps
from gpucheck.truth.accuracy import GIB, MIB
from gpucheck.truth.nvml_query import NO_INSTANCE, NOT_AVAILABLE_64
from tests.gpucheck.truth_helpers import FAKE_ALLOCATOR, REPO, context
from tests.probe.conftest import fake_nvml, fake_nvml_dir
from tests.probe.helpers import FakeNvml

__all__ = ["fake_nvml", "fake_nvml_dir"]

FAKE_C = (REPO / fake_gaps.FAKE_SOURCE).read_text()


def query(env: dict[str, str], pid: int) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-m", "gpucheck.truth.nvml_query", "--pid", str(pid)], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_query_reads_raw_values_from_the_fake(fake_nvml: FakeNvml) -> None:
    fake_nvml.add_device(total=80 * GIB, used=GIB)
    fake_nvml.processes += [(0, 4242, GIB), (0, 4243, None)]
    found = query(fake_nvml.env(), 4242)
    assert found["driver_version"]["value"] == "550.54.15" and found["cuda_driver_version_v2"]["values"] == [12040]
    [device] = found["devices"]
    v3 = device["processes"]["nvmlDeviceGetComputeRunningProcesses_v3"]
    assert v3["probe"] == {"code": 7, "name": "INSUFFICIENT_SIZE", "count": 2}
    assert [(e["pid"], e["usedGpuMemory"], e["used_not_available"]) for e in v3["entries"]] == [
        (4242, GIB, False), (4243, NOT_AVAILABLE_64, True)]
    assert v3["entries"][0]["gpuInstanceId"] == NO_INSTANCE and device["pid_listed"] is True
    assert device["processes"]["nvmlDeviceGetComputeRunningProcesses"] == {"exists": False}
    assert device["mig_mode"]["values"] == [0, 0] and device["memory_v1"]["values"]["used"] == GIB
    assert found["errors"]["handle_past_the_end"]["name"] == "INVALID_ARGUMENT"


def test_a_failing_call_is_recorded_with_its_code_name_and_text(fake_nvml: FakeNvml) -> None:
    fake_nvml.add_device()
    fake_nvml.failures["nvmlDeviceGetMigMode"] = 3
    [device] = query(fake_nvml.env(), 1)["devices"]
    assert device["mig_mode"] == {"exists": True, "code": 3, "name": "NOT_SUPPORTED", "text": "Not Supported"}


def test_without_the_library_the_query_says_so() -> None:
    if ctypes.util.find_library("nvidia-ml") is not None:
        pytest.skip("this machine has NVML")
    found = query(dict(os.environ), 1)
    assert found["library"] is None and "libnvidia-ml.so.1" in found["reason"]


def test_the_fake_reproduces_its_own_shapes(fake_nvml: FakeNvml) -> None:
    fake_nvml.add_device()
    fake_nvml.processes.append((0, 77, MIB))
    assert fake_gaps.gaps(query(fake_nvml.env(), 77), FAKE_C) == []


def test_real_shapes_the_fake_lacks_are_listed() -> None:
    def ok(**values: Any) -> dict[str, Any]:
        return {"exists": True, "code": 0, "name": "SUCCESS", **values}

    real = {"driver_version": ok(value="580.159.01"), "devices": [{
        "memory_v1": ok(values={"total": 80 * GIB, "free": 70 * GIB, "used": 9 * GIB}),
        "memory_v2": ok(values={"version": 1, "total": 80 * GIB, "reserved": GIB, "free": 70 * GIB, "used": 9 * GIB}),
        "mig_mode": {"exists": True, "code": 3, "name": "NOT_SUPPORTED", "text": "Not Supported"},
        "processes": {"nvmlDeviceGetComputeRunningProcesses_v3": ok(entries=[
            {"pid": 1, "usedGpuMemory": GIB, "gpuInstanceId": 0, "computeInstanceId": 0}]),
            "nvmlDeviceGetGraphicsRunningProcesses_v3": ok(entries=[])},
        "process_utilization": {"exists": True, "code": 21, "name": "NO_DATA", "text": "No data", "count": 0},
    }], "errors": {"bad": {"exists": True, "code": 2, "name": "INVALID_ARGUMENT", "text": "Invalid Argument"}}}
    found = fake_gaps.gaps(real, FAKE_C)
    assert "missing function nvmlDeviceGetMemoryInfo_v2 (real: SUCCESS)" in found
    assert "missing function nvmlDeviceGetGraphicsRunningProcesses_v3 (real: SUCCESS)" in found
    assert "missing function nvmlDeviceGetProcessUtilization (real: NO_DATA)" in found
    assert "error text of INVALID_ARGUMENT: real 'Invalid Argument', fake 'Unknown Error'" in found
    assert "error text of NO_DATA: real 'No data', fake 'Unknown Error'" in found
    assert "nvmlDeviceGetMigMode returns NOT_SUPPORTED (the fake always answers)" in found
    assert any(line.startswith("memory v1: free + used = total - 1073741824") for line in found)
    assert any("instance IDs (0, 0)" in line for line in found)
    assert not any("NOT_SUPPORTED', fake" in line for line in found)  # the fake knows that text


@pytest.mark.slow
def test_the_part_queries_nvml_while_the_child_holds_its_memory(
        fake_nvml: FakeNvml, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_nvml.add_device(total=80 * GIB)
    for key, value in fake_nvml.env().items():
        monkeypatch.setenv(key, value)
    script = tmp_path / "holder.py"
    script.write_text(FAKE_ALLOCATOR)
    shapes = nvml_shapes.hold_and_query(context(tmp_path), [sys.executable, str(script), str(GIB)])
    assert shapes["holder"]["framework_bytes"] == 2 * MIB + GIB
    pid = shapes["holder"]["pid"]
    [device] = shapes["nvml"]["devices"]
    assert device["pid_listed"] is True
    [entry] = device["processes"]["nvmlDeviceGetComputeRunningProcesses_v3"]["entries"]
    assert (entry["pid"], entry["usedGpuMemory"]) == (pid, 300 * MIB + 2 * MIB + GIB)
    lines = nvml_shapes.summary(shapes)
    assert lines[0] == "driver 550.54.15, CUDA driver 12.4, NVML 12.fake"
    assert lines[2].startswith(f"the child (pid {pid}, {2 * MIB + GIB} bytes held) is listed: usedGpuMemory")


def test_a_holder_that_never_starts_is_a_failure_sentence(tmp_path: Path) -> None:
    shapes = nvml_shapes.hold_and_query(context(tmp_path), [sys.executable, "-c", "print('{\"step\": \"error\"}')"])
    assert shapes == {"error": "the holding child did not start: no report"}


def test_the_part_is_skipped_without_a_framework_to_hold_memory(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nvml_shapes, "HOLDERS", ("no_such_framework_a", "no_such_framework_b"))
    result = nvml_shapes.run(context(tmp_path))
    assert result.status == "skipped" and "nor no_such_framework_b is importable" in result.summary[0]
