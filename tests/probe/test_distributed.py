"""Real distributed jobs under the probe: two ranks started by torchrun on the CPU (gloo),
failing the ways distributed jobs fail, and the probe telling them as one story: which
rank waits in which collective at which line, which rank is elsewhere and under which
rank test, which rank failed first.

Nothing waits on a fixed sleep. A hang is the probe's own verdict after --hang-after
seconds in which no process of the tree made CPU progress: the ranks block for ever (a
``threading.Event().wait()``, a collective the other rank never calls), so the verdict
comes however slow the machine is; a loaded machine only makes the ranks' import of
torch slower, and a process that computes is never idle. A failed rank ends the job by
itself (torchrun stops the other rank). The deadlines given are bounds only a stuck run
reaches.

torch is never imported in the test process: whether it can run a gloo job is asked of
a subprocess once, and each test is skipped with the reason when it cannot.
"""

from __future__ import annotations

import functools
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gpudoctor import hazards
from gpudoctor.knowledge.distributed_runtime import MISMATCH_CHECK, TIMEOUT_NOTE
from tests.probe.helpers import gpudoctor_json, marked, running, script, wait_gone

PY = sys.executable
pytestmark = pytest.mark.slow

# Only a stuck run reaches these: each job takes seconds.
TIMEOUT = 120
# Long enough that two ranks waiting on each other's TCP connection during the rendezvous
# never look hung (one of them is importing torch, which is CPU progress), short enough to
# keep each hung job under about ten seconds.
HANG_AFTER = "4"


@functools.lru_cache(maxsize=1)
def _torch_missing() -> str | None:
    """Why this interpreter cannot run a gloo job (None: it can)."""
    probe = "import torch.distributed as d; assert d.is_available() and d.is_gloo_available(), 'no gloo'"
    done = subprocess.run([PY, "-c", probe], capture_output=True, text=True, timeout=120)
    if done.returncode == 0:
        return None
    last = (done.stderr.strip().splitlines() or ["failed"])[-1]
    return f"torch with gloo is not importable here ({last}); install the test extra"


@pytest.fixture(autouse=True)
def _needs_torch() -> None:
    missing = _torch_missing()
    if missing:
        pytest.skip(missing)


def _line(source: str, marker: str) -> int:
    """The 1-based line of ``source`` that holds ``marker``."""
    return next(i for i, text in enumerate(source.splitlines(), start=1) if marker in text)


def _torchrun(tmp_path: Path, name: str, source: str, hang_after: str = HANG_AFTER) -> tuple[int, dict[str, Any]]:
    path = script(tmp_path, name, source)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    # --standalone: a rendezvous on a free port of localhost (--master-port 0 leaves the
    # ranks connecting to port 0 for ever).
    code, doc, _ = gpudoctor_json(["--quiet", "--timeout", str(TIMEOUT), "--hang-after", hang_after, "--",
                                   PY, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                                   str(path)], env=env, cwd=tmp_path, timeout=TIMEOUT + 60)
    return code, doc


def _ranks(doc: dict[str, Any]) -> tuple[dict[str, Any], dict[int, dict[str, Any]]]:
    """The launcher and the ranks by rank, after checking every process's labels."""
    root = next(p for p in doc["processes"] if p["start"] == "root")
    ranks = {p["rank"]: p for p in doc["processes"] if p.get("rank") is not None}
    assert root["launches_ranks"] is True and root["rank"] is None
    assert sorted(ranks) == [0, 1]
    assert [(p["local_rank"], p["world_size"], p["ppid"]) for _, p in sorted(ranks.items())] == [
        (0, 2, root["pid"]), (1, 2, root["pid"])]
    return root, ranks


def _nothing_left(doc: dict[str, Any], mark: str) -> None:
    assert running(p["pid"] for p in doc["processes"]) == []
    assert wait_gone(marked(mark), timeout=30) == []


BARRIER_SKIPPED = """\
import threading

import torch.distributed as dist


def save_checkpoint():
    threading.Event().wait()  # SAVE: blocks for ever, as a stuck write to a full disk would


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    if rank == 0:  # TEST
        save_checkpoint()  # CALL
    else:
        dist.barrier()  # BARRIER
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
"""


