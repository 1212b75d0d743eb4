"""Helpers for the probe's tests: run gpudoctor in a subprocess, watch PIDs, write scripts."""

from __future__ import annotations

import ctypes.util
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import pytest

STATE_VAR = "GPUDOCTOR_FAKE_NVML_STATE"


def real_driver_present() -> bool:
    """Return whether this machine has a real NVML library."""
    return ctypes.util.find_library("nvidia-ml") is not None


@dataclass
class FakeNvml:
    """The state of the fake NVML library, written to the file it reads on every call."""

    library_dir: Path
    state: Path
    driver: str = "550.54.15"
    cuda: int = 12040
    devices: list[dict[str, Any]] = field(default_factory=list)
    processes: list[tuple[int, int, int | None]] = field(default_factory=list)
    failures: dict[str, int] = field(default_factory=dict)

    def add_device(self, name: str = "NVIDIA Fake A100", total: int = 16 << 30, used: int = 0,
                   compute_mode: int = 0, mig: int = 0, persistence: int = 1,
                   uuid: str | None = None) -> None:
        index = len(self.devices)
        self.devices.append(dict(name=name, total=total, used=used, compute_mode=compute_mode,
                                 mig=mig, persistence=persistence, uuid=uuid or f"GPU-fake-{index}"))

    def text(self) -> str:
        lines = [f"driver {self.driver}", f"cuda {self.cuda}"]
        lines += [f"device {d['total']} {d['used']} {d['compute_mode']} {d['mig']} "
                  f"{d['persistence']} {d['uuid']} {d['name']}" for d in self.devices]
        lines += [f"proc {dev} {pid} {'na' if used is None else used}"
                  for dev, pid, used in self.processes]
        lines += [f"fail {name} {code}" for name, code in self.failures.items()]
        return "\n".join(lines) + "\n"

    def write(self) -> None:
        self.state.write_text(self.text())

    def env(self) -> dict[str, str]:
        """Return an environment in which nvidia-ml-py loads the fake library."""
        self.write()
        env = dict(os.environ)
        env["LD_LIBRARY_PATH"] = os.pathsep.join(
            p for p in (str(self.library_dir), env.get("LD_LIBRARY_PATH")) if p)
        env[STATE_VAR] = str(self.state)
        return env


def gpudoctor(args: Sequence[str], env: dict[str, str] | None = None, timeout: float = 120,
              cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``python -m gpudoctor ARGS`` and return its completed process."""
    return subprocess.run([sys.executable, "-m", "gpudoctor", *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=timeout)


def gpudoctor_json(args: Sequence[str], **kwargs: Any) -> tuple[int, dict[str, Any], str]:
    """Run gpudoctor with --json; return (exit code, parsed stdout, stderr)."""
    done = gpudoctor(["probe", "--json", *args], **kwargs)
    try:
        document = json.loads(done.stdout)
    except ValueError:
        pytest.fail(f"no JSON on stdout (exit {done.returncode}):\n{done.stdout}\n{done.stderr}")
    return done.returncode, document, done.stderr


def running(pids: Iterable[int]) -> list[int]:
    """Return the PIDs that still run (zombies do not count: they are dead)."""
    alive = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                alive.append(pid)
        except psutil.Error:
            continue
    return alive


def wait_gone(pids: Iterable[int], timeout: float = 10.0) -> list[int]:
    """Wait up to ``timeout`` for ``pids`` to end; return those still running."""
    pids = list(pids)
    deadline = time.monotonic() + timeout
    while running(pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    return running(pids)


def script(tmp_path: Path, name: str, source: str) -> Path:
    """Write a Python script for a test to supervise."""
    path = tmp_path / name
    path.write_text(source)
    return path
