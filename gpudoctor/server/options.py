"""Command-line options of ``gpudoctor server`` (import-light: the server's libraries load
only when it starts)."""

from __future__ import annotations

import argparse
from typing import Any


def add_server_parser(sub: Any) -> argparse.ArgumentParser:
    """Add the ``server`` subcommand."""
    parser: argparse.ArgumentParser = sub.add_parser(
        "server",
        help="run the language server (LSP over stdio): the findings in an editor as you type",
        description="Run gpudoctor's language server on stdin and stdout, for an editor's LSP client "
        "(VS Code, Neovim, Helix, Emacs: see docs/server.md). It lints every open Python file and "
        "notebook with the settings `gpudoctor lint` would use, on open, change and save.",
    )
    parser.add_argument("--no-cache", action="store_true",
                        help="neither read nor write the result cache (.gpudoctor_cache)")
    parser.add_argument("--stdio", action="store_true",
                        help="speak over stdin and stdout (the only way it speaks; accepted because editors pass it)")
    parser.set_defaults(handler=_run)
    return parser


def _run(args: argparse.Namespace) -> int:
    import sys

    from gpudoctor.errors import GpudoctorError

    if sys.stdin.isatty():
        raise GpudoctorError("`gpudoctor server` speaks the Language Server Protocol on stdin and stdout: "
                             "start it from your editor's LSP client, with the command `gpudoctor server`, not "
                             "from a terminal (set-up for Neovim, Helix, Emacs and VS Code: docs/server.md in "
                             "gpudoctor's repository)")
    from gpudoctor.server.server import serve

    return serve(cache=not args.no_cache)
