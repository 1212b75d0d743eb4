"""Fork children of a PyTorch parent that waits for ever in GNU OpenMP (libgomp): the
parent's CPU op started the OpenMP pool, the children's first op waits for its threads.

The diagnosis is fed first the stacks a real run left (py-spy's dumps, recorded with the
torch 2.13.0 CPU wheel on this project's 2-core Linux machine), then the real program runs
under the probe when torch is importable (the test extra): it hangs for real there, and the
fix the probe gives (``torch.set_num_threads(1)`` before the fork) is run too. Nothing waits
on a fixed sleep: the hang is the probe's verdict after --hang-after seconds in which no
process of the tree made CPU progress; a loaded machine only makes the import of torch and
the parent's matmul slower, which is CPU progress. torch is never imported in the test
process.
"""

from __future__ import annotations

import functools
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gpudoctor import hazards
from gpudoctor.knowledge import openmp_runtime
from gpudoctor.probe.diagnose import diagnose
from gpudoctor.probe.sampler import Peaks
from gpudoctor.probe.stacks import Stack
from gpudoctor.probe.supervise import Limits, ProcessRun, RunRecord
from gpudoctor.probe.verdicts import StopReason, Verdict
from tests.probe.helpers import gpudoctor_json, marked, running, script, wait_gone

PY = sys.executable

# py-spy --native of the Pool's parent and of one of its fork workers (CPython 3.11, torch
# 2.13.0 CPU), as recorded; two frames of c10's dispatcher wrappers, each over 1,000
# characters long, are left out of the worker's stack between at::_ops::ones::redispatch
# and at::_ops::ones::call, and the pool's handler threads out of the parent's.
PARENT = """\
Process 27988: /work/main/.venv/bin/python torchfork.py
Python v3.11.7 (/root/.pyenv/versions/3.11.7/bin/python3.11)

Thread 27988 (idle): "MainThread"
    0x7fe0ad0a3f16 (libc.so.6)
    0x7fe0ad0aed90 (libc.so.6)
    PyThread_acquire_lock_timed (libpython3.11.so.1.0)
    lock_PyThread_acquire_lock (libpython3.11.so.1.0)
    Condition.wait (threading.py:327)
    Event.wait (threading.py:629)
    ApplyResult.wait (multiprocessing/pool.py:765)
    ApplyResult.get (multiprocessing/pool.py:768)
    Pool.map (multiprocessing/pool.py:367)
    <module> (torchfork.py:14)
    0x7fe0ad04524a (libc.so.6)
"""
WORKER = """\
Process 27993: /work/main/.venv/bin/python torchfork.py
Python v3.11.7 (/root/.pyenv/versions/3.11.7/bin/python3.11)

Thread 27993 (idle): "MainThread"
    0x7fe0ac41e073 (libgomp.so.1)
    0x7fe0ac41ca9d (libgomp.so.1)
    at::TensorIteratorBase::for_each (libtorch_cpu.so)
    at::native::(anonymous namespace)::fill_kernel(at::TensorIterator&, c10::Scalar const&)::{lambda()#1}::operator() \
const (libtorch_cpu.so)
    at::native::(anonymous namespace)::fill_kernel (libtorch_cpu.so)
    at::native::fill_out (libtorch_cpu.so)
    at::_ops::fill__Scalar::call (libtorch_cpu.so)
    at::native::full (libtorch_cpu.so)
    at::native::ones (libtorch_cpu.so)
    at::_ops::ones::redispatch (libtorch_cpu.so)
    at::_ops::ones::call (libtorch_cpu.so)
    torch::autograd::THPVariable_ones (libtorch_python.so)
    work (torchfork.py:6)
    mapstar (multiprocessing/pool.py:48)
    worker (multiprocessing/pool.py:125)
    BaseProcess.run (multiprocessing/process.py:108)
    BaseProcess._bootstrap (multiprocessing/process.py:314)
    Popen._launch (multiprocessing/popen_fork.py:71)
    Popen.__init__ (multiprocessing/popen_fork.py:19)
    ForkProcess._Popen (multiprocessing/context.py:281)
    BaseProcess.start (multiprocessing/process.py:121)
    Pool._repopulate_pool_static (multiprocessing/pool.py:329)
    Pool._repopulate_pool (multiprocessing/pool.py:306)
    Pool.__init__ (multiprocessing/pool.py:215)
    BaseContext.Pool (multiprocessing/context.py:119)
    <module> (torchfork.py:13)
    0x7fe0ad04524a (libc.so.6)
"""
# The same worker as faulthandler dumps it (no py-spy): no native frame shows the pool.
WORKER_FAULTHANDLER = """\
Current thread 0x00007fe0ad01e740 (most recent call first):
  File "/tmp/tf/torchfork.py", line 6 in work
  File "/usr/lib/python3.11/multiprocessing/pool.py", line 48 in mapstar
  File "/usr/lib/python3.11/multiprocessing/pool.py", line 125 in worker
"""


