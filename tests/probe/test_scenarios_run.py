"""``gpudoctor probe --scenario``: the CPU-reproducible scenarios run for real.

Every variant runs in gpudoctor's sandbox as a real process tree; nothing is
simulated. The scenarios that need a GPU are asked for too, to check that they
are skipped with their reason on this machine (and they are only skipped where
there is no driver: with one, they would run).
"""

from __future__ import annotations

import importlib.util
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from gpudoctor import hazards
from tests.probe.helpers import gpudoctor, gpudoctor_json, real_driver_present, running, wait_gone
from tests.probe.html_checks import assert_self_contained

FIELDS = {"name", "variant", "status", "reason", "explanation", "rule", "duration_s", "processes"}

# A variant's deadline only a stuck one reaches (the default, 30 s, is what a person running
# the scenarios waits): a safe TensorFlow variant imports TensorFlow in three processes, 5-10 s
# each on a loaded 2-core machine. A hung variant is stopped by --hang-after long before it.
SCENARIO_TIMEOUT = ["--scenario-timeout", "300"]


def _scenarios(args: list[str], timeout: float = 900) -> tuple[int, dict[tuple[str, str], dict]]:
    code, doc, stderr = gpudoctor_json([*SCENARIO_TIMEOUT, *args], timeout=timeout)
    assert "machine" in doc, stderr
    found = {(s["name"], s["variant"]): s for s in doc["scenarios"]}
    for entry in found.values():
        assert FIELDS <= set(entry)
        assert entry["variant"] in ("unsafe", "safe")
        assert entry["status"] in ("ok", "hung", "crashed", "oom", "skipped", "error")
        # Nothing of a scenario's process tree is left running.
        assert running([p["pid"] for p in entry["processes"]]) == []
    return code, found


@pytest.mark.tensorflow
@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None, reason="needs TensorFlow")
def test_tensorflow_fork_hangs_unsafe_and_passes_safe_and_gpu_scenarios_are_skipped() -> None:
    code, found = _scenarios(["--scenario", "tensorflow-fork-after-init",
                              "--scenario", "cupy-fork-after-init",
                              "--scenario", "tensorflow-oom-grab-all"])
    assert code == 0
    unsafe = found["tensorflow-fork-after-init", "unsafe"]
    assert (unsafe["status"], unsafe["rule"]) == ("hung", "GD101"), unsafe["explanation"]
    workers = [p for p in unsafe["processes"] if p["start"] == "fork"]
    assert len(workers) == 2 and all(w["verdict"] == "hung" for w in workers)
    assert all(w["runtimes_at_fork"] == ["tensorflow"] for w in workers)
    explanation = unsafe["explanation"]
    assert "forked at t=" in explanation and "which had TensorFlow initialized" in explanation
    assert 'multiprocessing.get_context("spawn")' in explanation
    assert "fork children" in unsafe["reason"]
    assert unsafe["as_expected"] is True
    safe = found["tensorflow-fork-after-init", "safe"]
    assert (safe["status"], safe["as_expected"]) == ("ok", True), safe["explanation"]
    assert any(p["start"] == "spawn" for p in safe["processes"])
    if real_driver_present():
        return  # the GPU scenarios may run here: what they show is not this test's to say
    for variant in ("unsafe", "safe"):
        cupy = found["cupy-fork-after-init", variant]
        assert cupy["status"] == "skipped"
        if importlib.util.find_spec("cupy") is None:
            assert cupy["reason"].startswith("cupy not installed; ")
        assert "no NVIDIA driver" in cupy["reason"]
        grab_all = found["tensorflow-oom-grab-all", variant]
        assert grab_all["status"] == "skipped"
        assert grab_all["reason"].startswith("no NVIDIA driver")
        assert grab_all["processes"] == []


