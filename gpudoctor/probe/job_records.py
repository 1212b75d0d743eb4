"""Read the records of a job's nodes (``gpudoctor probe --record DIR``) for ``gpudoctor report``.

Every file ``*.json`` of DIR (not a hidden one: the temporary file of a record being
written starts with a dot) must be a complete record of one job: anything else is a
``GpudoctorError`` that names the file and what is wrong with it, in one line, so that
the report is never built from part of the evidence without saying so. Other files
(an HTML report written beside them) are left alone.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpudoctor.errors import GpudoctorError
from gpudoctor.probe.diagnosis import Diagnosis, ProcessVerdict
from gpudoctor.probe.explain_ranks import Condition
from gpudoctor.probe.node_record import RECORD_KIND, RECORD_VERSION


@dataclass(frozen=True)
class RankEntry:
    """One rank as its node recorded it."""

    process: ProcessVerdict
    job: str | None
    waiting: bool
    failed: bool
    failed_at: float | None  # seconds from its node's t=0
    traceback: tuple[str, ...]
    stopped_from_outside: bool
    stopped_by_gpudoctor: bool
    collective: str | None
    function: str | None
    at: str | None
    condition: Condition | None
    has_place: bool

    @property
    def rank(self) -> int:
        return self.process.rank if self.process.rank is not None else -1


@dataclass(frozen=True)
class Node:
    """One node's record, read and checked."""

    path: Path
    host: str
    probe_pid: int
    started_at: float  # the wall clock at its t=0
    batch_job: str | None
    launcher_pid: int | None
    launcher_name: str | None
    ranks: tuple[RankEntry, ...]
    diagnosis: Diagnosis
    run: dict[str, Any]  # the embedded ``--json`` document
    name: str = ""  # how the report names it: its host, or host[pid] where hosts repeat

    @property
    def duration(self) -> float:
        value = self.run.get("duration")
        return float(value) if isinstance(value, (int, float)) else 0.0

    @property
    def stopped_at(self) -> float | None:
        """The wall clock at which gpudoctor began to stop this node's tree (None: it ended
        by itself)."""
        if self.run.get("stop_reason") in (None, "exited"):
            return None
        at = self.run.get("stop_at")
        return self.started_at + (float(at) if isinstance(at, (int, float)) else self.duration)

    @property
    def job(self) -> str | None:
        """What names this node's job: the batch system's job, else its ranks' rendezvous."""
        return self.batch_job or next((r.job for r in self.ranks if r.job), None)


def _bad(path: Path, why: str) -> GpudoctorError:
    return GpudoctorError(f"{path}: {why}")


def _condition(data: object) -> Condition | None:
    if not isinstance(data, Mapping):
        return None
    return Condition(str(data.get("text", "")), int(data.get("line", 0)), bool(data.get("in_else")),
                     str(data.get("at", "")), bool(data.get("exits")))


def _rank(data: Mapping[str, Any], processes: Mapping[int, ProcessVerdict]) -> RankEntry:
    pid = int(data["pid"])
    process = processes.get(pid) or ProcessVerdict.from_json({"pid": pid, "verdict": "unknown"})
    place = data.get("place") if isinstance(data.get("place"), Mapping) else None
    failed_at = data.get("failed_at")
    return RankEntry(
        process=process,
        job=data.get("job"),
        waiting=bool(data.get("waiting")),
        failed=bool(data.get("failed")),
        failed_at=float(failed_at) if isinstance(failed_at, (int, float)) else None,
        traceback=tuple(str(x) for x in data.get("traceback") or ()),
        stopped_from_outside=bool(data.get("stopped_from_outside")),
        stopped_by_gpudoctor=bool(data.get("stopped_by_gpudoctor")),
        collective=place.get("collective") if place else None,
        function=place.get("function") if place else None,
        at=place.get("at") if place else None,
        condition=_condition(place.get("condition")) if place else None,
        has_place=place is not None,
    )


