"""``gpudoctor report DIR``: one verdict for a job from its nodes' records, as text, JSON or HTML."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from gpudoctor.closed_stdout import reader_may_leave
from gpudoctor.errors import GpudoctorError
from gpudoctor.exit_codes import EXIT_OK, EXIT_PROBLEM
from gpudoctor.printable import printable, printable_lines
from gpudoctor.probe.diagnosis import SCHEMA_VERSION
from gpudoctor.probe.explain_job import JobDiagnosis
from gpudoctor.probe.job_records import Node
from gpudoctor.probe.verdicts import Verdict


def _rank_json(node: Node, job: JobDiagnosis) -> list[dict[str, Any]]:
    found = []
    for entry in node.ranks:
        failed = None if entry.failed_at is None else round(node.started_at + entry.failed_at - job.start, 3)
        found.append({"rank": entry.rank, "node": node.name, "pid": entry.process.pid,
                      "local_rank": entry.process.local_rank, "world_size": entry.process.world_size,
                      "verdict": entry.process.verdict.value, "exit_code": entry.process.exit_code,
                      "waiting": entry.waiting, "collective": entry.collective, "function": entry.function,
                      "at": entry.at, "condition": None if entry.condition is None else entry.condition.text,
                      "failed": entry.failed, "failed_at": failed, "exception": entry.process.exception})
    return found


def to_json(job: JobDiagnosis) -> dict[str, Any]:
    """The document ``gpudoctor report DIR --json`` prints; times are seconds from ``started_at``."""
    return {
        "schema_version": SCHEMA_VERSION,
        "verdict": job.verdict.value,
        "explanation": job.explanation,
        "causes": [c.to_json() for c in job.causes],
        # The wall clock (time.time()) at the earliest node's start: the job's t=0.
        "started_at": job.start,
        "nodes": [{"name": n.name, "host": n.host, "record": str(n.path), "probe_pid": n.probe_pid,
                   "started_at": round(n.started_at - job.start, 3), "duration": n.duration,
                   "verdict": n.diagnosis.verdict.value, "stop_reason": n.run.get("stop_reason"),
                   "command": n.run.get("command"), "launcher": n.launcher_pid} for n in job.nodes],
        "ranks": sorted((r for n in job.nodes for r in _rank_json(n, job)), key=lambda r: r["rank"]),
        "missing_ranks": list(job.missing),
    }


def timeline_run(job: JobDiagnosis) -> dict[str, Any]:
    """A run document the timeline draws: one process per rank, its samples and exits moved
    onto the job's clock, its lane named by its rank and node. Pids that repeat on two
    nodes get another key, so that each rank keeps a lane of its own."""
    processes: list[dict[str, Any]] = []
    samples: list[dict[str, Any]] = []
    events: list[dict[str, Any]] = []
    used: set[int] = set()
    end = 0.0
    for index, node in enumerate(job.nodes):
        shift = node.started_at - job.start
        end = max(end, shift + node.duration)
        keys: dict[int, int] = {}
        for entry in sorted(node.ranks, key=lambda e: e.rank):
            pid = entry.process.pid
            key = pid if pid not in used else pid + (index + 1) * 10_000_000
            used.add(key)
            keys[pid] = key
            lane = f"rank {entry.rank} · {node.name}" if len(job.nodes) > 1 else f"rank {entry.rank}"
            processes.append({"pid": key, "start": "rank", "verdict": entry.process.verdict.value, "lane": lane})
        for sample in node.run.get("samples") or ():
            if sample.get("pid") in keys and isinstance(sample.get("t"), (int, float)):
                samples.append({**sample, "pid": keys[sample["pid"]], "t": round(sample["t"] + shift, 3)})
        for event in node.run.get("events") or ():
            if event.get("event") == "exit" and event.get("pid") in keys and isinstance(event.get("t"), (int, float)):
                events.append({**event, "pid": keys[event["pid"]], "t": round(event["t"] + shift, 3)})
    return {"processes": processes, "samples": samples, "events": events, "duration": round(end, 3),
            "stop_reason": None, "axis": "seconds since the first node's start (wall clock)"}


def render(job: JobDiagnosis) -> None:
    """Print the job's verdict, explanation, causes and a line per rank."""
    from rich.markup import escape

    from gpudoctor.probe.console import report_console

    console = report_console()
    style = "green" if job.verdict == Verdict.OK else "red" if job.verdict in (Verdict.HUNG, Verdict.CRASHED) \
        else "yellow"
    console.rule("gpudoctor report")
    ranks = sum(len(n.ranks) for n in job.nodes)
    console.print(f"verdict: [bold {style}]{job.verdict}[/]  {len(job.nodes)} nodes, {ranks} ranks recorded")
    console.print(escape(printable_lines(job.explanation)))
    for cause in job.causes:
        rule = f" ({cause.rule})" if cause.rule else ""
        console.print(f"cause: [bold]{escape(printable(cause.kind))}[/]{rule}, {cause.certainty}")
    console.print()
    for node in job.nodes:
        for entry in sorted(node.ranks, key=lambda e: e.rank):
            p = entry.process
            where = f", blocked in {p.blocked_in}" if p.blocked_in else ""
            console.print(f"  rank {entry.rank} (node {escape(printable(node.name))}, pid {p.pid}) {p.verdict}: "
                          f"{escape(printable(p.explanation))}{escape(printable(where))}")


def run(args: argparse.Namespace) -> int:
    """Read DIR's records, judge the job, print it (and write the page); return the exit code."""
    from gpudoctor.probe import explain_job, job_records

    html = None
    if args.html:
        from gpudoctor.probe import html_report

        html = html_report.check_target(args.html)
    nodes = job_records.read(args.directory)
    try:
        job = explain_job.diagnose(nodes)
        document = to_json(job)
        page = None
        if html is not None:
            from gpudoctor.probe import html_report

            page = html_report.job_page(document, timeline_run(job), [n.run for n in job.nodes])
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        # (the records were checked as they were read: this is a value inside one that no
        # check named, in a record written by hand or by another program)
        raise GpudoctorError(f"{args.directory}: a record holds a value of an unexpected type "
                             f"({type(error).__name__}: {error}); records are written by gpudoctor probe "
                             "--record DIR") from None
    with reader_may_leave():
        if args.json:
            sys.stdout.write(json.dumps(document, indent=2, default=str) + "\n")
            sys.stdout.flush()
        else:
            try:
                render(job)
            except (KeyError, TypeError, ValueError, AttributeError) as error:
                raise GpudoctorError(f"{args.directory}: a record holds a value of an unexpected type "
                                     f"({type(error).__name__}: {error})") from None
    if html is not None and page is not None:
        from gpudoctor.probe import html_report

        html_report.write(html, page)
        if not args.json:
            with reader_may_leave():
                print(f"HTML report: {html}")
    return EXIT_OK if job.verdict == Verdict.OK else EXIT_PROBLEM
