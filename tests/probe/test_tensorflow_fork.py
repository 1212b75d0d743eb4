"""The real TensorFlow-CPU freeze: one op in the parent, then fork workers that run ops.

Verified on CPU-only machines: a 1000x1000 matmul in the parent
starts TensorFlow's intra-op pool; fork workers then wait forever for pool threads
that do not exist in them. Small (64x64) matrices do not hang, nor does importing
TensorFlow alone. The spawn start method is the fix.
"""

from __future__ import annotations

import importlib.util
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from gpudoctor import hazards
from tests.probe.helpers import gpudoctor_json, running, script

pytestmark = [
    pytest.mark.tensorflow,
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None, reason="needs TensorFlow"),
]

FREEZE = """\
import multiprocessing
import sys

import tensorflow as tf


def work(i):
    return float(tf.reduce_sum(tf.matmul(tf.ones((1000, 1000)), tf.ones((1000, 1000)))))


if __name__ == "__main__":
    tf.matmul(tf.ones((1000, 1000)), tf.ones((1000, 1000)))
    with multiprocessing.get_context(sys.argv[1]).Pool(2) as pool:
        print(pool.map(work, range(4)))
"""

# A deadline only a stuck run reaches: three processes import TensorFlow in the spawn
# variant, 5-10 s each on a loaded 2-core machine. A run it cut short says "timeout"
# (stop_reason, verdict "killed"), which the assertions on the verdict catch.
TIMEOUT = 300


def _run(tmp_path: Path, method: str, hang_after: float) -> tuple[int, dict]:
    source = script(tmp_path, "freeze.py", FREEZE)
    code, doc, _ = gpudoctor_json(
        ["--timeout", str(TIMEOUT), "--hang-after", str(hang_after), "--", sys.executable, str(source), method],
        timeout=TIMEOUT + 60,
    )
    return code, doc


def test_fork_after_tensorflow_op_is_diagnosed_as_hung(tmp_path: Path) -> None:
    code, doc = _run(tmp_path, "fork", hang_after=3)
    assert (code, doc["verdict"], doc["stop_reason"]) == (1, "hung", "hung")
    workers = [p for p in doc["processes"] if p["start"] == "fork"]
    assert len(workers) == 2
    root_pid = next(p["pid"] for p in doc["processes"] if p["start"] == "root")
    for worker in workers:
        assert worker["verdict"] == "hung"
        assert worker["ppid"] == root_pid
        assert worker["runtimes_at_fork"] == ["tensorflow"]
        assert worker["threads_at_fork"] > 1
        assert worker["stack"]
    explanation = doc["explanation"]
    threads = sorted({w["threads_at_fork"] for w in workers})
    assert f"from pid {root_pid}, which had TensorFlow initialized and {threads[0]}" in explanation
    assert "native threads at the fork" in explanation
    assert "Blocked in " in explanation
    if any(w["stack_source"] == "py-spy" for w in workers):
        # The native frames show the intra-op pool the worker waits for.
        assert any(name in explanation for name in ("parallelFor", "parallel_for", "ThreadPool"))
    assert "in your code work (freeze.py:" in explanation
    assert 'multiprocessing.get_context("spawn")' in explanation
    # No worker died: the fork after init is the cause, and the only one.
    assert [(c["kind"], c["rule"], c["certainty"]) for c in doc["causes"]] == [("fork-after-init", "GD101", "observed")]
    assert "Worker died" not in explanation and hazards.WORKER_DIED_IN_TASK.fix_line not in explanation
    assert running([p["pid"] for p in doc["processes"]]) == []


def test_spawn_start_method_is_ok(tmp_path: Path) -> None:
    # The parent waits in Pool.map, with no CPU progress, while its workers import TensorFlow
    # (5-10 s each on a loaded machine): only a wait longer than any of that is a hang.
    code, doc = _run(tmp_path, "spawn", hang_after=120)
    assert (code, doc["verdict"], doc["exit_code"]) == (0, "ok", 0), doc["explanation"]
    assert all(p["verdict"] != "hung" for p in doc["processes"])
    assert any(p["start"] == "spawn" for p in doc["processes"])
    assert running([p["pid"] for p in doc["processes"]]) == []


