"""Judge one test from what was recorded during its call: a failure per broken promise.

Each failure is a one-line reason (the report's longrepr and the short summary line)
and a named report section with the evidence, as pytest-memray reports its limits.
The hang's report is in ``hang_report``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from gpudoctor import hazards
from gpudoctor.probe.command_text import short_command
from gpudoctor.probe.explain import runtime_names
from gpudoctor.probe.units import format_size
from gpudoctor.pytest_plugin import memory
from gpudoctor.pytest_plugin.markers import ForkSafe, Plan


@dataclass(frozen=True)
class Failure:
    """Why the test fails, in one line, and the evidence under a section name.

    A failure whose evidence is long (a hang's stacks of every process) also has a
    ``brief``: the few lines under the reason that say what matters; its section is
    then written to a file and shown in the report only with -v (see ``report_files``).
    """

    reason: str
    section: tuple[str, str] | None
    brief: tuple[str, ...] = ()


def _short(site: str | None) -> str | None:
    """Show a site under the current directory relative to it, as pytest shows test files."""
    from gpudoctor.safe_path import working_folder

    folder = working_folder()
    if folder is None:
        return site
    here = folder + os.sep
    return site[len(here):] if site and site.startswith(here) else site


def _unsafe(event: dict[str, Any], rule: ForkSafe) -> bool:
    threads = event.get("threads")
    return bool(event.get("runtimes")) or (rule.threads and isinstance(threads, int) and threads > 1)


def _children(event: dict[str, Any], events: list[dict[str, Any]]) -> list[int]:
    """Return the children of this fork (of this process's forks, when the time was not kept)."""
    when = event.get("fork_t")
    return [e["pid"] for e in events if e.get("event") == "fork-child" and e.get("ppid") == event.get("pid")
            and (when is None or e.get("fork_t") == when)]


def _who(pid: object, root: int, events: list[dict[str, Any]]) -> str:
    if pid == root:
        return f"the test process {pid}"
    argv = next((e.get("argv") for e in events if e.get("event") == "start" and e.get("pid") == pid), None)
    command = short_command(argv or [])
    return f"process {pid}" + (f" ({command})" if command else "")


def _fork_line(event: dict[str, Any], events: list[dict[str, Any]], root: int) -> str:
    had = []
    if event.get("runtimes"):
        had.append(f"{runtime_names(event['runtimes'])} initialized")
    if event.get("threads"):
        had.append(f"{event['threads']} native threads")
    site = _short(event.get("site"))
    where = f" at {site}" if site else ""
    via = f" via {_short(event['via'])}" if event.get("via") else ""
    children = _children(event, events)
    child = f" → child {', '.join(map(str, children))}" if children else ""
    unknown = "" if site else " (fork sites are recorded in the test process and its fork children)"
    return f"{_who(event.get('pid'), root, events)} forked{where}{via} with {' and '.join(had)}{child}{unknown}"


def fork_failure(rule: ForkSafe, events: list[dict[str, Any]], root: int) -> Failure | None:
    """Fail when any recorded fork happened with a runtime (or threads) in the forking process."""
    unsafe = [e for e in events if e.get("event") == "fork-parent" and _unsafe(e, rule)]
    if not unsafe:
        return None
    first = unsafe[0]
    what = runtime_names(first.get("runtimes") or []) or f"{first.get('threads')} native threads"
    at = f" at {_short(first['site'])}" if first.get("site") else ""
    reason = (f"fork_safe: {len(unsafe)} fork(s) while {what} "
              f"{'was initialized' if first.get('runtimes') else 'were running'} in the forking process{at}")
    lines = [_fork_line(e, events, root) for e in unsafe[:10]]
    if len(unsafe) > 10:
        lines.append(f"... and {len(unsafe) - 10} more")
    runtimes = any(e.get("runtimes") for e in unsafe)
    hazard = hazards.FORK_AFTER_INIT if runtimes else hazards.MULTITHREADED_FORK
    had = [r for e in unsafe for r in e.get("runtimes") or ()]
    lines += ["", hazards.why_for(hazard, list(dict.fromkeys(had))), hazard.fix_line]
    return Failure(reason, ("gpudoctor fork_safe", "\n".join(lines)))


def memory_failures(plan: Plan, use: memory.MemoryUse) -> list[Failure]:
    """Fail a test whose processes held more GPU memory than its markers allow."""
    failures = []
    if plan.memory_limit is not None and use.peak > plan.memory_limit:
        reason = (f"gpu_memory_limit: the test's processes held {format_size(use.peak)} of GPU memory "
                  f"together, over the limit of {format_size(plan.memory_limit)}")
        failures.append(Failure(reason, ("gpudoctor gpu_memory_limit", memory.table(use))))
    if plan.leak_limit is not None and use.leaked > plan.leak_limit:
        reason = (f"gpu_memory_leak_limit: the test's processes held {format_size(use.leaked)} more GPU "
                  f"memory at its end than at its start, over the limit of {format_size(plan.leak_limit)}")
        failures.append(Failure(reason, ("gpudoctor gpu_memory_leak_limit", memory.table(use))))
    return failures
