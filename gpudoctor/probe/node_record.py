"""One node's record of a distributed job: what ``gpudoctor report`` merges.

Under SLURM (``srun gpudoctor probe --record DIR -- torchrun ...``) each machine's probe
sees only its own part of the job. ``--record DIR`` writes, besides the usual report, a
file ``DIR/<host>-<pid>.json`` holding everything a merge needs: the host, the wall
clock at the run's t=0 (every ``t`` of the record is seconds from it), the job's
identity, and the ``--json`` document (verdict, causes, processes with their ranks,
exits and last stacks, events, samples), plus one entry per rank with what its node
already worked out from the stacks: where it waited (the collective, the user's line,
the rank test around it), whether and when it failed, and whether gpudoctor stopped it.
Read from the stacks here, on the machine whose source files the stacks name, the
merge needs no access to them.

The file is written atomically (a temporary file in DIR, then renamed), so a reader
never sees half of it: a crashed node's record is missing, never truncated.
"""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpudoctor.errors import GpudoctorError
from gpudoctor.probe import explain_ranks, failures
from gpudoctor.probe.causes import stuck_processes
from gpudoctor.probe.diagnosis import Diagnosis, ProcessVerdict
from gpudoctor.probe.record import RunRecord
from gpudoctor.probe.verdicts import Verdict

# What tells a record file from any other JSON file, and the version of its layout
# beyond the ``--json`` document it embeds (which keeps its own ``schema_version``).
# It grows only when a key changes meaning or is removed; keys are added freely.
RECORD_KIND = "gpudoctor-node-record"
RECORD_VERSION = 1
# The batch system's job, read from the probe's own environment (srun sets it).
_JOB_VARIABLES = ("SLURM_JOB_ID", "SLURM_STEP_ID", "PBS_JOBID", "LSB_JOBID")


def check_directory(path: str) -> Path:
    """Create ``path`` if missing and check a record can be written there, before the run."""
    target = Path(path)
    if target.exists() and not target.is_dir():
        raise GpudoctorError(f"--record {path}: not a directory")
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise GpudoctorError(f"--record {path}: cannot create it: {error.strerror or error}") from None
    if not os.access(target, os.W_OK | os.X_OK):
        raise GpudoctorError(f"--record {path}: directory is not writable")
    return target


def _host() -> str:
    return socket.gethostname() or "localhost"


def file_name(host: str, pid: int) -> str:
    """``<host>-<pid>.json``, the host name kept to characters safe in a file name."""
    return f"{re.sub(r'[^A-Za-z0-9._-]', '_', host)[:64]}-{pid}.json"


def _place(place: explain_ranks.Place | None, source: str) -> dict[str, Any] | None:
    if place is None:
        return None
    c = place.condition
    condition = None if c is None else {"text": c.text, "line": c.line, "in_else": c.in_else, "at": c.at,
                                          "exits": c.exits}
    return {"collective": place.collective, "function": place.function, "at": place.at,
            "condition": condition, "from": source}


def _where(run: RunRecord, p: ProcessVerdict) -> dict[str, Any] | None:
    """Where a rank was: from its last stack, else from the traceback of its exception
    (a collective that raised when a peer went away is where it waited)."""
    if p.stack:
        return _place(explain_ranks.place(p), "stack")
    error = failures.raised(run.events).get(p.pid)
    if error is None:
        return None
    frames = [(f.function, f"{f.path}:{f.line}") for f in reversed(error.frames)]
    return _place(explain_ranks.place_in(p, frames), "exception")