def test_a_barrier_that_rank_0_skips_is_one_verdict_with_the_ranks_lines_and_the_rank_test(
        tmp_path: Path, no_leftovers: str) -> None:
    code, doc = _torchrun(tmp_path, "skipped.py", BARRIER_SKIPPED)
    assert (code, doc["verdict"], doc["stop_reason"]) == (1, "hung", "hung"), doc["explanation"]
    root, ranks = _ranks(doc)
    lines = doc["explanation"].splitlines()
    test, call, save, barrier = (_line(BARRIER_SKIPPED, m) for m in ("# TEST", "# CALL", "# SAVE", "# BARRIER"))
    assert f"Distributed job: 2 ranks, launched by torchrun (pid {root['pid']})." in lines
    assert (f"Rank 1 waits in `barrier` at skipped.py:{barrier} in the `else` of `if rank == 0:` (line {test})"
            f"; rank 0 is in `save_checkpoint` at skipped.py:{save}, called at skipped.py:{call} "
            f"under `if rank == 0:` (line {test}).") in lines, lines
    assert any(line.startswith("Rank 1 waits for rank 0, which never reaches `barrier`.") for line in lines)
    assert TIMEOUT_NOTE in lines and hazards.COLLECTIVE_NOT_REACHED.fix_line in lines
    # The ranks' places replace their "Blocked in" lines.
    assert not any(line.startswith("Blocked in") for line in lines), lines
    assert [(c["kind"], c["certainty"], c["parent"], c["processes"]) for c in doc["causes"]] == [
        ("collective-not-reached", "observed", root["pid"], [ranks[0]["pid"]])]
    assert [ranks[r]["verdict"] for r in (0, 1)] == ["hung", "hung"]
    _nothing_left(doc, no_leftovers)


MISMATCHED = """\
import torch
import torch.distributed as dist


def main():
    dist.init_process_group("gloo")
    if dist.get_rank() == 0:
        dist.all_reduce(torch.ones(4))  # ALL_REDUCE
    else:
        dist.barrier()  # BARRIER
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
"""


def test_ranks_in_different_collectives_are_named_with_their_collectives(tmp_path: Path, no_leftovers: str) -> None:
    # gloo neither raises nor times out here (its timeout is 30 minutes): both ranks wait.
    code, doc = _torchrun(tmp_path, "mismatched.py", MISMATCHED)
    assert (code, doc["verdict"], doc["stop_reason"]) == (1, "hung", "hung"), doc["explanation"]
    root, ranks = _ranks(doc)
    lines = doc["explanation"].splitlines()
    test = _line(MISMATCHED, "if dist.get_rank() == 0:")
    all_reduce, barrier = _line(MISMATCHED, "# ALL_REDUCE"), _line(MISMATCHED, "# BARRIER")
    assert (f"Rank 0 waits in `all_reduce` at mismatched.py:{all_reduce} under `if dist.get_rank() == 0:` "
            f"(line {test}); rank 1 waits in `barrier` at mismatched.py:{barrier} in the `else` of "
            f"`if dist.get_rank() == 0:` (line {test}).") in lines, lines
    assert f"{hazards.COLLECTIVES_MISMATCHED.why} {MISMATCH_CHECK}" in lines
    assert hazards.COLLECTIVES_MISMATCHED.fix_line in lines
    assert [(c["kind"], c["certainty"], c["parent"], c["processes"]) for c in doc["causes"]] == [
        ("mismatched-collectives", "observed", root["pid"], [ranks[0]["pid"], ranks[1]["pid"]])]
    _nothing_left(doc, no_leftovers)


# Ranks started by torch.multiprocessing.spawn: no launcher variable names them; the index
# spawn gives each process (its first argument to ``train``) is the rank. Uneven shards: rank 0
# all-reduces a third batch while rank 1, done after two, waits in the final barrier.
SPAWNED = """\
import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def train(rank, world_size, port):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = port
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    for step in range(3 if rank == 0 else 2):
        dist.all_reduce(torch.ones(4))  # ALL_REDUCE
    dist.barrier()  # BARRIER
    dist.destroy_process_group()


if __name__ == "__main__":
    mp.spawn(train, args=(2, sys.argv[1]), nprocs=2)
"""


def test_ranks_torch_multiprocessing_spawn_started_are_labelled_by_its_index(tmp_path: Path,
                                                                             no_leftovers: str) -> None:
    path = script(tmp_path, "spawned.py", SPAWNED)
    with socket.socket() as s:  # a free port for the group's store
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    code, doc, _ = gpudoctor_json(["--quiet", "--timeout", str(TIMEOUT), "--hang-after", HANG_AFTER, "--",
                                   PY, str(path), port], env=env, cwd=tmp_path, timeout=TIMEOUT + 60)
    assert (code, doc["verdict"]) == (1, "hung"), doc["explanation"]
    root = next(p for p in doc["processes"] if p["start"] == "root")
    ranks = {p["rank"]: p for p in doc["processes"] if p.get("rank") is not None}
    assert sorted(ranks) == [0, 1] and root["launches_ranks"] is True
    assert [(p["local_rank"], p["world_size"], p["ppid"]) for _, p in sorted(ranks.items())] == [
        (0, 2, root["pid"]), (1, 2, root["pid"])]
    lines = doc["explanation"].splitlines()
    assert f"Distributed job: 2 ranks, launched by torch.multiprocessing.spawn (pid {root['pid']})." in lines, lines
    all_reduce, barrier = _line(SPAWNED, "# ALL_REDUCE"), _line(SPAWNED, "# BARRIER")
    assert (f"Rank 0 waits in `all_reduce` at spawned.py:{all_reduce}; rank 1 waits in `barrier` at "
            f"spawned.py:{barrier}.") in lines, lines
    assert [(c["kind"], c["processes"]) for c in doc["causes"]] == [
        ("mismatched-collectives", [ranks[0]["pid"], ranks[1]["pid"]])]
    _nothing_left(doc, no_leftovers)


