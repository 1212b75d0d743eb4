"""Command-line options of ``gpudoctor probe`` (import-light: no NVML, no psutil here)."""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable, Sequence
from typing import Any

from gpudoctor.probe.defaults import (
    CRASH_LOOP,
    HANG_AFTER_COMMAND,
    HANG_AFTER_SCENARIO,
    MAX_GRACE,
    MAX_WATCH,
    MIN_MEMORY_LIMIT,
)
from gpudoctor.probe.units import format_size, is_unit, parse_size


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not math.isfinite(value):  # nan compares false with everything: it would turn the limit off
        raise argparse.ArgumentTypeError(f"not a finite number of seconds: {text!r}")
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be more than 0 seconds: {text!r}")
    return value


def _seconds_at_most(most: float) -> Callable[[str], float]:
    """A number of seconds, as ``_seconds``, of at most ``most``."""
    def seconds(text: str) -> float:
        value = _seconds(text)
        if value > most:
            raise argparse.ArgumentTypeError(f"must be at most {most:g} seconds: {text!r}")
        return value

    return seconds


def _grace(text: str) -> float:
    """Seconds from SIGTERM to SIGKILL: 0 (SIGKILL right after SIGTERM) to ``MAX_GRACE``."""
    allowed = f"0 to {MAX_GRACE:g} seconds"
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r} (allowed: {allowed})") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"not a finite number of seconds: {text!r} (allowed: {allowed})")
    if not 0 <= value <= MAX_GRACE:
        raise argparse.ArgumentTypeError(f"must be {allowed}: {text!r}")
    return value


def _whole_number(text: str, off: bool) -> int:
    """A whole number of at least 1; with ``off``, 0 too (it turns the check off)."""
    hint = " (0 turns the check off)" if off else ""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}{hint}") from None
    if value < (0 if off else 1):
        least = "0 (off) or more" if off else "at least 1"
        raise argparse.ArgumentTypeError(f"must be {least}: {text!r}")
    return value


def _count(text: str) -> int:
    return _whole_number(text, off=False)


def _count_or_off(text: str) -> int:
    return _whole_number(text, off=True)


def _pid(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a process id: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"not a process id: {text!r}")
    return value


# The namespace attribute that holds the last size option given as a bare number
# (``_Size``, its text), until the word after it shows whether that is its unit.
_WITHOUT_UNIT = "_size_without_unit"
_NUMBER = re.compile(r"\s*[0-9]*\.?[0-9]+\s*")


class _Size(argparse.Action):
    """A size option (``--memory-limit``, ``--output-limit``): "8GiB", "8 GB", "512m", or a
    byte count, of at least ``minimum`` bytes.

    ``--memory-limit 8 GB`` reaches gpudoctor as two words, and argparse would take ``GB``
    for the command to run: a bare number is therefore remembered, and a unit as the first
    word of the command is taken back as its unit (``_Command``), never run.
    """

    def __init__(self, option_strings: Sequence[str], dest: str, minimum: int = 0, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, **kwargs)
        self.minimum = minimum

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        text = str(values)
        bare = _NUMBER.fullmatch(text) is not None
        # A bare number's minimum waits for its unit: "0.5" alone is no size, "0.5 GB" is.
        setattr(namespace, self.dest, self.parse(text, check_minimum=not bare))
        setattr(namespace, _WITHOUT_UNIT, (self, text) if bare else None)

    def parse(self, text: str, check_minimum: bool = True) -> int:
        """Return the bytes ``text`` says; raise argparse's error naming the option if it is
        not a size, or an impossible one."""
        try:
            value = parse_size(text)
        except ValueError as error:
            raise argparse.ArgumentError(self, str(error)) from None
        if check_minimum and value < self.minimum:
            raise argparse.ArgumentError(self, f"must be at least {format_size(self.minimum)}: {text!r}")
        return value


