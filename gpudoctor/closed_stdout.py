"""The reader of gpudoctor's output may leave before it is all written (``| head -1``).

Like other command-line tools, gpudoctor then ends quietly: no traceback, no "Exception
ignored" line from the interpreter's last flush, and the exit status its work gives (a
probe's verdict, lint's findings), not one made up by the closed pipe. Only the standard
output's reader counts: a pipe of gpudoctor's own that breaks is a real error.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager


def stdout_closed() -> bool:
    """Has the reader of the standard output closed it? (A pipe whose reader is gone polls
    as an error.) True when that cannot be told."""
    import select

    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))
    except (AttributeError, OSError, ValueError):
        return True


def silence_stdout() -> None:
    """Point the standard output at /dev/null: what is still buffered, later writes and the
    interpreter's flush at exit go nowhere, instead of raising BrokenPipeError again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, sys.stdout.fileno())
        finally:
            os.close(devnull)
    except (AttributeError, OSError, ValueError):
        pass


@contextmanager
def reader_may_leave() -> Iterator[None]:
    """Run a block that prints to stdout; if the reader went away, end the block quietly
    (stdout silenced) and let the caller go on: write its other reports, return its status."""
    try:
        yield
    except BrokenPipeError:
        if not stdout_closed():
            raise  # a pipe of gpudoctor's own broke: not the reader of its output leaving
        silence_stdout()
