"""Command-line options of ``gpudoctor probe`` (import-light: no NVML, no psutil here)."""

from __future__ import annotations

import argparse
import math
from typing import Any

from gpudoctor.probe.units import parse_size

# A supervised program may legitimately wait a long time; a scenario's workers
# either finish in seconds or never.
HANG_AFTER_COMMAND = 30.0
HANG_AFTER_SCENARIO = 3.0


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


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {text!r}")
    return value


def _pid(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a process id: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"not a process id: {text!r}")
    return value


def _size(text: str) -> int:
    try:
        return parse_size(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


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
        "  gpudoctor probe --pid 4122 --watch 5",
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
    attach.add_argument("--watch", type=_seconds, default=2.0, metavar="S",
                        help="with --pid: watch CPU progress for S seconds; a tree with none in the "
                        "window is called hung (default: 2)")
    run = parser.add_argument_group("supervising a command (after --) and running scenarios")
    run.add_argument("--timeout", type=_seconds, metavar="S",
                     help="stop the command after S seconds (default: no deadline)")
    run.add_argument("--hang-after", type=_seconds, metavar="S",
                     help="call a process hung after S seconds waiting with no CPU progress; "
                     f"when the whole tree is hung, stop it (default: {HANG_AFTER_COMMAND:g} for a "
                     f"command, {HANG_AFTER_SCENARIO:g} for scenarios)")
    run.add_argument("--grace", type=_seconds, default=3.0, metavar="S",
                     help="seconds between SIGTERM and SIGKILL when stopping the tree (default: 3)")
    run.add_argument("--memory-limit", type=_size, metavar="SIZE",
                     help="stop the command when its processes' resident memory together "
                     "exceeds SIZE, e.g. 8GiB (default: no limit for a command; for a scenario "
                     "80%% of the available memory, at most 8GiB)")
    run.add_argument("--max-processes", type=_count, default=512, metavar="N",
                     help="stop the whole tree when more than N of its processes are alive at "
                     "once, a fork bomb (default: 512)")
    run.add_argument("--output-limit", type=_size, default=64 * 1024, metavar="SIZE",
                     help="keep this much of the head and of the tail of stdout and stderr "
                     "each for the diagnosis (default: 64KiB)")
    run.add_argument("--sample-interval", type=_seconds, default=0.05, metavar="S",
                     help="seconds between GPU memory samples (default: 0.05; the per-process "
                     "GPU list and RSS are read every 0.5 s)")
    run.add_argument("--no-native-stacks", dest="native_stacks", action="store_false",
                     help="do not use py-spy for native stacks of hung processes")
    parser.add_argument("command", nargs=argparse.REMAINDER, metavar="-- COMMAND ...",
                        help="the command to supervise")
    parser.set_defaults(handler=_run)
    return parser


def _run(args: argparse.Namespace) -> int:
    from gpudoctor.probe.command import run

    return run(args)
