"""A diagnosis as a value: the verdict of a supervised run and of each of its processes,
typed in memory and written as the JSON report, and read back from it.

``diagnose.py`` judges a run and builds these; ``render_run.py`` writes them, with the
run's evidence, as ``gpudoctor probe --json`` prints it; the pytest plugin (which gets
the document from another process) and the HTML report read it back with ``from_json``
rather than picking keys out of dictionaries.

Reading back takes the fields the class knows and ignores the others, and a field
given a default may be missing: a field added to a class with a default (a cause, the
rule it belongs to, a process's children) is written and read with no other change,
and a document written before it existed still reads.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from gpudoctor.probe.ranks import label
from gpudoctor.probe.verdicts import StopReason, Verdict

# The version of the layout of ``gpudoctor probe --json``'s document. It grows by one
# only when a key changes meaning or goes away; a key added with a default does not
# change it (readers ignore keys they do not know).
SCHEMA_VERSION = 1

# How sure a cause is, in the words the JSON carries.
OBSERVED = "observed"  # the failure happened: the tree hung past --hang-after, or the error string was printed
LIKELY = "likely"  # stopped (Ctrl-C, --timeout) before --hang-after, with the processes idle
LATENT = "latent"  # the hazard was present but this run did not fail of it


def _known(cls: type, data: Mapping[str, Any]) -> dict[str, Any]:
    """The items of ``data`` that are fields of the dataclass ``cls``."""
    names = {f.name for f in fields(cls)}
    return {key: value for key, value in data.items() if key in names}


@dataclass(frozen=True, kw_only=True)
class ProcessVerdict:
    """One process of the tree, judged. Only its pid and verdict are certain to be known;
    the rest defaults to "not known" (a report read back may lack it)."""

    pid: int
    ppid: int | None = None
    cmdline: tuple[str, ...] = ()
    start: str = "unknown"  # "root", "fork", "spawn", "exec", "unknown"
    verdict: Verdict  # keyword-only fields: a field without a default may follow the others
    exit_code: int | None = None
    threads_at_fork: int | None = None
    runtimes_at_fork: tuple[str, ...] = ()
    forked_at: float | None = None
    stalled_for: float = 0.0
    wchan: str | None = None
    blocked_in: str | None = None
    stack: str | None = None
    stack_source: str | None = None
    rss_peak: int | None = None
    # Device index -> bytes (None: NVML could not say).
    gpu_memory_peak: dict[int, int | None] = field(default_factory=dict)
    explanation: str = ""
    fatal_error: str | None = None  # faulthandler's "Fatal Python error: ..." line
    # The exception it died of, in one line ("RuntimeError: An attempt has been made ..."),
    # and the innermost frame of the user's own code in its traceback ("<module> (/x/y.py:6)").
    exception: str | None = None
    exception_at: str | None = None
    # Its place in a distributed job, as its launcher set it in its environment (ranks.py);
    # ``launches_ranks``: it started ranks and is none itself (torchrun's agent, mpirun).
    rank: int | None = None
    local_rank: int | None = None
    world_size: int | None = None
    launches_ranks: bool = False

    @property
    def role(self) -> str | None:
        """"rank 1/4 (local 1)", "launcher", or None for a process of no distributed job."""
        if self.rank is not None:
            return label(self.rank, self.local_rank, self.world_size)
        return "launcher" if self.launches_ranks else None

    def to_json(self) -> dict[str, Any]:
        """The process's entry of the report's ``"processes"`` (JSON object keys are text)."""
        document = {k: v for k, v in asdict(self).items() if k != "gpu_memory_peak"}
        document["verdict"] = self.verdict.value  # plain text: the document holds JSON types only
        document["gpu_memory_peak"] = {str(device): used for device, used in self.gpu_memory_peak.items()}
        return document

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ProcessVerdict:
        values = _known(cls, data)
        values["verdict"] = Verdict(values["verdict"])
        values["cmdline"] = tuple(values.get("cmdline") or ())
        values["runtimes_at_fork"] = tuple(values.get("runtimes_at_fork") or ())
        values["gpu_memory_peak"] = {int(d): used for d, used in (values.get("gpu_memory_peak") or {}).items()}
        return cls(**values)


@dataclass(frozen=True)
class ErrorMatch:
    """A known error string found in the command's output (see error_strings.py)."""

    row: int | None  # of docs/error-strings.md (None: a string verified on a real machine)
    framework: str
    kind: str  # "cause", "warning" or "context"
    category: str  # what it means: "fork-after-init", "gpu-oom", ...
    line: str  # the line of output it was found on

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ErrorMatch:
        return cls(**_known(cls, data))


