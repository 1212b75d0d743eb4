"""Turn a live snapshot into text: the terminal view's lines, and the plain progress lines.

Pure functions of snapshots (no terminal, no clock), so what the view shows is tested
as data. The terminal view draws ``view_lines`` a few times a second; where stderr is
not a terminal, ``progress_lines`` says only what changed between two snapshots: a
process appeared or ended, the tree's idle time crossed a third or two thirds of
``--hang-after``, or it made progress again after that.
"""

from __future__ import annotations

from gpudoctor.printable import printable
from gpudoctor.probe.live_snapshot import ProcessLine, Snapshot
from gpudoctor.probe.units import format_size
from gpudoctor.probe.wording import plural

DASH = "–"  # a value that is not known (no NVML, a first look without a CPU rate)
HEADER = ("pid", "role", "GPU runtimes", "thr", "cpu", "idle", "rss", "gpu")
_WIDTHS = (8, 17, 24, 4, 5, 10, 10, 10)
# The fractions of --hang-after at which a plain line says how long the tree has waited.
THRESHOLDS = (1 / 3, 2 / 3)


def _seconds(value: float) -> str:
    return f"{value:.0f} s" if value >= 10 else f"{value:.1f} s"


def _whole(value: float) -> str:
    return f"{value:g}"


def _idle(p: ProcessLine) -> str:
    if p.stopped:
        return f"stopped {p.idle_s:.0f} s"
    if p.idle_s >= 1.0:
        return f"idle {p.idle_s:.0f} s"
    return "running"


def _row(cells: tuple[str, ...]) -> str:
    padded = [cell.ljust(width) if i < len(cells) - 1 else cell
              for i, (cell, width) in enumerate(zip(cells, _WIDTHS, strict=True))]
    return "  " + " ".join(padded).rstrip()


def process_cells(p: ProcessLine) -> tuple[str, ...]:
    """The cells of one process's row, in ``HEADER`` order."""
    cpu = DASH if p.cpu_percent is None else f"{p.cpu_percent:.0f}%"
    gpu = DASH if p.gpu is None else format_size(p.gpu)
    return (str(p.pid), printable(p.role), ",".join(p.runtimes) or DASH, str(p.threads), cpu, _idle(p),
            format_size(p.rss), gpu)


def verdict_line(snapshot: Snapshot) -> str:
    """How far the tree is from a verdict, in one sentence."""
    if snapshot.stopping:
        return f"stopping: {snapshot.stopping}"
    live = len(snapshot.processes)
    if not live:
        return "no process running"
    idle = snapshot.idle
    if snapshot.attached:
        left = max(0.0, snapshot.hang_after - snapshot.elapsed)
        return (f"no progress for {_seconds(snapshot.elapsed)} in {len(idle)} of {plural(live, 'process')}; "
                f"verdict at the end of the {_whole(snapshot.hang_after)} s watch ({_seconds(left)} left)")
    deadline = (f"; --timeout stops it at {_whole(snapshot.timeout)} s" if snapshot.timeout is not None else "")
    if not idle:
        who = "the process is" if live == 1 else f"all {live} processes are"
        return (f"{who} progressing; hang verdict after {_whole(snapshot.hang_after)} s "
                f"without progress in all{deadline}")
    longest = max(p.idle_s for p in idle)
    text = f"no progress for {_seconds(longest)} in {len(idle)} of {plural(live, 'process')}; "
    if len(idle) < live:
        return text + f"hang verdict once all have waited {_whole(snapshot.hang_after)} s{deadline}"
    return text + f"hang verdict at {_whole(snapshot.hang_after)} s{deadline}"


def view_lines(snapshot: Snapshot, width: int = 120, height: int | None = None) -> list[str]:
    """The live view: a title, a header, a row per live process, the forming verdict.

    Every line fits ``width`` (cut with an ellipsis, never wrapped: a wrapped line would
    break the redraw); with ``height``, rows beyond it are summed up in one line.
    """
    title = f"gpudoctor probe: {printable(snapshot.title)} — {snapshot.elapsed:.0f} s"
    title += "" if snapshot.attached else " (Ctrl-C: diagnose and stop; twice: stop at once)"
    lines = [title, _row(HEADER)]
    rows = [_row(process_cells(p)) for p in snapshot.processes]
    room = None if height is None else max(1, height - 4)
    if room is not None and len(rows) > room:
        rows = rows[:room - 1] + [f"  … and {plural(len(rows) - room + 1, 'more process', 'more processes')}"]
    lines += rows
    lines.append(verdict_line(snapshot))
    return [line if len(line) <= width else line[:max(0, width - 1)] + "…" for line in lines]


def _level(snapshot: Snapshot) -> int:
    waited = snapshot.all_idle_s
    return sum(1 for fraction in THRESHOLDS if waited >= fraction * snapshot.hang_after)


def start_line(snapshot: Snapshot) -> str:
    """The first plain line: what is watched, and when a verdict comes."""
    if snapshot.attached:
        return f"gpudoctor: watching {printable(snapshot.title)} for {_whole(snapshot.hang_after)} s"
    deadline = f", --timeout {_whole(snapshot.timeout)} s" if snapshot.timeout is not None else ""
    return (f"gpudoctor: supervising {printable(snapshot.title)} (hang verdict after {_whole(snapshot.hang_after)} s "
            f"without progress{deadline})")


def progress_lines(before: Snapshot | None, now: Snapshot) -> list[str]:
    """The plain lines that say what changed from ``before`` to ``now`` (none: nothing worth a line)."""
    lines = []
    old = {p.pid: p for p in before.processes} if before else {}
    new = {p.pid: p for p in now.processes}
    for pid, p in new.items():
        if pid not in old and (before is not None or not now.attached):  # attached: all there before
            runtimes = f", {','.join(p.runtimes)} loaded" if p.runtimes else ""
            lines.append(f"gpudoctor: {_seconds(now.elapsed)} pid {pid} started ({printable(p.role)}{runtimes})")
    for pid, p in old.items():
        if pid not in new:
            lines.append(f"gpudoctor: {_seconds(now.elapsed)} pid {pid} ended ({printable(p.role)})")
    was, level = (_level(before) if before else 0), _level(now)
    if level > was:
        lines.append(f"gpudoctor: {_seconds(now.elapsed)} {verdict_line(now)}")
    elif level == 0 and was > 0 and now.processes:
        lines.append(f"gpudoctor: {_seconds(now.elapsed)} progress again")
    if now.stopping and (before is None or before.stopping != now.stopping):
        lines.append(f"gpudoctor: {_seconds(now.elapsed)} stopping: {now.stopping}")
    return lines
