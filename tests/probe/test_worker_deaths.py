"""Real programs whose workers die, under the probe: each failure happens for real (a
worker SIGKILLs itself, a spawn child re-runs a main module without a main guard, Process
targets raise), and the probe must name the right cause, group identical failures and
stop a crash loop by itself, leaving nothing running.

Nothing waits on a fixed sleep: a hang is the probe's own verdict after --hang-after
seconds in which no process of the tree made CPU progress (the tree is idle once the
worker is dead), and the crash loop ends when the probe has seen --crash-loop identical
failures. The deadlines given are bounds only a stuck run reaches.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from gpudoctor import hazards
from tests.probe.helpers import gpudoctor_json, marked, read_pids, running, script, wait_gone

PY = sys.executable
pytestmark = pytest.mark.slow

# Only a run that is stuck reaches these: the runs take seconds.
TIMEOUT = 120

KILLED_IN_TASK = """\
# A Pool worker killed in the middle of a task: Pool.map waits for ever. Modelled on CPython
# gh-66587 (bpo-22393, "multiprocessing.Pool shouldn't hang forever if a worker process dies
# unexpectedly"), gh-96062 ("multiprocessing.Pool gets stuck indefinitely when the child
# process is killed manually") and Stack Overflow 24894682 ("Python multiprocessing crash in
# subprocess?"): the OOM killer's SIGKILL does the same as the worker's own here.
import multiprocessing
import os
import signal
import sys


def work(i):
    if i == 3:
        with open(sys.argv[2] + ".tmp", "w") as f:
            f.write(str(os.getpid()))
        os.replace(sys.argv[2] + ".tmp", sys.argv[2])
        os.kill(os.getpid(), signal.SIGKILL)
    return i * i


if __name__ == "__main__":
    with multiprocessing.get_context(sys.argv[1]).Pool(2) as pool:
        print(pool.map(work, range(8)))
"""


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_a_pool_worker_killed_in_a_task_is_named_with_its_signal_and_the_fix(
        tmp_path: Path, method: str, no_leftovers: str) -> None:
    source = script(tmp_path, "killed.py", KILLED_IN_TASK)
    pid_file = tmp_path / "dead"
    code, doc, _ = gpudoctor_json(["--timeout", str(TIMEOUT), "--hang-after", "3", "--",
                                   PY, str(source), method, str(pid_file)], timeout=TIMEOUT + 60)
    (dead,) = read_pids(pid_file, 1, timeout=0)
    assert (code, doc["verdict"], doc["stop_reason"]) == (1, "hung", "hung"), doc["explanation"]
    by_pid = {p["pid"]: p for p in doc["processes"]}
    root = next(p for p in doc["processes"] if p["start"] == "root")
    assert by_pid[dead]["exit_code"] == -9 and by_pid[dead]["start"] == method
    lines = doc["explanation"].splitlines()
    died = [line for line in lines if line.startswith("Worker died while running a task: ")]
    assert len(died) == 1, lines
    assert f"pid {dead} died of SIGKILL at t=" in died[0]
    assert f"its parent, pid {root['pid']}, has waited for that task's result ever since in " in died[0]
    assert "multiprocessing/pool.py:" in died[0] and "killed.py:" in died[0]  # the parent's stack: Pool.map
    assert any(line.startswith(f"pid {dead} left no stack: SIGKILL ends a process") for line in lines)
    assert hazards.WORKER_DIED_IN_TASK.why in lines and hazards.WORKER_DIED_IN_TASK.fix_line in lines
    assert "ProcessPoolExecutor" in hazards.WORKER_DIED_IN_TASK.fix and "BrokenProcessPool" in doc["explanation"]
    # Not a fork with threads (the pool's handler threads run when it forks the replacement).
    assert [(c["kind"], c["certainty"], c["parent"], c["processes"]) for c in doc["causes"]] == [
        ("worker-died-in-task", "observed", root["pid"], [dead])]
    assert "GD102" not in doc["explanation"] and hazards.MULTITHREADED_FORK.why not in lines
    assert running(by_pid) == [] and wait_gone(marked(no_leftovers), timeout=30) == []


NO_MAIN_GUARD = """\
# A spawn Pool started at the top of the script, with no `if __name__ == "__main__":`. Each
# worker re-runs the script as __mp_main__, tries to start a pool of its own, dies of
# "RuntimeError: An attempt has been made to start a new process before the current process
# has finished its bootstrapping phase", and the pool starts another: for ever. Modelled on
# hezhangsprinter/DID-MDN#3 and the many reports like it; CPython's documentation, "Safe
# importing of main module" (multiprocessing, programming guidelines).
import multiprocessing


