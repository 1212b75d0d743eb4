"""Replace a file whole or not at all, whatever signal arrives meanwhile.

Every file gpudoctor writes over (a report, a fixed source file, a store of the cache) is
written to a temporary file beside it, then renamed over it: a reader sees the old text or
the new, never half. Between the two steps a SIGTERM at its default action ends the process
at once and leaves the temporary file in the user's folder (``.train.py.k2j4x.tmp``); a
Ctrl-C raises KeyboardInterrupt wherever the code then is. So the signals that stop a run
(SIGINT, SIGTERM, SIGHUP) are held while one file is written, and act as they would have the
moment it is renamed (or, on failure, its temporary file removed): the run still stops, a
few milliseconds later, with every file old or new and nothing left behind. (SIGKILL cannot
be held; nothing can clean up after it.)

The new file gets the mode asked for and, when asked, the owner and group of the file it
replaces: a rename puts a new file in place, which belongs to whoever wrote it. Run as root,
``--fix`` would otherwise give a user's file to root (mode 0640: its owner could no longer
read it).
"""

from __future__ import annotations

import os
import signal
import stat
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

# The signals that stop a run (HUP: a closed terminal), held while a file is replaced.
HELD = tuple(s for s in (signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGHUP", None)) if s is not None)


class OwnerNotKept(PermissionError):
    """The new file could not be given the owner and group of the one it replaces (only
    root can give a file away): nothing was replaced."""


@contextmanager
def signals_held() -> Iterator[None]:
    """Hold SIGINT, SIGTERM and SIGHUP while the block runs, then deliver the first that
    came, to the handler it would have met (the default action: the process ends by it).

    In the main thread only (signal handlers belong to it). A signal that is ignored stays
    ignored, and one whose handler was not set from Python is left alone."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []

    def hold(signum: int, _frame: object) -> None:
        caught.append(signum)

    previous = {}
    for signum in HELD:
        handler = signal.getsignal(signum)
        if handler is None or handler == signal.SIG_IGN:
            continue
        previous[signum] = signal.signal(signum, hold)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if caught:
            signal.raise_signal(caught[0])


def replace(target: Path, data: bytes, mode: int, owner: tuple[int, int] | None = None,
            *, owner_required: bool = True) -> None:
    """Write ``data`` over ``target`` whole or not at all: a temporary file beside it, given
    ``mode`` (and ``owner``: a user and group id), renamed over it, with the signals that
    stop a run held meanwhile. Raise OSError on failure (``OwnerNotKept`` when ``owner``
    cannot be given and ``owner_required``), leaving ``target`` as it was and no temporary
    file. A symbolic link at ``target`` is replaced, not written through."""
    with signals_held():
        fd, temporary = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        try:
            with os.fdopen(fd, "wb") as stream:
                stream.write(data)
                stream.flush()
                if owner is not None:
                    _give(stream.fileno(), owner, owner_required)
                os.fchmod(stream.fileno(), mode)  # after the owner: chown clears the set-id bits
            os.replace(temporary, target)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise


def _give(fd: int, owner: tuple[int, int], required: bool) -> None:
    info = os.fstat(fd)
    if (info.st_uid, info.st_gid) == owner:
        return
    try:
        os.fchown(fd, *owner)
    except PermissionError as exc:
        if required:
            raise OwnerNotKept(exc.errno, "cannot give the new file its owner and group") from exc


def overwrite(path: Path, data: bytes) -> None:
    """Write ``data`` into the regular file ``path`` itself (its owner, group, mode and
    links all kept), then cut it to that length, with the signals that stop a run held: a
    SIGTERM or a Ctrl-C finds it old or new. (A reader at that moment, or a crash, may find
    it half written: for files whose owner a new file cannot have.)"""
    flags = os.O_WRONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0)
    with signals_held():
        fd = os.open(path, flags)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise OSError(0, "not a regular file", str(path))
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.ftruncate(fd, len(data))
        finally:
            os.close(fd)