@dataclass(frozen=True, kw_only=True)
class Cause:
    """One cause a diagnosis names, in a form a program can act on.

    ``kind`` is a hazard's ``cause`` (``gpudoctor/hazards.py``: ``"fork-after-init"``,
    ``"multithreaded-fork"``, ...) or an error-string category (``"gpu-oom"``), and
    ``rule`` the lint rule that finds it in the code, when there is one. ``parent`` is
    the process whose state made the children fail (the one that forked them), and
    ``processes`` the children it made fail.
    """

    kind: str
    certainty: str  # OBSERVED, LIKELY or LATENT
    rule: str | None = None
    frameworks: tuple[str, ...] = ()  # runtime names as the bootstrap records them: "tensorflow", "jax:cuda"
    parent: int | None = None
    processes: tuple[int, ...] = ()
    evidence: tuple[str, ...] = ()  # one sentence per fact, as the explanation cites it
    fix: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Cause:
        values = _known(cls, data)
        for key in ("frameworks", "processes", "evidence"):
            values[key] = tuple(values.get(key) or ())
        return cls(**values)


@dataclass(frozen=True, kw_only=True)
class MemoryHolder:
    """One process's part of the tree's memory, as the OOM explanation ranks it."""

    pid: int
    role: str  # "parent", "command", "spawn worker 2", "resource tracker", ...
    rss_peak: int
    share: float  # of the tree's total (the sum of the peaks), 0 to 1
    gpu_peak: int | None = None  # on all GPUs (None: NVML did not say, or none used)
    # Its USS (the pages no other process maps) when the tree passed --memory-limit
    # (None: not read).
    own: int | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> MemoryHolder:
        return cls(**_known(cls, data))


@dataclass(frozen=True, kw_only=True)
class WorkerCopies:
    """Sibling workers that each held about the same memory: ``copies`` True when each
    held its own (a fresh interpreter, or a fork child's own pages, its USS, were a large
    part of the tree), False when most was shared with the parent, None when that was not
    measured (fork children, no --memory-limit)."""

    parent: int | None
    start: str  # how they started: "spawn", "fork", "forkserver", ...
    processes: tuple[int, ...]
    siblings: int  # how many workers the parent had (the group may leave some out)
    each: int  # their median peak RSS
    together: int  # their peaks added up
    total: int  # the tree's total
    copies: bool | None
    own_each: int | None = None  # their median USS at the --memory-limit stop
    parent_rss: int | None = None  # the parent's peak RSS
    # Workers counted in while still growing when memory ran out (loading their copy):
    # (pid, peak RSS) each.
    growing: tuple[tuple[int, int], ...] = ()
    # What ``each``, ``together`` and ``total`` count: "rss" (peaks; ``total`` their sum) or
    # "uss" (fork workers' own pages at --memory-limit; ``total`` the tree's PSS there).
    measure: str = "rss"
    resident_each: int | None = None  # with "uss": their median peak RSS, shared pages included
    low: int | None = None  # the least and the most one of them held (``measure``)
    high: int | None = None
    # Workers whose RSS rose steadily through their whole life, more than a copy of their
    # parent's pages could (explain_memory_growth): (pid, first sample's t and bytes, last
    # sample's t and bytes) each; empty when they did not, or not all of them.
    grew: tuple[tuple[int, float, int, float, int], ...] = ()
    # With ``grew``: the user's frame each worker's stack was in when the tree was stopped
    # ("load (prog.py:31)"), for those whose stack was dumped: (pid, frame) each.
    grew_at: tuple[tuple[int, str], ...] = ()
    # Without ``grew``: a worker lived too short for its samples to tell a copy loaded once
    # from memory kept from task to task, so "each its own copy" is the likelier of two.
    short_lives: bool = False

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> WorkerCopies:
        values = _known(cls, data)
        values["processes"] = tuple(values.get("processes") or ())
        values["growing"] = tuple((int(pid), int(size)) for pid, size in values.get("growing") or ())
        values["grew"] = tuple((int(pid), float(t0), int(b0), float(t1), int(b1))
                               for pid, t0, b0, t1, b1 in values.get("grew") or ())
        values["grew_at"] = tuple((int(pid), str(at)) for pid, at in values.get("grew_at") or ())
        return cls(**values)