RANK_FAILS = """\
import os
import signal
import sys

import torch.distributed as dist


def load_shard(rank):
    if sys.argv[1] == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    raise FileNotFoundError(f"shard-{rank}.pt")  # RAISE


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    if rank == 1:
        load_shard(rank)  # CALL
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
"""


@pytest.mark.parametrize("how", ["raise", "kill"])
def test_the_rank_that_failed_first_is_the_cause_not_the_sigterm_of_the_others(
        tmp_path: Path, how: str, no_leftovers: str) -> None:
    # Not a hang: torchrun's agent stops rank 0 as soon as rank 1 has failed.
    path = script(tmp_path, "shards.py", RANK_FAILS)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    code, doc, _ = gpudoctor_json(["--quiet", "--timeout", str(TIMEOUT), "--", PY, "-m", "torch.distributed.run",
                                   "--standalone", "--nproc-per-node", "2", str(path), how],
                                  env=env, cwd=tmp_path, timeout=TIMEOUT + 60)
    assert (code, doc["verdict"], doc["stop_reason"]) == (1, "crashed", "exited"), doc["explanation"]
    root, ranks = _ranks(doc)
    lines = doc["explanation"].splitlines()
    dead = ranks[1]
    first = f"Rank 1 (pid {dead['pid']}) failed first at t="
    assert lines[0].startswith(first), lines
    if how == "raise":
        assert dead["exit_code"] == 1
        assert lines[0].endswith(f"exited with status 1: FileNotFoundError: shard-1.pt, from your code load_shard "
                                 f"({path}:{_line(RANK_FAILS, '# RAISE')}).")
        assert f"main ({path}:{_line(RANK_FAILS, '# CALL')}) → load_shard" in lines[2]
    else:
        assert dead["exit_code"] == -9 and "killed by SIGKILL (exit -9), not by gpudoctor" in lines[0]
    # Rank 0 waited in the barrier; the agent stopped it with SIGTERM (or gloo raised first
    # when the peer's connection closed): the effect, never the cause.
    other = ranks[0]
    if other["exit_code"] == -15:
        assert any(line.startswith(f"Rank 0 (pid {other['pid']}) was stopped with SIGTERM after it, most likely by "
                                   f"the launcher (pid {root['pid']}): torchrun stops the other ranks")
                   for line in lines), lines
        assert other["verdict"] == "killed"
    else:
        assert any(line.startswith(f"Rank 0 (pid {other['pid']}) failed after it") for line in lines), lines
    assert hazards.RANK_FAILED.fix_line in lines
    assert [(c["kind"], c["certainty"], c["parent"], c["processes"][0]) for c in doc["causes"]][:1] == [
        ("rank-failed", "observed", root["pid"], dead["pid"])]
    _nothing_left(doc, no_leftovers)


# An evaluation that all-reduces a metric on rank 0 only, while rank 1 goes on to the next
# step, whose all-reduce is of another size: gloo pairs the two and aborts rank 0 ("Received
# data size doesn't match expected size. Is there a distributed collective mismatch in your
# code?", torch 2.13), a SIGABRT.
EVAL_ON_RANK_0 = """\
import torch
import torch.distributed as dist


def evaluate():
    metric = torch.zeros(1)
    dist.all_reduce(metric)  # EVAL


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    grads = torch.zeros(1000)
    for step in range(3):
        dist.all_reduce(grads)
        if rank == 0 and step == 1:  # TEST
            evaluate()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
"""


def test_a_collective_mismatch_the_backend_aborts_on_is_the_cause_before_the_rank_that_died(
        tmp_path: Path, no_leftovers: str) -> None:
    path = script(tmp_path, "evaluate.py", EVAL_ON_RANK_0)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    code, doc, _ = gpudoctor_json(["--quiet", "--timeout", str(TIMEOUT), "--hang-after", HANG_AFTER, "--", PY, "-m",
                                   "torch.distributed.run", "--standalone", "--nproc-per-node", "2", str(path)],
                                  env=env, cwd=tmp_path, timeout=TIMEOUT + 60)
    kinds = [c["kind"] for c in doc["causes"]]
    if "mismatched-collectives" not in kinds:
        pytest.skip(f"this torch's gloo did not abort on the mismatch ({doc['verdict']}: {kinds})")
    assert code == 1 and kinds[0] == "mismatched-collectives" and doc["causes"][0]["rule"] == "GD501"
    assert "TensorFlow" not in doc["explanation"]
    _nothing_left(doc, no_leftovers)