@pytest.mark.tensorflow
@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None, reason="needs TensorFlow")
def test_tensorflow_config_and_env_after_init() -> None:
    code, found = _scenarios(["--scenario", "tensorflow-config-after-init",
                              "--scenario", "tensorflow-env-after-init"])
    assert code == 0
    config = found["tensorflow-config-after-init", "unsafe"]
    assert config["status"] == "crashed"
    assert "cannot be modified after initialization" in config["reason"]
    assert "TensorFlow device configuration ran after TensorFlow had initialized" in config["explanation"]
    env = found["tensorflow-env-after-init", "unsafe"]
    assert env["status"] == "crashed"
    assert "set after TensorFlow initialized was ignored" in env["reason"]
    assert "TF_FORCE_GPU_ALLOW_GROWTH" in env["reason"]
    # No framework message names it (the scenario's own check does): its rule's hazard does.
    assert "(GD301)." in env["explanation"] and hazards.ENV_AFTER_INIT.fix_line in env["explanation"]
    assert hazards.ENV_AFTER_INIT.fix_line not in config["explanation"]  # named by TensorFlow's message
    for name in ("tensorflow-config-after-init", "tensorflow-env-after-init"):
        safe = found[name, "safe"]
        assert safe["status"] == "ok", safe["explanation"]


def test_daemonic_and_threads_scenarios_with_the_html_report(tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    code, found = _scenarios(["--html", str(page), "--scenario", "process-in-daemonic-worker",
                              "--scenario", "fork-with-threads"])
    assert code == 0
    daemonic = found["process-in-daemonic-worker", "unsafe"]
    assert (daemonic["status"], daemonic["rule"]) == ("crashed", "GD105")
    assert "AssertionError: daemonic processes are not allowed to have children" in daemonic["explanation"]
    assert daemonic["reason"] == "AssertionError: daemonic processes are not allowed to have children"
    assert found["process-in-daemonic-worker", "safe"]["status"] == "ok"
    threads = found["fork-with-threads", "unsafe"]
    assert (threads["status"], threads["rule"]) == ("hung", "GD102"), threads["explanation"]
    hung = [p for p in threads["processes"] if p["start"] == "fork"]
    assert hung and all(p["verdict"] == "hung" and p["threads_at_fork"] >= 2 for p in hung)
    assert found["fork-with-threads", "safe"]["status"] == "ok"

    shown = assert_self_contained(page.read_text())
    assert "verdicts" in shown.ids
    for name in ("process-in-daemonic-worker", "fork-with-threads"):
        assert f"{name}-unsafe" in shown.ids and f"{name}-safe" in shown.ids
    assert "daemonic processes are not allowed to have children" in shown.text
    assert "Machine" in shown.text and "default start method" in shown.text
    if importlib.util.find_spec("matplotlib") is not None:
        assert shown.tags.count("svg") == 4  # one timeline per variant that ran
        assert "host RSS (MiB)" in shown.text
    assert not list(tmp_path.glob(".report.html.*"))  # the temporary file was renamed


def test_terminal_output_when_piped() -> None:
    done = gpudoctor(["probe", "--scenario", "process-in-daemonic-worker"], timeout=120)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "GPUs (NVML)" in out  # the machine report comes first
    assert "[1/2] process-in-daemonic-worker unsafe: crashed" in done.stderr  # plain progress lines
    assert "[1/2]" not in out
    assert "Scenarios" in out
    assert "process-in-daemonic-worker unsafe: crashed — AssertionError: daemonic processes" in out
    assert "\x1b[" not in out  # no terminal control sequences in a pipe


def test_no_scenarios_is_the_machine_report_alone() -> None:
    code, doc, _ = gpudoctor_json(["--no-scenarios"], timeout=60)
    assert code == 0
    assert "machine" in doc and "scenarios" not in doc


def test_ctrl_c_stops_the_scenarios_and_leaves_nothing_running() -> None:
    process = subprocess.Popen([sys.executable, "-m", "gpudoctor", "probe", "--json",
                                "--scenario", "fork-with-threads", "--scenario", "process-in-daemonic-worker"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    seen: list[int] = []
    while not seen and time.monotonic() < deadline:
        seen = [p.pid for p in psutil.Process(process.pid).children(recursive=True)
                if any("fork_with_threads.py" in part for part in _cmdline(p))]
        time.sleep(0.05)
    assert seen, "the scenario never started"
    process.send_signal(signal.SIGINT)
    out, _ = process.communicate(timeout=60)
    assert process.returncode == 130
    assert out == b""  # no half document
    assert wait_gone(seen) == []


def _cmdline(process: psutil.Process) -> list[str]:
    try:
        return process.cmdline()
    except psutil.Error:
        return []