class _Command(argparse.Action):
    """The command after the options; a size unit as its first word belongs to the bare
    number before it (``--memory-limit 8 GB -- python train.py``), and the options after
    that word are gpudoctor's again."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        words = list(values)
        pending: tuple[_Size, str] | None = getattr(namespace, _WITHOUT_UNIT, None)
        setattr(namespace, _WITHOUT_UNIT, None)
        if pending is None:
            setattr(namespace, self.dest, words)
            return
        size, number = pending
        if not words or not is_unit(words[0]):
            setattr(namespace, size.dest, size.parse(number))  # a byte count: now its minimum counts
            setattr(namespace, self.dest, words)
            return
        setattr(namespace, size.dest, size.parse(f"{number}{words[0]}"))
        rest = parser.parse_known_args(words[1:], namespace)[1]  # sets the command, and any options
        if rest:
            parser.error(f"unrecognized arguments: {' '.join(rest)}")


class _ExamplesFormatter(argparse.HelpFormatter):
    """Fill prose as argparse does, but keep indented lines (commands) whole, one a line."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        blocks: list[str] = []
        prose: list[str] = []
        for line in text.splitlines():
            if line.startswith("  "):
                if prose:
                    blocks.append(super()._fill_text(" ".join(prose), width, indent))
                    prose = []
                blocks.append(indent + line)
            else:
                prose.append(line)
        if prose:
            blocks.append(super()._fill_text(" ".join(prose), width, indent))
        return "\n".join(blocks)