def _ranks(run: RunRecord, diagnosis: Diagnosis) -> list[dict[str, Any]]:
    """One entry per rank: its place, its failure, how it ended."""
    judged = list(diagnosis.processes)
    stuck, _ = stuck_processes(run, diagnosis.verdict, judged)
    ours = {t.pid for t in run.processes if t.killed_by_supervisor}
    jobs = {t.pid: t.rank.job for t in run.processes if t.rank is not None}
    found = []
    for p in explain_ranks.ranks_of(judged):
        failed = p.pid not in ours and (p.verdict in (Verdict.CRASHED, Verdict.OOM) or (
            p.verdict == Verdict.KILLED and p.exit_code == -9))
        stopped = (p.exit_code is not None and p.exit_code < 0 and p.pid not in ours
                   and not failures.is_failure(p.exit_code))
        found.append({
            "pid": p.pid, "rank": p.rank, "local_rank": p.local_rank, "world_size": p.world_size,
            "job": jobs.get(p.pid),
            "waiting": p.pid in stuck,  # hung, or idle when the run was cut short
            "failed": failed,
            "failed_at": explain_ranks.failed_at(run, p.pid) if failed else None,
            "traceback": list(explain_ranks.traceback(run, p.pid)) if failed else [],
            "stopped_from_outside": stopped,
            "stopped_by_gpudoctor": p.pid in ours,
            "place": _where(run, p),
        })
    return found


def build(run: RunRecord, diagnosis: Diagnosis, document: dict[str, Any]) -> dict[str, Any]:
    """The record of this node: ``document`` (``render_run.to_json``'s) and what a merge adds."""
    launcher = next((p for p in diagnosis.processes if p.launches_ranks), None)
    return {
        "kind": RECORD_KIND,
        "record_version": RECORD_VERSION,
        "host": _host(),
        "probe_pid": os.getpid(),
        # The wall clock at t=0 of the run: the times of every node of a job line up on it.
        "started_at": run.started_at,
        "batch_job": " ".join(f"{name}={os.environ[name]}" for name in _JOB_VARIABLES if os.environ.get(name))
        or None,
        "launcher": None if launcher is None else {"pid": launcher.pid,
                                                   "name": explain_ranks.launcher_name(launcher)},
        "ranks": _ranks(run, diagnosis),
        "run": document,
    }


def hold(directory: Path) -> Callable[[dict[int, int | None], float], None]:
    """What a node's probe does on a hang, once its stacks are dumped: leave a mark in the
    records' folder, then wait until every node of the job has left one (or ``most``
    seconds). Stopping this node's ranks wakes the other nodes' ranks (their collective
    fails), so a node that stopped first would leave the others dumping ranks that are
    already on their way out. The number of nodes is the job's world size over this node's
    ranks; marks older than the run's start (``most`` earlier, for clocks a little apart)
    are another run's."""
    import math
    import time

    started = time.time()
    mark = directory / f".{file_name(socket.gethostname(), os.getpid())[:-5]}.hung"

    def wait(sizes: dict[int, int | None], most: float) -> None:
        here = [size for size in sizes.values() if size is not None]
        try:
            mark.touch()
        except OSError:
            return  # (the record itself will say why the folder cannot be written)
        if not here:
            return
        nodes = math.ceil(max(here) / len(here))
        deadline = time.monotonic() + most
        while time.monotonic() < deadline:
            try:
                marks = [m for m in directory.glob(".*.hung") if m.stat().st_mtime >= started - most]
            except OSError:
                return
            if len(marks) >= nodes:
                return
            time.sleep(0.1)  # (the other nodes' marks are what is waited on; ``most`` bounds it)

    return wait


def clear_mark(directory: Path) -> None:
    """Remove this probe's hang mark (``hold``) once its record is written: a folder used
    again must not count it for a later run. (A node that marks before this one's wait ends
    has seen it; one that marks after waits its own bound.)"""
    mark = directory / f".{file_name(socket.gethostname(), os.getpid())[:-5]}.hung"
    try:
        mark.unlink(missing_ok=True)
    except OSError:
        pass


def write(directory: Path, record: dict[str, Any]) -> Path:
    """Write ``record`` into ``directory`` atomically; return its path."""
    import json

    from gpudoctor.output_file import write_text_file

    target = directory / file_name(record["host"], record["probe_pid"])
    try:
        write_text_file(target, json.dumps(record, indent=1, default=str) + "\n")
    except OSError as error:
        raise GpudoctorError(f"--record {directory}: cannot write {target.name}: {error.strerror or error}") from None
    return target