def read_node(path: Path) -> Node:
    """Read one record; raise ``GpudoctorError`` naming the file when it is not a whole one."""
    from gpudoctor.input_file import read_regular_text

    try:  # (a named pipe or a device in the folder is refused, never waited on)
        text = read_regular_text(path)
    except (OSError, ValueError) as error:
        raise _bad(path, f"cannot read it: {getattr(error, 'strerror', None) or error}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        what = "truncated" if error.pos >= len(text.rstrip()) else "not JSON"
        raise _bad(path, f"{what} ({error.msg} at line {error.lineno}): not a complete gpudoctor record") from None
    if not isinstance(data, dict) or data.get("kind") != RECORD_KIND:
        raise _bad(path, "not a gpudoctor record (written by gpudoctor probe --record DIR)")
    version = data.get("record_version")
    if not isinstance(version, int) or version > RECORD_VERSION:
        raise _bad(path, f"a record of version {version!r}, newer than this gpudoctor reads ({RECORD_VERSION}): "
                         "update gpudoctor")
    try:
        run = data["run"]
        _check_types(run)
        diagnosis = Diagnosis.from_json(run)
        processes = {p.pid: p for p in diagnosis.processes}
        launcher = data.get("launcher") or {}
        return Node(
            path=path,
            host=str(data["host"]),
            probe_pid=int(data["probe_pid"]),
            started_at=float(data["started_at"]),
            batch_job=data.get("batch_job"),
            launcher_pid=launcher.get("pid"),
            launcher_name=launcher.get("name"),
            ranks=tuple(_rank(r, processes) for r in data.get("ranks") or ()),
            diagnosis=diagnosis,
            run=run,
        )
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        raise _bad(path, f"an incomplete gpudoctor record ({type(error).__name__}: {error})") from None


# What the report reads of a node's run, with the type each must have (items too).
_RUN_FIELDS: dict[str, tuple[type, type | None]] = {
    "command": (list, str), "explanation": (str, None), "verdict": (str, None), "events": (list, dict),
    "samples": (list, dict), "processes": (list, dict), "causes": (list, dict), "notes": (list, str),
}


def _check_types(run: object) -> None:
    """Refuse a run whose fields the report reads have other types (a hand-edited record)."""
    if not isinstance(run, dict):
        raise TypeError(f"run is {type(run).__name__}, not an object")
    for key, (kind, item) in _RUN_FIELDS.items():
        value = run.get(key)
        if value is None:
            continue
        if not isinstance(value, kind) or (item is not None and isinstance(value, list)
                                           and not all(isinstance(x, item) for x in value)):
            raise TypeError(f"run.{key} is not a {kind.__name__}" + (f" of {item.__name__}" if item else ""))


def _named(nodes: Sequence[Node]) -> list[Node]:
    """Give each node its name: its host, with the probe's pid where hosts repeat."""
    from dataclasses import replace

    hosts = [n.host for n in nodes]
    return [replace(n, name=n.host if hosts.count(n.host) == 1 else f"{n.host}[{n.probe_pid}]") for n in nodes]


def _one_job(nodes: Sequence[Node]) -> None:
    """Refuse records of several jobs (or several runs of one job) in one directory."""
    jobs = {n.job for n in nodes if n.job}
    if len(jobs) > 1:
        first = nodes[0]
        other = next(n for n in nodes if n.job and n.job != first.job)
        raise GpudoctorError(f"records of different jobs: {first.path.name} ({first.job}) and {other.path.name} "
                             f"({other.job}); give each job a directory of its own")
    sizes = {r.process.world_size for n in nodes for r in n.ranks if r.process.world_size is not None}
    if len(sizes) > 1:
        raise GpudoctorError(f"records of different jobs: world sizes {', '.join(map(str, sorted(sizes)))} "
                             "in one directory; give each job a directory of its own")
    seen: dict[int, Node] = {}
    for node in nodes:
        for entry in node.ranks:
            if entry.rank in seen and seen[entry.rank] is not node:
                raise GpudoctorError(f"records of different runs: rank {entry.rank} is in both "
                                     f"{seen[entry.rank].path.name} and {node.path.name}; give each run a "
                                     "directory of its own")
            seen[entry.rank] = node


def read(directory: str) -> list[Node]:
    """Read every record of ``directory``, earliest start first, named and checked to be one job's."""
    folder = Path(directory)
    if not folder.exists():
        raise GpudoctorError(f"{directory}: no such directory")
    if not folder.is_dir():
        raise GpudoctorError(f"{directory}: not a directory (give the DIR of gpudoctor probe --record DIR)")
    try:
        paths = sorted(p for p in folder.iterdir() if p.suffix == ".json" and not p.name.startswith("."))
    except OSError as error:
        raise GpudoctorError(f"{directory}: cannot list it: {error.strerror or error}") from None
    if not paths:
        raise GpudoctorError(f"{directory}: no records in it (gpudoctor probe --record {directory} -- COMMAND "
                             "writes one per node)")
    nodes = _named(sorted((read_node(p) for p in paths), key=lambda n: (n.started_at, n.host, n.probe_pid)))
    _one_job(nodes)
    return nodes
