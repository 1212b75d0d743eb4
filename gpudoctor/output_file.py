"""Write a report file the way a user expects: whole or not at all, and never in place of
a device, a pipe or a symbolic link."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path


def write_text_file(target: Path, text: str, encoding: str = "utf-8") -> None:
    """Write ``text`` to ``target`` (line endings as they are in ``text``); raise OSError
    on failure.

    A regular file (or a new one) is written atomically: a temporary file beside it, then
    a rename, so a reader never sees half a report. A symbolic link is followed and its
    target written that way. Anything else (``-o /dev/null``, a named pipe) is written in
    place: renaming over it would replace the device or pipe with a plain file.
    """
    real = Path(os.path.realpath(target))
    try:
        mode = real.stat().st_mode
    except FileNotFoundError:
        mode = None
    if mode is not None and not stat.S_ISREG(mode):
        with open(real, "w", encoding=encoding, newline="") as stream:
            stream.write(text)
        return
    fd, temporary = tempfile.mkstemp(prefix=f".{real.name}.", suffix=".tmp", dir=real.parent)
    try:
        with os.fdopen(fd, "w", encoding=encoding, newline="") as stream:
            stream.write(text)
        os.chmod(temporary, 0o644 if mode is None else stat.S_IMODE(mode))
        os.replace(temporary, real)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
