"""Tell the ranks of a distributed job apart: which process is rank R of W, and which one
launched them.

A launcher gives each rank its place in the job through environment variables, read
here from ``/proc/PID/environ`` of the supervised processes (their environment as it was
when they exec'd). torchrun, ``accelerate launch`` and ``deepspeed`` set ``RANK``,
``LOCAL_RANK`` and ``WORLD_SIZE``; Open MPI sets ``OMPI_COMM_WORLD_*``, MPICH and Intel
MPI ``PMI_*``, Slurm's ``srun`` ``SLURM_*``. The first family present wins: a torchrun
started by ``srun`` has ``SLURM_PROCID`` itself, and its ranks have both.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gpudoctor.knowledge.distributed import WORLD_NAMES
from gpudoctor.knowledge.processes import (
    SPAWN_LAUNCHER_ARGS,
    SPAWN_LAUNCHER_INDEX,
    SPAWN_LAUNCHER_NAME,
    SPAWN_LAUNCHER_TARGET,
)

# (rank, local rank, world size) variables of each launcher family, the first present wins.
_FAMILIES = (
    ("RANK", "LOCAL_RANK", "WORLD_SIZE"),
    ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_SIZE"),
    ("PMI_RANK", "MPI_LOCALRANKID", "PMI_SIZE"),
    ("SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS"),
)
# What names the job a rank belongs to, the same on every node of it: the rendezvous's
# run id and the address of the store every rank connects to (torchrun sets both), or
# the batch system's job. ``gpudoctor report`` tells records of different jobs apart by it.
_JOB = ("TORCHELASTIC_RUN_ID", "MASTER_ADDR", "MASTER_PORT", "SLURM_JOB_ID", "OMPI_MCA_ess_base_jobid")
_NAMES = frozenset([*(name for family in _FAMILIES for name in family), *_JOB])
# More than this is no environment a launcher wrote: read no further.
_ENVIRON_LIMIT = 1 << 20


@dataclass(frozen=True)
class Rank:
    """A process's place in a distributed job, as its launcher set it."""

    rank: int
    local_rank: int | None
    world_size: int | None
    source: str  # the variable it came from ("RANK", "SLURM_PROCID")
    # The job's identity from the same environment ("MASTER_ADDR=10.0.0.1 MASTER_PORT=29500
    # TORCHELASTIC_RUN_ID=none"); None when none of those variables is set.
    job: str | None = None

    def label(self) -> str:
        """"rank 1/4 (local 1)"."""
        return label(self.rank, self.local_rank, self.world_size)


def _number(text: str | None) -> int | None:
    if text is None or not text.strip().isdigit():
        return None
    return int(text.strip())


def from_environ(environ: Mapping[str, str]) -> Rank | None:
    """The rank an environment gives its process, or None outside a distributed job."""
    for rank, local, world in _FAMILIES:
        number = _number(environ.get(rank))
        if number is not None:
            return Rank(number, _number(environ.get(local)), _number(environ.get(world)), rank, job_of(environ))
    return None


def spawned(events: Sequence[Mapping[str, object]]) -> dict[int, Rank]:
    """The ranks of processes ``torch.multiprocessing.spawn`` started, which no launcher's
    variable names: its index of each (the bootstrap's record of the process's target and
    int arguments), among the processes it started from the same parent; the world size is
    the argument its function takes as one (``train(rank, world_size)``) when the bootstrap
    recorded it, else the number of processes started."""
    made = [e for e in events if e.get("event") == "process" and e.get("target") == SPAWN_LAUNCHER_TARGET]
    out: dict[int, Rank] = {}
    for event in made:
        pid, parent = event.get("pid"), event.get("ppid")
        ints = event.get("ints")
        index = dict(tuple(pair) for pair in ints if isinstance(pair, list) and len(pair) == 2).get(
            SPAWN_LAUNCHER_INDEX) if isinstance(ints, list) else None
        if isinstance(pid, int) and isinstance(index, int):
            world = spawn_world_size(event) or sum(1 for e in made if e.get("ppid") == parent)
            out[pid] = Rank(index, index, world, SPAWN_LAUNCHER_NAME)
    return out


def spawn_arguments(event: Mapping[str, object]) -> dict[str, int]:
    """The int arguments the function of a spawned process was given, by parameter name
    (``{"world_size": 2}`` for ``train(rank, world_size)`` with ``args=(2,)``), from the
    bootstrap's record of the process (its function's parameters, its tuple's ints)."""
    params, nested = event.get("params"), event.get("nested")
    if not isinstance(params, list) or not isinstance(nested, list):
        return {}
    out: dict[str, int] = {}
    for item in nested:
        if isinstance(item, list) and len(item) == 3 and item[0] == SPAWN_LAUNCHER_ARGS and \
                isinstance(item[1], int) and isinstance(item[2], int) and 0 <= item[1] + 1 < len(params):
            out[str(params[item[1] + 1])] = item[2]
    return out


def spawn_world_size(event: Mapping[str, object]) -> int | None:
    """The world size a spawned process's function was given, when a parameter names it."""
    return next((value for name, value in spawn_arguments(event).items() if name in WORLD_NAMES and value > 0), None)


def job_of(environ: Mapping[str, str]) -> str | None:
    """The job an environment belongs to, in words that compare (None: nothing says)."""
    found = [f"{name}={environ[name]}" for name in _JOB if environ.get(name)]
    return " ".join(found) or None


def read(pid: int) -> Rank | None:
    """The rank of a live process from ``/proc/PID/environ``; None when it has none or the
    file cannot be read (another user's process, one that is gone)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            data = f.read(_ENVIRON_LIMIT)
    except OSError:
        return None
    found: dict[str, str] = {}
    for entry in data.split(b"\0"):
        name, _, value = entry.partition(b"=")
        key = name.decode(errors="replace")
        if key in _NAMES:
            found[key] = value.decode(errors="replace")
    return from_environ(found)


def label(rank: int, local_rank: int | None, world_size: int | None) -> str:
    """"rank 1/4 (local 1)", "rank 1" when the rest is not known."""
    text = f"rank {rank}" + (f"/{world_size}" if world_size is not None else "")
    return text + (f" (local {local_rank})" if local_rank is not None else "")


def spans(numbers: Sequence[int]) -> str:
    """Say a set of ranks briefly: "rank 0", "ranks 1–3", "ranks 0, 2–3"."""
    ordered = sorted(set(numbers))
    parts: list[str] = []
    start = previous = ordered[0] if ordered else 0
    for number in [*ordered[1:], None]:
        if number is not None and number == previous + 1:
            previous = number
            continue
        parts.append(str(start) if start == previous else f"{start}–{previous}" if previous > start + 1
                     else f"{start}, {previous}")
        if number is not None:
            start = previous = number
    return f"{'rank' if len(ordered) == 1 else 'ranks'} {', '.join(parts)}"