LUCKY = """\
import multiprocessing

import tensorflow as tf


def work(i):
    return i * 2  # no TensorFlow in the workers: nothing waits for the missing pool


if __name__ == "__main__":
    tf.matmul(tf.ones((64, 64)), tf.ones((64, 64)))
    with multiprocessing.get_context("fork").Pool(2) as pool:
        print(pool.map(work, range(4)))
"""


def test_a_fork_after_tensorflow_that_did_not_hang_is_ok_with_a_warning(tmp_path: Path) -> None:
    source = script(tmp_path, "lucky.py", LUCKY)
    code, doc, _ = gpudoctor_json(["--timeout", str(TIMEOUT), "--hang-after", "10", "--",
                                   sys.executable, str(source)], timeout=TIMEOUT + 60)
    assert (code, doc["verdict"]) == (0, "ok"), doc["explanation"]
    assert "Warning: 2 processes were forked from a parent with TensorFlow initialized" in doc["explanation"]
    assert "This run finished, but a child that uses the GPU runtime it inherited can hang" in doc["explanation"]
    assert running([p["pid"] for p in doc["processes"]]) == []


PRELOADED = """\
import multiprocessing

import tensorflow as tf


def work(i):
    return float(tf.reduce_sum(tf.matmul(tf.ones((1000, 1000)), tf.ones((1000, 1000)))))


if __name__ == "__main__":
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["warm"])
    with context.Pool(2) as pool:
        print(pool.map(work, range(4)))
"""
WARM = """\
import tensorflow as tf

tf.matmul(tf.ones((1000, 1000)), tf.ones((1000, 1000)))
"""


def test_workers_of_a_forkserver_that_initialized_tensorflow_get_the_forkserver_fix(tmp_path: Path) -> None:
    # The forkserver imports "warm" (its preload list) and so runs a TensorFlow op before
    # it forks the workers: they hang like fork workers, and "use forkserver" is no fix.
    # Run from the scripts' folder: before Python 3.13.8 the forkserver imports its preload
    # list with its own sys.path (the current directory first), not the script's.
    script(tmp_path, "warm.py", WARM)
    source = script(tmp_path, "preloaded.py", PRELOADED)
    code, doc, _ = gpudoctor_json(["--timeout", str(TIMEOUT), "--hang-after", "3", "--",
                                   sys.executable, str(source)], timeout=TIMEOUT + 60, cwd=tmp_path)
    assert (code, doc["verdict"]) == (1, "hung"), doc["explanation"]
    # The forkserver is the process that runs multiprocessing.forkserver and was not forked
    # by one: its children have its command line too, and a worker the pool forks again while
    # the tree is being stopped may be killed before its fork was recorded (start "unknown").
    serving = {p["pid"] for p in doc["processes"] if any("multiprocessing.forkserver" in a for a in p["cmdline"])}
    servers = [p for p in doc["processes"] if p["pid"] in serving and p["ppid"] not in serving]
    assert len(servers) == 1, [(p["pid"], p["ppid"], p["start"]) for p in doc["processes"]]
    workers = [p for p in doc["processes"] if p["ppid"] == servers[0]["pid"] and p["start"] == "fork"]
    assert workers and all(w["runtimes_at_fork"] == ["tensorflow"] for w in workers)
    explanation = doc["explanation"]
    assert f"from the forkserver, pid {servers[0]['pid']}, which had TensorFlow initialized" in explanation
    assert f"The workers come from the forkserver (pid {servers[0]['pid']}), which had TensorFlow initialized" \
        in explanation
    assert 'Fix: move the GPU initialization under `if __name__ == "__main__":`' in explanation
    assert "set_forkserver_preload" in explanation
    assert running([p["pid"] for p in doc["processes"]]) == []


# How long the fork workers must have been idle (no CPU time gained) before the test
# interrupts gpudoctor: the "Ctrl-C after a few seconds of a real hang" of a user.
IDLE = 3.0


