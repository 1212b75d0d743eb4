"""``gpudoctor probe``: the machine report, or a supervised command and its diagnosis."""

from __future__ import annotations

import argparse
import json
import signal
import sys
from typing import Any

from gpudoctor.errors import GpudoctorError

EXIT_OK = 0
EXIT_PROBLEM = 1


def _console() -> Any:
    from rich.console import Console

    # soft_wrap: piped output keeps long lines whole instead of wrapping at 80 columns.
    return Console(soft_wrap=True, highlight=False)


def _print_json(document: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(document, indent=2, default=str) + "\n")
    sys.stdout.flush()


def machine_report(as_json: bool) -> int:
    """Print the machine report; it describes, it does not judge, so it exits 0."""
    from gpudoctor.probe import machine

    report = machine.collect()
    if as_json:
        _print_json(machine.to_json(report))
        return EXIT_OK
    from gpudoctor.probe.render_machine import render

    render(report, _console())
    return EXIT_OK


def supervise(command: list[str], args: argparse.Namespace) -> int:
    """Run ``command`` under supervision, print the diagnosis, return the exit code."""
    from gpudoctor.probe import diagnose, render_run
    from gpudoctor.probe.supervise import Limits, Supervisor

    limits = Limits(
        timeout=args.timeout,
        hang_after=args.hang_after,
        grace=args.grace,
        memory_limit=args.memory_limit,
        output_limit=args.output_limit,
        sample_interval=args.sample_interval,
        native_stacks=args.native_stacks,
    )
    # With --json, stdout carries only the JSON document: the command's own output
    # is shown on stderr instead.
    echo_out = sys.stderr.buffer if args.json else sys.stdout.buffer
    supervisor = Supervisor(command, limits, echo_out, sys.stderr.buffer)
    run = supervisor.run()
    result = diagnose.diagnose(run)
    if args.json:
        _print_json(render_run.to_json(run, result))
    else:
        render_run.render(run, result, _console())
    if run.stop_reason == "interrupted":
        return 128 + (run.signal_received or signal.SIGINT)
    return EXIT_OK if result.verdict == "ok" else EXIT_PROBLEM


def run(args: argparse.Namespace) -> int:
    """Dispatch ``gpudoctor probe``: no command means the machine report."""
    command = list(args.command or [])
    dashed = bool(command) and command[0] == "--"
    if dashed:
        command = command[1:]
    if not command:
        if dashed:
            raise GpudoctorError("no command given after '--' (gpudoctor probe -- COMMAND ...)")
        return machine_report(args.json)
    return supervise(command, args)
