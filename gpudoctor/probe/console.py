"""The rich console the probe prints its reports on (stdout), rich imported only here."""

from __future__ import annotations

import errno
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console


def report_console() -> Console:
    """Return a console for the reports on stdout.

    When the reader of stdout leaves (``gpudoctor probe ... | head -1``), rich would end the
    process with status 1 (``Console.on_broken_pipe``); this one raises BrokenPipeError
    instead, for ``closed_stdout.reader_may_leave`` to end the printing quietly while the
    probe still writes its HTML report and returns the status its verdict gives.
    """
    from rich.console import Console

    class _ReportConsole(Console):
        def on_broken_pipe(self) -> None:
            self.quiet = True  # nothing more to write: the reader is gone
            raise BrokenPipeError(errno.EPIPE, "the reader of the standard output left")

    # soft_wrap: piped output keeps long lines whole instead of wrapping at 80 columns.
    return _ReportConsole(soft_wrap=True, highlight=False)
