"""Command-line options of ``gpudoctor probe`` (import-light: no NVML, no psutil here)."""

from __future__ import annotations

import argparse
from typing import Any


def add_probe_parser(sub: Any) -> argparse.ArgumentParser:
    """Add the ``probe`` subcommand to the top-level parser."""
    parser: argparse.ArgumentParser = sub.add_parser(
        "probe",
        help="report this machine's GPUs and frameworks, or supervise a command",
        description="Report this machine's GPUs, frameworks and defaults, or run "
        "COMMAND under supervision and explain a hang, crash or OOM.",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.set_defaults(handler=_run)
    return parser


def _run(args: argparse.Namespace) -> int:
    from gpudoctor.probe.command import run

    return run(args)
