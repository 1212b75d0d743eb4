"""Show a supervised run's diagnosis: JSON for machines, rich text for people."""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from gpudoctor.printable import printable, printable_lines
from gpudoctor.probe.command_text import short_command
from gpudoctor.probe.diagnosis import SCHEMA_VERSION, Diagnosis
from gpudoctor.probe.explain import failure_groups, some_pids
from gpudoctor.probe.record import RunRecord
from gpudoctor.probe.units import format_size
from gpudoctor.probe.verdicts import StopReason

if TYPE_CHECKING:
    from rich.console import Console

_STYLES = {"ok": "green", "hung": "red", "crashed": "red", "oom": "red", "killed": "yellow", "stopped": "yellow",
           "idle": "yellow", "escaped": "red",
           "failed": "red", "crash-loop": "red", "unknown": "dim"}


def to_json(run: RunRecord, diagnosis: Diagnosis, machine: dict[str, Any] | None = None) -> dict[str, Any]:
    """Return the document ``gpudoctor probe --json -- COMMAND`` prints: the diagnosis
    (``Diagnosis.from_json`` reads it back), the run's evidence and, when given, the
    machine block (``machine.to_json``'s ``"machine"``)."""
    judged = diagnosis.to_json()
    head: dict[str, Any] = {"schema_version": SCHEMA_VERSION}
    if machine is not None:
        head["machine"] = machine
    return {
        **head,
        "command": list(run.command),
        "verdict": judged["verdict"],
        "exit_code": judged["exit_code"],
        "explanation": judged["explanation"],
        "stop_reason": judged["stop_reason"],
        "duration": run.duration,
        "processes": judged["processes"],
        "matches": judged["matches"],
        # The causes named, as data: kind, rule, frameworks, parent, processes, evidence, fix.
        "causes": judged["causes"],
        # Who held the memory of a run that ran out of it (null otherwise): the processes
        # ranked by peak, and the workers that each held about as much.
        "memory": judged["memory"],
        # Each process's RSS, PSS and USS when the tree passed --memory-limit ({}: it did not).
        "at_memory_limit": {str(pid): f.to_json() for pid, f in sorted(run.at_memory_limit.items())},
        "events": run.events,
        "samples": [{k: v for k, v in asdict(s).items() if v is not None} for s in run.samples],
        "notes": list(run.notes),
        # The --memory-limit the tree ran under, in bytes (null: none), and how it was
        # counted ("pss", or "uss"/"rss" where smaps was unreadable).
        "memory_limit": run.limits.memory_limit,
        "memory_measure": run.memory_measure,
        # OOM kills the kernel counted in gpudoctor's cgroup during the run (null: unreadable).
        "oom_kills": run.oom_kills,
        # How the tree was followed: "subreaper" or "psutil scan".
        "tracking": run.tracking,
        # The sampler failed mid-run: "samples" stop where it did.
        "samples_partial": run.samples_partial,
        # Seconds from the start to the signal that stopped gpudoctor (null: none came).
        "signal_at": run.signal_at,
        # Seconds from the start to the moment gpudoctor began to stop the tree, or saw the
        # command exit (null: not known, as for an attached tree).
        "stop_at": run.stop_at,
        # The children whose identical failures in a row made gpudoctor stop the tree
        # (--crash-loop), in the order they were reaped; empty when no crash loop stopped it.
        "crash_loop": list(run.crash_loop),
        # Who sent that signal (null: the kernel, as for Ctrl-C, or not known): {"pid",
        # "command", "in_tree"}; in_tree true when the program signalled gpudoctor itself,
        # null when the sender was gone before gpudoctor could look at it.
        "signal_sender": None if run.signal_sender is None else run.signal_sender.to_json(),
        # Processes of the tree gpudoctor could not stop: they outlived the run.
        "escaped": list(run.escaped),
    }


# How gpudoctor found every process of the tree, in words.
_TRACKING = {
    "subreaper": "every descendant, even one that leaves the session, is reparented to gpudoctor "
                 "(Linux child subreaper)",
    "attached": "attached from outside (gpudoctor probe --pid): the tree under the given PIDs, read "
                "from /proc and psutil; nothing was stopped or signalled",
    "psutil scan": "descendants found by scanning the process table (no subreaper here)",
}


def render(run: RunRecord, diagnosis: Diagnosis, console: Console) -> None:
    """Print the verdict, the explanation and a line per process."""
    from rich.markup import escape

    style = _STYLES.get(diagnosis.verdict, "bold")
    console.rule("gpudoctor probe")
    if run.stop_reason == StopReason.ATTACHED:  # still running: no exit code of its own
        head = f"watched {run.duration:.1f} s (attached)"
    else:
        head = f"exit code {diagnosis.exit_code}  after {run.duration:.1f} s ({run.stop_reason})"
    console.print(f"verdict: [bold {style}]{diagnosis.verdict}[/]  {head}")
    # What the processes wrote or were named (command lines, output, frames) is shown
    # escaped: a process's text must not drive the reader's terminal.
    console.print(escape(printable_lines(diagnosis.explanation)))
    for cause in diagnosis.causes:
        rule = f" ({cause.rule})" if cause.rule else ""
        pids = f": {some_pids(cause.processes)}" if cause.processes else ""
        console.print(f"cause: [bold]{escape(printable(cause.kind))}[/]{rule}, {cause.certainty}{pids}")
    console.print(f"tracking: {_TRACKING.get(run.tracking, run.tracking)}"
                  + ("  (samples are partial: the sampler failed)" if run.samples_partial else ""))
    console.print()
    # Identical failures of many children are one line (a crash loop's children are many).
    grouped = {p.pid: members for members in failure_groups(diagnosis.processes) if len(members) > 1
               for p in members}
    for p in diagnosis.processes:
        members = grouped.get(p.pid)
        if members is not None:
            if p is members[0]:
                style = _STYLES.get(p.verdict, "bold")
                console.print(f"  {len(members)} processes ({p.start}) [{style}]{p.verdict}[/]: "
                              f"{escape(printable(p.explanation))}: {some_pids([m.pid for m in members])}")
            continue
        command = printable(short_command(p.cmdline))
        fork = ""
        if p.start == "fork":
            # An attached tree's forks have no thread count at the fork: it was not watched then.
            threads = (f" with {p.threads_at_fork} thread{'s' if p.threads_at_fork != 1 else ''}"
                       if p.threads_at_fork is not None else "")
            fork = f", forked{threads}, runtimes: {', '.join(p.runtimes_at_fork) or 'none'}"
        role = f", {p.role}" if p.role else ""
        console.print(f"  pid {p.pid} ({p.start}{role}) [{_STYLES.get(p.verdict, 'bold')}]{p.verdict}[/]: "
                      f"{escape(printable(p.explanation))}{fork}, peak RSS {format_size(p.rss_peak)}"
                      f"{' ' + escape(command) if command else ''}")
        if p.blocked_in:
            console.print(f"    blocked in {escape(printable(p.blocked_in))}")