@dataclass(frozen=True, kw_only=True)
class MemoryAttribution:
    """Who held the memory of a run that ran out of it: every process ranked by its peak,
    and the workers that each held about as much, when there are such."""

    total: int  # the peaks' sum
    processes: tuple[MemoryHolder, ...]
    workers: WorkerCopies | None = None

    def to_json(self) -> dict[str, Any]:
        return {"total": self.total, "processes": [p.to_json() for p in self.processes],
                "workers": None if self.workers is None else self.workers.to_json()}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> MemoryAttribution:
        workers = data.get("workers")
        return cls(total=int(data.get("total") or 0),
                   processes=tuple(MemoryHolder.from_json(p) for p in data.get("processes") or ()),
                   workers=None if workers is None else WorkerCopies.from_json(workers))


@dataclass(frozen=True)
class Diagnosis:
    """The command's verdict, why the run stopped, the explanation in plain words, the
    judged processes, the known error strings found in the output, and the causes named."""

    verdict: Verdict
    exit_code: int | None
    explanation: str
    processes: tuple[ProcessVerdict, ...] = ()
    matches: tuple[ErrorMatch, ...] = ()
    stop_reason: StopReason | None = None  # None: the run was not watched to its end
    causes: tuple[Cause, ...] = ()
    # Who held the memory, when the run ran out of it (None: it did not, or not known).
    memory: MemoryAttribution | None = None

    def to_json(self) -> dict[str, Any]:
        """The diagnosis's keys of the report (the run's evidence is added by render_run)."""
        return {
            "verdict": self.verdict.value,
            "exit_code": self.exit_code,
            "explanation": self.explanation,
            "stop_reason": None if self.stop_reason is None else self.stop_reason.value,
            "processes": [p.to_json() for p in self.processes],
            "matches": [m.to_json() for m in self.matches],
            "causes": [c.to_json() for c in self.causes],
            "memory": None if self.memory is None else self.memory.to_json(),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Diagnosis:
        """Read the diagnosis of a report (``gpudoctor probe --json -- COMMAND``'s document)."""
        values = _known(cls, data)
        values["verdict"] = Verdict(values["verdict"])
        values["explanation"] = values.get("explanation") or ""
        values["exit_code"] = values.get("exit_code")
        stop = values.get("stop_reason")
        values["stop_reason"] = None if stop is None else StopReason(stop)
        values["processes"] = tuple(ProcessVerdict.from_json(p) for p in values.get("processes") or ())
        values["matches"] = tuple(ErrorMatch.from_json(m) for m in values.get("matches") or ())
        values["causes"] = tuple(Cause.from_json(c) for c in values.get("causes") or ())
        memory = values.get("memory")
        values["memory"] = None if memory is None else MemoryAttribution.from_json(memory)
        return cls(**values)

    def processes_with(self, verdict: Verdict) -> list[ProcessVerdict]:
        return [p for p in self.processes if p.verdict == verdict]

    @property
    def root(self) -> ProcessVerdict | None:
        """The command's own process (the first one judged as the root)."""
        return next((p for p in self.processes if p.start == "root"), None)