def _track(pid: int) -> ProcessRun:
    return ProcessRun(pid=pid, ppid=1 if pid == 27988 else 27988, cmdline=("python", "torchfork.py"),
                      first_seen=0.0, last_seen=6.0, alive_at_stop=True, exit_code=None, stalled_for=4.1,
                      state="sleeping", wchan="futex_do_wait", threads=1, rss_peak=180 << 20,
                      killed_by_supervisor=True)


def _run(worker: Stack) -> RunRecord:
    forks = [{"event": "fork-child", "pid": pid, "ppid": 27988, "t": 2.8, "threads_at_fork": threads,
              "runtimes_at_fork": []} for pid, threads in ((27993, 3), (27994, 4))]
    return RunRecord(
        command=("python", "torchfork.py"), stop_reason=StopReason.HUNG, signal_received=None, root_pid=27988,
        exit_code=-15, duration=7.7, limits=Limits(hang_after=4.0),
        processes=(_track(27988), _track(27993), _track(27994)), events=list(forks), samples=[],
        peaks=Peaks({}, {}, {}, {}, None, ()),
        stacks={27988: Stack(PARENT, "py-spy", None), 27993: worker, 27994: worker},
        stdout="", stderr="", notes=())


def test_workers_waiting_in_libgomp_are_named_as_pytorchs_openmp_pool_with_both_fixes() -> None:
    diagnosis = diagnose(_run(Stack(WORKER, "py-spy", None)))
    assert diagnosis.verdict == Verdict.HUNG
    lines = diagnosis.explanation.splitlines()
    assert ("pids 27993, 27994 wait in PyTorch's OpenMP thread pool: in GNU OpenMP (libgomp.so.1), called by "
            "at::TensorIteratorBase::for_each (libtorch_cpu.so), in your code work (torchfork.py:6). They were forked "
            "at t=2.8 s from pid 27988, which had started that pool (3 to 4 native threads at the fork); the pool's "
            "threads do not exist in the children.") in lines
    assert ("pid 27988 waits for their results in Pool.map → ApplyResult.get → ApplyResult.wait "
            "(multiprocessing/pool.py:765), called from your code <module> (torchfork.py:14).") in lines
    assert hazards.FORK_AFTER_OPENMP.why in lines
    (fix,) = [line for line in lines if line.startswith("Fix: ")]
    assert 'multiprocessing.get_context("spawn")' in fix and "forkserver" in fix
    assert "`torch.set_num_threads(1)` in the parent before it forks" in fix
    # Not the generic wording, nor the fork child's copy of the parent's Pool line.
    assert hazards.MULTITHREADED_FORK.why not in lines and hazards.MULTITHREADED_FORK.fix_line not in lines
    assert "torchfork.py:13" not in diagnosis.explanation
    (cause,) = diagnosis.causes
    assert (cause.kind, cause.rule, cause.certainty, cause.frameworks, cause.parent, cause.processes) == (
        "fork-after-openmp", None, "observed", ("torch",), 27988, (27993, 27994))
    assert cause.fix == fix.removeprefix("Fix: ")


def test_without_native_frames_it_stays_a_fork_with_threads() -> None:
    # faulthandler's dump cannot show the OpenMP runtime: the generic cause, no guess.
    diagnosis = diagnose(_run(Stack(WORKER_FAULTHANDLER, "faulthandler", None)))
    assert [c.kind for c in diagnosis.causes] == ["multithreaded-fork"]
    assert "OpenMP" not in diagnosis.explanation