def _idle_workers(gpudoctor: subprocess.Popen[str], deadline: float) -> list[int]:
    """Wait until the command's two fork workers exist and neither has gained CPU time for
    IDLE seconds (however long TensorFlow takes to import and run here); return their PIDs."""
    cpu: dict[int, tuple[float, float]] = {}  # pid -> (CPU seconds, when they last changed)
    while time.monotonic() < deadline:
        assert gpudoctor.poll() is None, gpudoctor.communicate()
        now = time.monotonic()
        try:
            roots = [c for c in psutil.Process(gpudoctor.pid).children() if "freeze.py" in " ".join(c.cmdline())]
            workers = [w for r in roots for w in r.children()]
            for worker in workers:
                used = sum(worker.cpu_times()[:2])
                if worker.pid not in cpu or cpu[worker.pid][0] != used:
                    cpu[worker.pid] = (used, now)
        except psutil.Error:
            workers = []
        if len(workers) == 2 and all(now - cpu[w.pid][1] >= IDLE for w in workers):
            return [w.pid for w in workers]
        time.sleep(0.1)
    pytest.fail("the fork workers never went idle")


def _assert_likely_fork_after_init(doc: dict, workers: list[int]) -> None:  # type: ignore[type-arg]
    explanation = doc["explanation"]
    assert "Likely hung: " in explanation and "short of --hang-after 600 s" in explanation, explanation
    assert hazards.why_for(hazards.FORK_AFTER_INIT, ["tensorflow"]) in explanation.splitlines()
    assert "CUDA context" not in explanation  # TensorFlow-CPU: no CUDA paragraph
    assert hazards.FORK_AFTER_INIT.fix_line in explanation.splitlines()
    assert "sitecustomize" not in explanation
    likely = [c for c in doc["causes"] if c["certainty"] == "likely"]
    assert [(c["kind"], c["rule"], c["frameworks"]) for c in likely] == [("fork-after-init", "GD101", ["tensorflow"])]
    assert set(workers) <= set(likely[0]["processes"])
    assert doc["schema_version"] == 1 and doc["machine"]["python"]
    assert running([p["pid"] for p in doc["processes"]]) == []


def test_ctrl_c_during_a_fork_hang_still_gives_the_cause_and_the_fix(tmp_path: Path) -> None:
    source = script(tmp_path, "freeze.py", FREEZE)
    gpudoctor = subprocess.Popen(
        [sys.executable, "-m", "gpudoctor", "probe", "--json", "--hang-after", "600", "--",
         sys.executable, str(source), "fork"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        workers = _idle_workers(gpudoctor, time.monotonic() + TIMEOUT)
        gpudoctor.send_signal(signal.SIGINT)
        stdout, stderr = gpudoctor.communicate(timeout=120)
    finally:
        if gpudoctor.poll() is None:
            gpudoctor.kill()
            gpudoctor.wait()
    assert gpudoctor.returncode == 130, stderr[-3000:]
    doc = json.loads(stdout)
    assert (doc["verdict"], doc["stop_reason"]) == ("killed", "interrupted")
    _assert_likely_fork_after_init(doc, workers)
    assert running(workers) == []


def test_timeout_during_a_fork_hang_still_gives_the_cause_and_the_fix(tmp_path: Path) -> None:
    """--timeout is gpudoctor's own clock: a run it cut before the workers went idle
    (TensorFlow still importing on a slow machine) is run again with twice the time."""
    source = script(tmp_path, "freeze.py", FREEZE)
    timeout = 15
    while True:
        code, doc, _ = gpudoctor_json(["--timeout", str(timeout), "--hang-after", "600", "--",
                                       sys.executable, str(source), "fork"], timeout=timeout + 120)
        idle = [p for p in doc["processes"] if p["start"] == "fork" and p["stalled_for"] >= IDLE]
        if len(idle) == 2 or timeout >= TIMEOUT:
            break
        timeout *= 2
    assert (code, doc["verdict"], doc["stop_reason"]) == (1, "killed", "timeout"), doc["explanation"]
    assert f"Stopped at --timeout {timeout:g} s, before --hang-after 600 s." in doc["explanation"]
    _assert_likely_fork_after_init(doc, [p["pid"] for p in idle])