def add_probe_parser(sub: Any) -> argparse.ArgumentParser:
    """Add the ``probe`` subcommand to the top-level parser."""
    parser: argparse.ArgumentParser = sub.add_parser(
        "probe",
        help="report this machine and reproduce the failure scenarios, or supervise a command",
        description="Report this machine's GPUs, frameworks and defaults and run the failure "
        "scenarios that can run here (each in an unsafe and a safe variant), or run COMMAND "
        "under supervision and explain a hang, crash or OOM.",
        epilog="examples:\n"
        "  gpudoctor probe --html report.html\n"
        "  gpudoctor probe --scenario tensorflow-fork-after-init\n"
        "  gpudoctor probe --timeout 300 --hang-after 30 -- python train.py\n"
        "  gpudoctor probe --pid 4122 --watch 5\n"
        "  srun gpudoctor probe --record runs/42 -- torchrun --nnodes 2 ... train.py",
        formatter_class=_ExamplesFormatter,
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON on stdout")
    parser.add_argument("--html", metavar="FILE",
                        help="also write the report as one self-contained HTML page to FILE")
    parser.add_argument("--quiet", action="store_true",
                        help="no live view (on a terminal) or progress lines on stderr while the "
                        "command, the scenarios or the attached tree are watched")
    scenarios = parser.add_argument_group("scenarios (without a command)")
    scenarios.add_argument("--scenario", action="append", metavar="NAME",
                           help="run only this scenario (repeatable; see --list-scenarios)")
    scenarios.add_argument("--no-scenarios", action="store_true",
                           help="only report the machine (fast)")
    scenarios.add_argument("--list-scenarios", action="store_true",
                           help="list the scenarios and whether each can run here")
    scenarios.add_argument("--scenario-timeout", type=_seconds, default=30.0, metavar="S",
                           help="stop a scenario variant after S seconds, or up to 4 times that while "
                           "its processes still make CPU progress (default: 30; a hung one is stopped "
                           "after --hang-after)")
    attach = parser.add_argument_group("attaching to running processes (never stops or signals them)")
    attach.add_argument("--pid", action="append", type=_pid, metavar="PID",
                        help="explain the running process PID and the tree under it (repeatable)")
    attach.add_argument("--watch", type=_seconds_at_most(MAX_WATCH), default=2.0, metavar="S",
                        help="with --pid: watch CPU progress for S seconds, at most "
                        f"{MAX_WATCH:g}; a tree with none in the window is called idle, or hung when "
                        "something shows a hang (default: 2; --timeout cuts it short)")
    run = parser.add_argument_group("supervising a command (after --) and running scenarios")
    run.add_argument("--timeout", type=_seconds, metavar="S",
                     help="stop the command after S seconds; with --pid, end the examination within "
                     "S seconds (default: no deadline)")
    run.add_argument("--hang-after", type=_seconds, metavar="S",
                     help="call a process hung after S seconds waiting with no CPU progress; "
                     f"when the whole tree is hung, stop it (default: {HANG_AFTER_COMMAND:g} for a "
                     f"command, {HANG_AFTER_SCENARIO:g} for scenarios)")
    run.add_argument("--grace", type=_grace, default=3.0, metavar="S",
                     help="seconds between SIGTERM and SIGKILL when stopping the tree, "
                     f"0 to {MAX_GRACE:g} (0: SIGKILL at once; default: 3)")
    run.add_argument("--memory-limit", action=_Size, minimum=MIN_MEMORY_LIMIT, metavar="SIZE",
                     help="stop the command when its processes' resident memory together "
                     "exceeds SIZE, e.g. 8GiB or 8 GB (default: no limit for a command; for a scenario "
                     "80%% of the available memory, at most 8GiB)")
    run.add_argument("--max-processes", type=_count, default=512, metavar="N",
                     help="stop the whole tree when more than N of its processes are alive at "
                     "once, a fork bomb (default: 512)")
    run.add_argument("--crash-loop", type=_count_or_off, default=CRASH_LOOP, metavar="N",
                     help="stop the tree when N of its child processes in a row fail the same way "
                     "(same exit status, same exception) while it runs: a crash loop, such as a "
                     f"pool that keeps replacing workers that die at start (default: {CRASH_LOOP}; "
                     "0: never)")
    run.add_argument("--output-limit", action=_Size, default=64 * 1024, metavar="SIZE",
                     help="keep this much of the head and of the tail of stdout and stderr "
                     "each for the diagnosis (default: 64KiB)")
    run.add_argument("--sample-interval", type=_seconds, default=0.05, metavar="S",
                     help="seconds between GPU memory samples (default: 0.05; the per-process "
                     "GPU list and RSS are read every 0.5 s)")
    run.add_argument("--no-native-stacks", dest="native_stacks", action="store_false",
                     help="do not use py-spy for native stacks of hung processes")
    run.add_argument("--record", metavar="DIR",
                     help="with a command: also write this node's record of the run to DIR/HOST-PID.json "
                     "(DIR is created if missing), for `gpudoctor report DIR` to merge the nodes of a "
                     "job run with one probe per machine (srun gpudoctor probe --record DIR -- ...)")
    parser.add_argument("command", nargs=argparse.REMAINDER, action=_Command, metavar="-- COMMAND ...",
                        help="the command to supervise")
    parser.set_defaults(handler=_run)
    return parser


def _run(args: argparse.Namespace) -> int:
    from gpudoctor.probe.command import run

    return run(args)


def add_report_parser(sub: Any) -> argparse.ArgumentParser:
    """Add the ``report`` subcommand: one verdict for a job from its nodes' records."""
    parser: argparse.ArgumentParser = sub.add_parser(
        "report",
        help="merge the records of a job's nodes (gpudoctor probe --record DIR) into one verdict",
        description="Read every record gpudoctor probe --record DIR wrote into DIR (one per node of a "
        "distributed job) and explain the job as one: one verdict, the ranks rank by rank across the "
        "nodes, the first rank that failed as the cause.",
        epilog="examples:\n"
        "  srun gpudoctor probe --record runs/42 -- torchrun --nnodes 2 ... train.py\n"
        "  gpudoctor report runs/42 --html runs/42.html",
        formatter_class=_ExamplesFormatter,
    )
    parser.add_argument("directory", metavar="DIR", help="the directory given to gpudoctor probe --record")
    parser.add_argument("--json", action="store_true", help="print the job's report as JSON on stdout")
    parser.add_argument("--html", metavar="FILE",
                        help="also write one self-contained HTML page, with a timeline lane per rank")
    parser.set_defaults(handler=_report)
    return parser


def _report(args: argparse.Namespace) -> int:
    from gpudoctor.probe.job_command import run

    return run(args)