def test_the_runtime_and_its_owner_are_known_by_their_files() -> None:
    assert openmp_runtime.runtime_of("libgomp.so.1") == "GNU OpenMP"
    assert openmp_runtime.runtime_of("libgomp-a34b3233.so.1") == "GNU OpenMP"
    assert openmp_runtime.runtime_of("libtorch_cpu.so", "gomp_team_barrier_wait_end") == "GNU OpenMP"
    assert openmp_runtime.runtime_of("libc.so.6", "pthread_cond_wait") is None
    owner = openmp_runtime.owner_of("libtorch_cpu.so")
    assert owner is not None and owner.name == "PyTorch"
    assert openmp_runtime.owner_of("libpython3.11.so.1.0") is None


TORCH_FORK = """\
# A CPU op in the parent starts PyTorch's OpenMP pool; the fork Pool's workers then run ops of
# their own and never return. Modelled on pytorch/pytorch#17199 ("Deadlock with
# multiprocessing (using fork) and unittest"). argv[1] "one-thread": the parent goes down to
# one thread before it forks (the fix the probe gives).
import multiprocessing
import sys

import torch


def work(i):
    a = torch.ones(2000, 2000)
    return float((a @ a).sum())


if __name__ == "__main__":
    torch.set_num_threads(2)
    a = torch.ones(2000, 2000)
    print("parent", float((a @ a).sum()), flush=True)
    if sys.argv[1] == "one-thread":
        torch.set_num_threads(1)
    with multiprocessing.get_context("fork").Pool(2) as pool:
        print(pool.map(work, range(2)))
"""

# Only a stuck run reaches it: each run takes seconds.
TIMEOUT = 120


@functools.lru_cache(maxsize=1)
def _torch_missing() -> str | None:
    """Why this interpreter cannot run a PyTorch CPU op on OpenMP (None: it can)."""
    check = "import torch; assert 'OpenMP' in torch.__config__.parallel_info(), 'not an OpenMP build'"
    done = subprocess.run([PY, "-c", check], capture_output=True, text=True, timeout=120)
    if done.returncode == 0:
        return None
    last = (done.stderr.strip().splitlines() or ["failed"])[-1]
    return f"torch on OpenMP is not importable here ({last}); install the test extra"


def _supervise(tmp_path: Path, variant: str) -> tuple[int, dict[str, Any]]:
    missing = _torch_missing()
    if missing:
        pytest.skip(missing)
    source = script(tmp_path, "torchfork.py", TORCH_FORK)
    code, doc, _ = gpudoctor_json(["--timeout", str(TIMEOUT), "--hang-after", "4", "--", PY, str(source), variant],
                                  timeout=TIMEOUT + 60)
    return code, doc


@pytest.mark.slow
def test_a_real_pytorch_fork_pool_hangs_in_libgomp_and_is_named(tmp_path: Path, no_leftovers: str) -> None:
    code, doc = _supervise(tmp_path, "pool")
    assert (code, doc["verdict"], doc["stop_reason"]) == (1, "hung", "hung"), doc["explanation"]
    workers = [p for p in doc["processes"] if p["start"] == "fork"]
    if not any(p["stack_source"] == "py-spy" for p in workers):
        pytest.skip(f"py-spy could not read the native stacks here (ptrace not permitted?): {doc['notes']}")
    (cause,) = doc["causes"]
    assert (cause["kind"], cause["frameworks"]) == ("fork-after-openmp", ["torch"]), doc["explanation"]
    assert sorted(cause["processes"]) == sorted(p["pid"] for p in workers)
    line = "wait in PyTorch's OpenMP thread pool: in GNU OpenMP (libgomp"
    assert line in cause["evidence"][0] and "torchfork.py:12)" in cause["evidence"][0], cause["evidence"]
    assert "torch.set_num_threads(1)" in cause["fix"] and "spawn" in cause["fix"]
    assert running(p["pid"] for p in doc["processes"]) == []
    assert wait_gone(marked(no_leftovers), timeout=30) == []


@pytest.mark.slow
def test_the_fix_it_gives_works_one_thread_before_the_fork(tmp_path: Path) -> None:
    code, doc = _supervise(tmp_path, "one-thread")
    assert (code, doc["verdict"], doc["causes"]) == (0, "ok", []), doc["explanation"]
