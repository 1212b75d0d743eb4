"""A distributed job started with fewer rank processes than its world size, under the probe
(gloo on the CPU): the ranks that run wait in ``init_process_group``'s rendezvous for a
rank that never comes, and the probe must call it hung, name ``rank-missing-at-rendezvous``
with the world size, the ranks there and missing, the line each waits at, the launcher's
line and the fix; a rank that died before it joined is named with its exit; and a job
whose every rank runs, one held up before the rendezvous, must not get the cause.

Modelled on helboukkouri/character-bert-pretraining#4 ("Training script hangs at
torch.distributed.init_process_group": world_size 2, ``mp.spawn`` with one process) and
pytorch/pytorch#49846.

Nothing waits on a fixed sleep: the hang is the probe's own verdict after --hang-after
seconds in which no process made CPU progress (a rank importing torch is progress). The
deadlines given are bounds only a stuck run reaches.
"""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path
from typing import Any

import pytest

from gpudoctor import hazards
from tests.probe.helpers import gpudoctor_json, marked, running, script, wait_gone
from tests.probe.test_distributed import _needs_torch  # noqa: F401  (skips the module without torch)

PY = sys.executable
pytestmark = pytest.mark.slow

TIMEOUT = 120
HANG_AFTER = "4"

SPAWNED = """\
import os
import sys

import torch.distributed as dist
import torch.multiprocessing as mp

CONFIG = {"world_size": int(sys.argv[2])}


def train(rank, world_size, port):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = port
    if rank == 1 and sys.argv[4] == "held":
        import threading
        threading.Event().wait()  # HELD: a rank that runs but never reaches the rendezvous
    dist.init_process_group("gloo", rank=rank, world_size=world_size)  # INIT
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    nprocs = int(sys.argv[3])  # COUNT
    mp.spawn(train, args=(CONFIG["world_size"], sys.argv[1]), nprocs=nprocs)  # SPAWN
"""

# Ranks a script of the user's starts itself, each told its place by the environment (as a
# launcher does); rank 1 fails before it joins, and the script waits for rank 0 first.
LAUNCHED = """\
import os
import subprocess
import sys

if len(sys.argv) > 2:
    import torch.distributed as dist
    if os.environ["RANK"] == "1":
        raise FileNotFoundError("shard-1.bin")  # FAILS
    dist.init_process_group("gloo")  # INIT
    dist.destroy_process_group()
else:
    env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": sys.argv[1], "WORLD_SIZE": "2"}
    ranks = [subprocess.Popen([sys.executable, __file__, sys.argv[1], "rank"], env={**env, "RANK": str(r)})
             for r in range(2)]
    for p in ranks:
        p.wait()  # WAITS
"""


def _line(source: str, marker: str) -> int:
    return next(i for i, text in enumerate(source.splitlines(), start=1) if marker in text)


def _run(tmp_path: Path, source: str, *args: str) -> tuple[Path, dict[str, Any]]:
    path = script(tmp_path, "train.py", source)
    with socket.socket() as s:  # a free port for the group's store
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    code, doc, _ = gpudoctor_json(["--quiet", "--timeout", str(TIMEOUT), "--hang-after", HANG_AFTER, "--",
                                   PY, str(path), port, *args], env=env, cwd=tmp_path, timeout=TIMEOUT + 60)
    assert (code, doc["verdict"]) == (1, "hung"), doc["explanation"]
    return path, doc


def _nothing_left(doc: dict[str, Any], mark: str) -> None:
    assert running(p["pid"] for p in doc["processes"]) == []
    assert wait_gone(marked(mark), timeout=30) == []


def _missing(doc: dict[str, Any]) -> dict[str, Any]:
    found = [c for c in doc["causes"] if c["kind"] == hazards.RANK_MISSING_AT_RENDEZVOUS.cause]
    assert len(found) == 1, doc["causes"]
    assert found[0]["fix"] == hazards.RANK_MISSING_AT_RENDEZVOUS.fix
    assert hazards.RANK_MISSING_AT_RENDEZVOUS.fix_line in doc["explanation"].splitlines()
    return found[0]


def test_a_rank_spawn_never_started_is_named_with_the_world_size_and_the_launch_lines(
        tmp_path: Path, no_leftovers: str) -> None:
    path, doc = _run(tmp_path, SPAWNED, "2", "1", "go")
    cause = _missing(doc)
    root = next(p for p in doc["processes"] if p["start"] == "root")
    rank = next(p for p in doc["processes"] if p.get("rank") is not None)
    assert (rank["rank"], rank["world_size"]) == (0, 2)  # the world size spawn's function was given
    assert cause["parent"] == root["pid"] and cause["processes"] == [rank["pid"]]
    assert cause["certainty"] == "observed"
    assert cause["evidence"][0] == ("A rank that never comes: the job's world size is 2 (the `world_size` argument "
                                    "torch.multiprocessing.spawn passed to the function it runs), but only rank 0 "
                                    f"runs (pid {rank['pid']}).")
    assert cause["evidence"][1] == (
        f"Rank 1 was never started: torch.multiprocessing.spawn (pid {root['pid']}) started 1 process, from your "
        f"code <module> ({path.name}:{_line(SPAWNED, '# SPAWN')}), how many from "
        f"{path.name}:{_line(SPAWNED, '# COUNT')}: nprocs = int(sys.argv[3]).")
    assert cause["evidence"][2].startswith(f"Rank 0 waits in `init_process_group` at "
                                           f"{path.name}:{_line(SPAWNED, '# INIT')}, called from your code, for the "
                                           "missing rank to join."), cause["evidence"]
    assert "Distributed job: 2 ranks, launched by torch.multiprocessing.spawn" in doc["explanation"]
    _nothing_left(doc, no_leftovers)


def test_a_rank_that_died_before_the_rendezvous_is_named_with_its_exit(tmp_path: Path, no_leftovers: str) -> None:
    path, doc = _run(tmp_path, LAUNCHED)
    cause = _missing(doc)
    ranks = {p["rank"]: p for p in doc["processes"] if p.get("rank") is not None}
    assert sorted(ranks) == [0, 1]
    assert cause["evidence"][0] == ("A rank that never comes: the job's world size is 2 (WORLD_SIZE in the "
                                    f"environment), but only rank 0 runs (pid {ranks[0]['pid']}).")
    died = cause["evidence"][1]
    assert died.startswith(f"Rank 1 (pid {ranks[1]['pid']}) ended before it joined: exited with status 1"), died
    assert "FileNotFoundError" in died and f"{path.name}:{_line(LAUNCHED, '# FAILS')}" in died, died
    assert f"`init_process_group` at {path.name}:{_line(LAUNCHED, '# INIT')}" in cause["evidence"][2]
    assert not any("never started" in line for line in cause["evidence"])
    _nothing_left(doc, no_leftovers)


def test_a_rank_that_runs_but_is_held_before_the_rendezvous_is_no_missing_rank(
        tmp_path: Path, no_leftovers: str) -> None:
    _, doc = _run(tmp_path, SPAWNED, "2", "2", "held")
    assert hazards.RANK_MISSING_AT_RENDEZVOUS.cause not in {c["kind"] for c in doc["causes"]}, doc["causes"]
    assert "A rank that never comes" not in doc["explanation"]
    _nothing_left(doc, no_leftovers)