def work(i):
    return i * i


pool = multiprocessing.get_context("spawn").Pool(2)
print(pool.map(work, range(4)))
"""


def test_a_spawn_pool_without_a_main_guard_is_a_crash_loop_stopped_by_the_probe(
        tmp_path: Path, no_leftovers: str) -> None:
    source = script(tmp_path, "noguard.py", NO_MAIN_GUARD)
    pool_line = NO_MAIN_GUARD.splitlines().index('pool = multiprocessing.get_context("spawn").Pool(2)') + 1
    # No --timeout: the probe stops the loop by itself.
    code, doc, _ = gpudoctor_json(["--", PY, str(source)], timeout=TIMEOUT + 60)
    assert (code, doc["verdict"], doc["stop_reason"]) == (1, "crash-loop", "crash-loop"), doc["explanation"]
    lines = doc["explanation"].splitlines()
    assert lines[0].startswith("Crash loop: ") and "child processes in a row failed the same way" in lines[0]
    assert "gpudoctor stopped the tree after --crash-loop 20 identical failures in a row." in lines[0]
    assert f"They failed at your code {source}:{pool_line} (in <module>): pool = " in lines[1]
    root = next(p["pid"] for p in doc["processes"] if p["start"] == "root")
    assert lines[2].startswith(f"pid {root} waited for their results in ") and "multiprocessing/pool.py:" in lines[2]
    grouped = [line for line in lines if " spawn children exited with status 1: RuntimeError: An attempt has "
               "been made to start a new process before the current process has finished its bootstrapping "
               "phase" in line]
    assert len(grouped) == 1 and int(grouped[0].split()[0]) >= 20, lines
    assert f"from your code <module> ({source}:{pool_line})" in grouped[0]
    assert not [line for line in lines if line.startswith("pid ") and "(spawn) exited" in line]
    assert hazards.PROCESS_START_AT_IMPORT.why in lines and hazards.PROCESS_START_AT_IMPORT.fix_line in lines
    (cause,) = doc["causes"]
    assert (cause["kind"], cause["rule"], cause["certainty"]) == ("process-start-at-import", "GD104", "observed")
    assert len(cause["processes"]) >= 20
    assert any(f"{source}:{pool_line}" in line for line in cause["evidence"])
    assert not any("<string>:1" in line for line in cause["evidence"])
    failed = [p for p in doc["processes"] if p["verdict"] == "crashed"]
    assert all(p["exception_at"] == f"<module> ({source}:{pool_line})" for p in failed)
    assert running(p["pid"] for p in doc["processes"]) == []
    assert wait_gone(marked(no_leftovers), timeout=30) == []


RAISE_ONCE = """\
# Eight processes whose target raises the same exception: each exits with status 1
# (CPython's documentation of Process.exitcode), once; nothing starts them again.
import multiprocessing
import sys


def load(i):
    raise ValueError("the input file is empty")


if __name__ == "__main__":
    context = multiprocessing.get_context(sys.argv[1])
    processes = [context.Process(target=load, args=(i,)) for i in range(8)]
    for p in processes:
        p.start()
    for p in processes:
        p.join()
    sys.exit(1 if any(p.exitcode for p in processes) else 0)
"""


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_children_that_fail_alike_once_are_one_line_and_no_crash_loop(tmp_path: Path, method: str) -> None:
    source = script(tmp_path, "raise_once.py", RAISE_ONCE)
    code, doc, _ = gpudoctor_json(["--timeout", str(TIMEOUT), "--", PY, str(source), method], timeout=TIMEOUT + 60)
    assert (code, doc["verdict"], doc["stop_reason"]) == (1, "failed", "exited"), doc["explanation"]
    lines = doc["explanation"].splitlines()
    assert [line for line in lines if "ValueError: the input file is empty" in line and "children" in line] == [
        next(line for line in lines if line.startswith(f"8 {method} children exited with status 1: ValueError: "
                                                         f"the input file is empty, from your code load ({source}:"))]
    assert not [line for line in lines if line.startswith("pid ")]
    assert "Crash loop" not in doc["explanation"]
    children = [p for p in doc["processes"] if p["exception"] == "ValueError: the input file is empty"]
    assert len(children) == 8 and all(p["exit_code"] == 1 for p in children)
    assert running(p["pid"] for p in doc["processes"]) == []
