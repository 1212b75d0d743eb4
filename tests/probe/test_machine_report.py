"""``gpudoctor probe`` without a command: the machine report, with and without a driver."""

from __future__ import annotations

import importlib.metadata
import json
import multiprocessing
import os
import platform
import subprocess
import sys

import pytest

from tests.probe.helpers import FakeNvml, gpudoctor, gpudoctor_json, real_driver_present

no_real_driver = pytest.mark.skipif(real_driver_present(), reason="this machine has a real NVIDIA driver")


def _env_without_nvml() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("LD_LIBRARY_PATH", None)
    env["CUDA_VISIBLE_DEVICES"] = "1,0"
    env.pop("JAX_PLATFORMS", None)
    return env


@no_real_driver
def test_no_driver_is_one_clear_line_and_the_rest_is_still_reported() -> None:
    done = gpudoctor(["probe", "--no-scenarios"], env=_env_without_nvml())
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    gpu_section = lines[1 : lines.index(next(line for line in lines if line.startswith("Frameworks")))]
    assert [line.strip() for line in gpu_section] == ["no NVIDIA driver: libnvidia-ml.so.1 not found"]
    assert f"default start method {multiprocessing.get_all_start_methods()[0]}" in done.stdout
    assert "CUDA_VISIBLE_DEVICES='1,0'" in done.stdout
    unset_line = next(line for line in lines if "not set:" in line)
    unset = unset_line.split("not set:", 1)[1].replace(",", " ").split()
    assert "XLA_PYTHON_CLIENT_PREALLOCATE" in unset and "CUDA_VISIBLE_DEVICES" not in unset
    assert "/dev/shm" in done.stdout
    assert "Traceback" not in done.stderr


@no_real_driver
def test_no_driver_json() -> None:
    code, document, _ = gpudoctor_json(["--no-scenarios"], env=_env_without_nvml())
    assert code == 0
    machine = document["machine"]
    assert machine["nvml"] == {
        "available": False,
        "reason": "no NVIDIA driver: libnvidia-ml.so.1 not found",
        "driver_version": None,
        "cuda_driver_version": None,
        "devices": [],
    }
    assert machine["python"] == platform.python_version()
    assert machine["start_method"] == multiprocessing.get_all_start_methods()[0]
    assert machine["host"]["env"]["CUDA_VISIBLE_DEVICES"] == "1,0"
    assert machine["host"]["env"]["JAX_PLATFORMS"] is None
    assert machine["host"]["memory_total"] > 0
    assert set(machine["frameworks"]) == {"tensorflow", "cupy", "torch", "jax", "numba", "pycuda", "cuda-python",
                                          "triton"}


@pytest.mark.tensorflow
def test_frameworks_are_found_without_being_imported() -> None:
    try:
        version = importlib.metadata.version("tensorflow-cpu")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("tensorflow-cpu is not installed")
    code = (
        "import json, sys; from gpudoctor.probe import machine;"
        "doc = machine.to_json(machine.collect());"
        "print(json.dumps([doc['machine']['frameworks']['tensorflow'],"
        " [m for m in ('tensorflow', 'torch', 'cupy', 'jax') if m in sys.modules]]))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    tensorflow, imported = json.loads(done.stdout)
    assert imported == []
    assert tensorflow["installed"] is True
    assert tensorflow["version"] == version
    assert tensorflow["cuda_build"] is False  # tensorflow-cpu


def test_report_against_fake_nvml(fake_nvml: FakeNvml) -> None:
    fake_nvml.add_device(name="NVIDIA Fake A100", total=16 << 30, used=3 << 30, compute_mode=3,
                         mig=1, persistence=0, uuid="GPU-0000-aaaa")
    fake_nvml.add_device(name="NVIDIA Fake T4", total=8 << 30, used=0)
    me = os.getpid()  # a PID that exists in this namespace
    fake_nvml.processes = [(0, me, 2 << 30), (0, 1, None)]
    code, document, stderr = gpudoctor_json(["--no-scenarios"], env=fake_nvml.env())
    assert code == 0, stderr
    nvml = document["machine"]["nvml"]
    assert nvml["available"] is True and nvml["reason"] is None
    assert nvml["driver_version"] == "550.54.15"
    assert nvml["cuda_driver_version"] == "12.4"
    first, second = nvml["devices"]
    assert first["name"] == "NVIDIA Fake A100"
    assert first["uuid"] == "GPU-0000-aaaa"
    assert first["memory"] == {"total": 16 << 30, "used": 3 << 30, "free": 13 << 30}
    assert first["compute_mode"] == "EXCLUSIVE_PROCESS"
    assert first["mig_mode"] is True and first["persistence_mode"] is False
    assert first["processes"] == [
        {"pid": me, "used_memory": 2 << 30, "in_namespace": True},
        {"pid": 1, "used_memory": None, "in_namespace": True},
    ]
    assert first["pid_namespace_mismatch"] is False
    assert second["name"] == "NVIDIA Fake T4" and second["processes"] == []
    assert second["compute_mode"] == "DEFAULT"


def test_terminal_report_against_fake_nvml(fake_nvml: FakeNvml) -> None:
    fake_nvml.add_device(name="NVIDIA Fake H100", total=80 << 30, used=1 << 30, compute_mode=3)
    done = gpudoctor(["probe", "--no-scenarios"], env=fake_nvml.env())
    assert done.returncode == 0, done.stderr
    assert "driver 550.54.15, CUDA driver API 12.4, 1 device" in done.stdout
    assert "GPU 0: NVIDIA Fake H100" in done.stdout
    assert "1.0 GiB used / 80.0 GiB total" in done.stdout
    assert "EXCLUSIVE_PROCESS" in done.stdout and "breaks multi-process use" in done.stdout


def test_driver_library_present_but_not_loaded(fake_nvml: FakeNvml) -> None:
    env = fake_nvml.env()
    fake_nvml.state.unlink()  # the fake then answers nvmlInit with DRIVER_NOT_LOADED
    code, document, _ = gpudoctor_json(["--no-scenarios"], env=env)
    assert code == 0
    assert document["machine"]["nvml"]["available"] is False
    assert "kernel driver is not loaded" in document["machine"]["nvml"]["reason"]


@pytest.mark.gpu
@pytest.mark.skipif(not real_driver_present(), reason="needs a real NVIDIA GPU and driver")
def test_real_gpu_is_reported() -> None:
    code, document, _ = gpudoctor_json(["--no-scenarios"])
    assert code == 0
    assert document["machine"]["nvml"]["available"] is True
    assert document["machine"]["nvml"]["devices"]
