"""Check: two-rank torchrun jobs on NCCL under ``gpudoctor probe``, told rank by rank.

The probe's distributed explanations are tested on the CPU with gloo (tests/probe/
test_distributed.py). What only a GPU shows is NCCL's way of waiting: a rank blocked in
the NCCL communicator's set-up or its collective, in native code, while the others are
elsewhere or dead. Each job (``gpucheck/scripts/dist_*.py``) runs under ``python -m
torch.distributed.run --standalone --nproc-per-node 2`` with the backend as its argument;
one GPU is enough (the one rank that uses NCCL uses it alone). The expectations are the
gloo tests': the verdict, the cause, each rank labelled from its environment, the lines of
the collective and of the rank test, and nothing left running.

The same jobs with ``gloo`` (``run_job(..., backend="gloo")``) are what the CPU tests of
this check run (tests/gpucheck/test_distributed_part.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpucheck import children, probe_runs
from gpucheck.part import Context, PartResult, Status

NAME = "distributed"
ORDER = 55

HERE = Path(__file__).resolve().parent.parent / "scripts"

# Whether the interpreter can run an NCCL job here: NCCL built in, and a GPU.
_CAN_RUN = ("import torch, torch.distributed as d; "
            "print(d.is_available() and d.is_nccl_available() and torch.cuda.device_count() > 0)")


@dataclass(frozen=True)
class Job:
    """A failing two-rank program and what the probe must say about it."""

    file: str
    verdict: str
    cause: str  # the first cause's kind
    culprit: int  # the rank the cause names
    lines: tuple[str, ...]  # each must be the start of an explanation line ({MARK}: the line holding # MARK)
    hang_after: float = 10.0
    timeout: float = 180.0


JOBS = (
    Job("dist_barrier_skipped.py", "hung", "collective-not-reached", 0,
        ("Rank 1 waits in `barrier` at dist_barrier_skipped.py:{BARRIER} in the `else` of `if rank == 0:` "
         "(line {TEST}); rank 0 is in `save_checkpoint` at dist_barrier_skipped.py:{SAVE}",
         "Rank 1 waits for rank 0, which never reaches `barrier`.")),
    Job("dist_rank_raises.py", "crashed", "rank-failed", 1,
        ("Rank 1 (pid {PID1}) failed first at t=",)),
)


def marker_line(source: str, marker: str) -> int:
    """The 1-based line of ``source`` that holds ``# marker``."""
    return next(i for i, text in enumerate(source.splitlines(), start=1) if f"# {marker}" in text)


def _expectation(name: str, ok: bool, detail: str) -> dict[str, Any]:
    return {"expectation": name, "ok": ok, "detail": detail}


def check(job: Job, document: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Test the job's expectations against the probe's document."""
    processes = document.get("processes") or []
    ranks = {p["rank"]: p for p in processes if p.get("rank") is not None}
    root: Mapping[str, Any] = next((p for p in processes if p.get("start") == "root"), {})
    causes = document.get("causes") or []
    explanation = document.get("explanation") or ""
    source = (HERE / job.file).read_text()
    fields = {m: marker_line(source, m) for m in ("BARRIER", "TEST", "SAVE", "RAISE", "LOAD") if f"# {m}" in source}
    fields.update({f"PID{r}": p.get("pid") for r, p in ranks.items()})
    lines = explanation.splitlines()
    labelled = [(p.get("local_rank"), p.get("world_size"), p.get("ppid")) for _, p in sorted(ranks.items())]
    first = causes[0] if causes else {}
    found = [
        _expectation("verdict", document.get("verdict") == job.verdict,
                     f"verdict {document.get('verdict')}; expected {job.verdict}"),
        _expectation("ranks labelled", sorted(ranks) == [0, 1] and bool(root.get("launches_ranks")) and labelled == [
            (0, 2, root.get("pid")), (1, 2, root.get("pid"))], f"ranks {sorted(ranks)}: {labelled}"),
        _expectation("cause", first.get("kind") == job.cause and (first.get("processes") or [None])[0]
                     == (ranks.get(job.culprit) or {}).get("pid"),
                     f"first cause {first.get('kind')} of {first.get('processes')}; expected {job.cause} of rank "
                     f"{job.culprit}"),
    ]
    for wanted in job.lines:
        text = wanted.format(**fields)
        found.append(_expectation(f"says '{text[:60]}...'", any(line.startswith(text) for line in lines),
                                  next((line for line in lines if line.startswith(text[:12])), "no such line")))
    alive = [p["pid"] for p in processes if _running(p["pid"])]
    found.append(_expectation("nothing left running", not alive, f"still running: {alive}"))
    return found


def _running(pid: int) -> bool:
    """Is ``pid`` a live process (not gone, not a zombie)? Read from /proc: gpu-check runs
    under the interpreter as it is."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def run_job(ctx: Context, folder: Path, job: Job, backend: str = "nccl",
            hang_after: float | None = None) -> dict[str, Any]:
    """Run one job under the probe with ``backend``; its expectations, each held or not.
    ``hang_after``: the probe's hang threshold, if not the job's own."""
    label = f"{job.file.removesuffix('.py')}-{backend}"
    args = ["--hang-after", f"{hang_after or job.hang_after:g}", "--timeout", f"{job.timeout:g}", "--",
            ctx.python, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
            str(HERE / job.file), backend]
    done = probe_runs.probe(ctx, folder, label, args, timeout=job.timeout + 60, env={"OMP_NUM_THREADS": "1"})
    result: dict[str, Any] = {"job": job.file, "backend": backend, "command": list(done.finished.command),
                              "probe_exit_status": done.finished.returncode, "seconds": done.finished.seconds}
    if done.document is None:
        result["expectations"] = [_expectation("a probe report", False, done.problem or "")]
        return result
    result["verdict"] = done.document.get("verdict")
    result["explanation"] = done.document.get("explanation")
    result["expectations"] = check(job, done.document)
    return result


def run(ctx: Context) -> PartResult:
    can = children.run([ctx.python, "-c", _CAN_RUN], timeout=min(120.0, ctx.seconds_left()),
                       env=children.environment(ctx.repo), cwd=ctx.repo)
    if can.stdout.strip() != "True":
        why = can.stdout.strip() or can.tail(2) or "no answer"
        return PartResult(NAME, "skipped", [f"not run: torch with NCCL and a GPU are needed ({why})"])
    folder = ctx.folder(NAME)
    results = [run_job(ctx, folder, job) for job in JOBS]
    lines: list[str] = []
    failed = False
    for r in results:
        bad = [e for e in r["expectations"] if not e["ok"]]
        failed = failed or bool(bad)
        lines.append(f"{r['job']} (nccl): {r.get('verdict', 'no report')}; {len(r['expectations']) - len(bad)} of "
                     f"{len(r['expectations'])} expectations hold"
                     + "".join(f"; NOT {e['expectation']} ({e['detail']})" for e in bad))
    status: Status = "failed" if failed else "passed"
    return PartResult(NAME, status, [f"{len(results)} two-rank NCCL job(s) run under gpudoctor probe", *lines],
                      {"jobs": results})
