"""The ``gpudoctor`` command: one parser, one subcommand per face.

Kept import-light on purpose: ``gpudoctor lint`` runs from pre-commit on every
commit, so nothing heavy (libcst, rich, NVML) is imported before a subcommand
actually needs it.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from gpudoctor import __version__
from gpudoctor.closed_stdout import silence_stdout, stdout_closed
from gpudoctor.errors import GpudoctorError, Terminated
from gpudoctor.exit_codes import EXIT_ERROR, EXIT_INTERRUPTED, EXIT_OK, exit_for_signal

if TYPE_CHECKING:
    import argparse


def build_parser() -> argparse.ArgumentParser:
    """Assemble the top-level parser; each face adds its own subcommand."""
    import argparse

    from gpudoctor.lint import options as lint_options
    from gpudoctor.probe import options as probe_options
    from gpudoctor.server import options as server_options

    parser = argparse.ArgumentParser(
        prog="gpudoctor",
        allow_abbrev=False,
        description="Find and explain why programs that mix GPU frameworks with "
        "process parallelism freeze, crash or run out of GPU memory.",
    )
    parser.add_argument("--version", action="version", version=f"gpudoctor {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    lint_options.add_lint_parser(sub)
    lint_options.add_rule_parser(sub)
    probe_options.add_probe_parser(sub)
    probe_options.add_report_parser(sub)
    server_options.add_server_parser(sub)
    for name, command in sub.choices.items():  # an unknown option is reported with its command's usage
        command.set_defaults(command_parser=command, command_name=name)
        command.allow_abbrev = False  # as ruff: --sel is not --select
    return parser


def run() -> int:
    """The process's entry point (the ``gpudoctor`` script, ``python -m gpudoctor``): like
    ``main``, in a process that exits when it returns, and that imports from where
    gpudoctor is installed only, never from the folder it runs in or ``PYTHONPATH``
    (see ``gpudoctor.safe_path``): lint reads untrusted projects."""
    from gpudoctor import safe_path

    safe_path.apply()
    _usable_streams()
    from gpudoctor.lint.gc_pause import process_ends_after_run

    process_ends_after_run()
    return main()


def _writing_stdout_failed(exc: OSError) -> bool:
    """Is ``exc`` the standard output refusing a write (a full disk, an I/O error)?"""
    import errno

    return exc.errno in (errno.ENOSPC, errno.EIO, errno.EDQUOT, errno.EFBIG, errno.EBADF)


def _usable_streams() -> None:
    """Standard streams gpudoctor can always use: one the shell closed (``>&-``) reads and
    writes nothing, and text the terminal's encoding cannot show is escaped, not an error."""
    import os

    for name, mode in (("stdin", "r"), ("stdout", "w"), ("stderr", "w")):
        stream = getattr(sys, name)
        if stream is None:
            setattr(sys, name, open(os.devnull, mode))  # noqa: SIM115 - it lives as long as the process
        elif name != "stdin" and hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")


def _tell(line: str) -> None:
    """Say ``line`` on standard error; a standard error that cannot be written (a full disk,
    ``2>/dev/full``) changes nothing of the exit code, which still tells what happened."""
    try:
        print(line, file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv``, run the chosen subcommand and return its exit code."""
    parser = build_parser()
    try:
        words = list(sys.argv[1:] if argv is None else argv)
        args, unknown = parser.parse_known_args(words)
        if unknown:
            # Blamed on the command if it comes after the command's name, else on gpudoctor.
            name = getattr(args, "command_name", None)
            command = words.index(name) if name in words else len(words)
            before = any(word in words[:command] for word in unknown)
            owner = parser if before else getattr(args, "command_parser", parser)
            owner.error(f"unrecognized arguments: {' '.join(unknown)}")
    except SystemExit as exc:  # argparse's --help, --version and usage errors
        return exc.code if isinstance(exc.code, int) else EXIT_ERROR
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help(sys.stderr)
        return EXIT_ERROR
    try:
        code = int(handler(args))
        sys.stdout.flush()  # (a full disk or a closed stream says so here, not at exit)
        return code
    except GpudoctorError as exc:
        _tell(f"gpudoctor: error: {exc}")
        return EXIT_ERROR
    except KeyboardInterrupt:
        _tell("gpudoctor: interrupted")
        return EXIT_INTERRUPTED
    except Terminated as exc:
        import signal

        _tell(f"gpudoctor: stopped by {signal.Signals(exc.signum).name}")
        return exit_for_signal(exc.signum)
    except BrokenPipeError:
        if not stdout_closed():
            raise  # a pipe of gpudoctor's own broke: not the reader of its output leaving
        silence_stdout()  # no "Exception ignored" from the interpreter's last flush
        return EXIT_OK  # the reader of the output went away (``gpudoctor lint | head``)
    except OSError as exc:
        if exc.filename is not None or not _writing_stdout_failed(exc):
            raise
        silence_stdout()
        _tell(f"gpudoctor: error: cannot write the output: {exc.strerror or exc}")
        return EXIT_ERROR

