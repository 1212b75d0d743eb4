"""The runner of ``make gpu-check`` without a GPU: the no-GPU line, --parts, failures, the report."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from gpucheck import machine, report, runner
from gpucheck.part import Context, PartResult
from tests.probe.helpers import FakeNvml

REPO = Path(__file__).resolve().parents[2]
GPUS = machine.Gpus([{"index": 0, "name": "NVIDIA Test GPU", "uuid": "GPU-0", "memory_total": 1 << 30,
                      "compute_mode": "DEFAULT", "mig_mode": False}], "580.159.01", "13.0")


def _gpucheck(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    env = {**env, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "gpucheck", *args], capture_output=True, text=True,
                          env=env, cwd=REPO, timeout=60)


def test_without_nvml_one_line_and_exit_0(tmp_path: Path) -> None:
    empty = tmp_path / "lib"
    empty.mkdir()
    env = {**os.environ, "LD_LIBRARY_PATH": str(empty)}
    if runner.machine._library_loads():
        pytest.skip("this machine has a real libnvidia-ml.so.1")
    done = _gpucheck(["--out", str(tmp_path / "out")], env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "gpu-check: no NVIDIA GPU on this machine (no NVIDIA driver: libnvidia-ml.so.1 not found); "
        "nothing to check"]
    assert done.stderr == ""
    assert not (tmp_path / "out").exists()


def test_nvml_with_no_device_is_no_gpu(fake_nvml: FakeNvml, tmp_path: Path) -> None:
    done = _gpucheck(["--out", str(tmp_path / "out")], fake_nvml.env())
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "gpu-check: no NVIDIA GPU on this machine (NVML loads but lists no device); nothing to check"]


def test_with_a_gpu_an_unknown_part_is_a_sentence_and_exit_2(fake_nvml: FakeNvml, tmp_path: Path) -> None:
    fake_nvml.add_device(name="NVIDIA Fake H100")
    done = _gpucheck(["--out", str(tmp_path / "out"), "--parts", "nope"], fake_nvml.env())
    assert done.returncode == 2, done.stderr
    assert done.stdout.startswith("gpu-check: unknown part 'nope' (--parts); known parts: ")
    assert {"scenarios", "scripts", "plugin"} <= set(done.stdout.split("known parts: ")[1].strip().split(", "))
    assert "Traceback" not in done.stdout + done.stderr


def _part(name: str, order: float, ran: list[str], status: str = "passed") -> runner.Part:
    def run(ctx: Context) -> PartResult:
        ran.append(name)
        if status == "raise":
            raise RuntimeError(f"{name} broke")
        return PartResult(name, status, [f"{name} said so"], {"folder": str(ctx.folder(name))})

    return runner.Part(name, order, run)


def _environment(python: str, repo: Path) -> dict[str, Any]:
    return {"python": "3.12.0", "executable": python,
            "dependencies": {"sentence": "gpudoctor's dependencies all import; py-spy found"},
            "frameworks": {"torch": {"imports": True, "version": "2.11.0", "cuda": "13.0"},
                           "tensorflow": {"imports": False, "error": "ModuleNotFoundError: no"}}}


def _args(tmp_path: Path, parts: str | None = None, budget: float = 60) -> argparse.Namespace:
    return argparse.Namespace(out=tmp_path / "out", parts=parts, python=sys.executable, budget=budget)


def test_parts_run_in_order_and_only_those_chosen(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ran: list[str] = []
    parts = [_part("a", 1, ran), _part("b", 2, ran), _part("c", 3, ran)]
    assert runner.check(_args(tmp_path, "c,a"), GPUS, parts, _environment) == 0
    assert ran == ["a", "c"]
    out = capsys.readouterr().out
    assert "[1/2] a" in out and "[2/2] c" in out and "all checks passed" in out
    doc = json.loads((tmp_path / "out" / report.JSON_NAME).read_text())
    assert [p["name"] for p in doc["parts"]] == ["a", "c"]


def test_a_part_that_raises_fails_and_the_others_still_run(tmp_path: Path) -> None:
    ran: list[str] = []
    parts = [_part("first", 1, ran, "raise"), _part("second", 2, ran)]
    assert runner.check(_args(tmp_path), GPUS, parts, _environment) == 1
    assert ran == ["first", "second"]
    doc = json.loads((tmp_path / "out" / report.JSON_NAME).read_text())
    first, second = doc["parts"]
    assert first["status"] == "failed" and first["summary"] == ["the check raised RuntimeError: first broke"]
    assert "RuntimeError" in first["data"]["traceback"]
    assert second["status"] == "passed"
    assert doc["passed"] is False


def test_report_files_hold_the_machine_the_frameworks_and_every_part(tmp_path: Path) -> None:
    ran: list[str] = []
    runner.check(_args(tmp_path), GPUS, [_part("a", 1, ran), _part("b", 2, ran, "skipped")], _environment)
    doc = json.loads((tmp_path / "out" / report.JSON_NAME).read_text())
    assert doc["machine"]["devices"][0]["name"] == "NVIDIA Test GPU"
    assert doc["machine"]["driver_version"] == "580.159.01" and doc["machine"]["date"]
    assert doc["environment"]["frameworks"]["torch"]["version"] == "2.11.0"
    assert {p["name"]: p["status"] for p in doc["parts"]} == {"a": "passed", "b": "skipped"}
    assert all(p["seconds"] >= 0 for p in doc["parts"])
    text = (tmp_path / "out" / report.MARKDOWN_NAME).read_text()
    assert "NVIDIA Test GPU" in text and "| torch | 2.11.0 (cuda 13.0) |" in text
    assert "| tensorflow | does not import (ModuleNotFoundError: no) |" in text
    assert "## a: passed" in text and "- a said so" in text


def test_no_time_left_skips_the_part(tmp_path: Path) -> None:
    ran: list[str] = []
    result = runner.run_part(_part("late", 1, ran), Context(tmp_path, sys.executable, REPO, deadline=0.0))
    assert result.status == "skipped" and ran == []


def test_a_check_module_that_cannot_load_is_a_failed_part(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "fake_parts"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "good.py").write_text(textwrap.dedent("""
        from gpucheck.part import PartResult
        NAME, ORDER = "good", 5
        def run(ctx):
            return PartResult(NAME, "passed")
    """))
    (package / "bad.py").write_text("import no_such_module_here\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    parts = runner.discover("fake_parts")
    assert [p.name for p in parts] == ["good", "bad"]
    result = runner.run_part(parts[1], Context(tmp_path, sys.executable, REPO, deadline=float("inf")))
    assert result.status == "failed"
    assert "No module named 'no_such_module_here'" in result.summary[0]


def test_the_real_checks_load_and_are_ordered() -> None:
    parts = runner.discover()
    assert all(p.order != float("inf") for p in parts), [p.name for p in parts]
    assert len({p.name for p in parts}) == len(parts)
