"""Write a report file the way a user expects: whole or not at all, at the path named, and
never through a symbolic link planted there.

A report's path (``-o report.txt``, ``--html report.html``) usually lies in a checkout,
and a checkout can carry a symbolic link under that name (``report.txt -> ~/.bashrc``):
writing through it would overwrite whatever file it names. So a link at the destination
is replaced by the report, as a rename replaces it (``sed -i`` and editors' atomic saves
do the same), and the file it pointed to is left as it was. Refusing instead would fail a
CI step over a link the user may never have noticed, for no gain: the report ends up
where it was asked for, and nothing else is touched.

Two kinds of destination are written in place: a device or a named pipe (``-o /dev/null``,
a FIFO a reader waits on: renaming over them would replace them with a plain file), and
the system's names for an open stream, which are links by nature (``/dev/stdout``,
``/dev/fd/3``, ``/proc/self/fd/1``): a project cannot plant those, the user typed them.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from gpudoctor import file_replace

# A report is never source code: an existing file with one of these suffixes is never
# written over by a report (lint's --output-file, the probe's --html).
SOURCE_SUFFIXES = (".py", ".pyi", ".ipynb")

def write_text_file(target: Path, text: str, encoding: str = "utf-8") -> None:
    """Write ``text`` to ``target`` (line endings as they are in ``text``); raise OSError
    on failure.

    A regular file (or a new one) is written atomically: a temporary file beside it, then
    a rename, so a reader never sees half a report, and a signal meanwhile leaves no
    temporary file (gpudoctor.file_replace); an existing file keeps its mode (and its
    owner, where this user can give it).
    A symbolic link at ``target`` is replaced, never written through, unless it names an
    open stream (``/dev/stdout``). (``--fix`` rewrites source files, where the user's own
    link must keep pointing at the fixed file: it has its own writer, fixes/apply.py.)
    """
    stream = _names_a_stream(target)
    path = Path(target)
    try:
        info: os.stat_result | None = os.lstat(path)
    except FileNotFoundError:
        info = None
    if stream or (info is not None and not stat.S_ISREG(info.st_mode) and not stat.S_ISLNK(info.st_mode)):
        _write_in_place(path, text, encoding, follow=stream)
        return
    data = text.encode(encoding)
    if info is not None and stat.S_ISREG(info.st_mode):  # it keeps its mode, and its owner where it can
        file_replace.replace(path, data, stat.S_IMODE(info.st_mode), (info.st_uid, info.st_gid),
                             owner_required=False)
    else:  # a link at ``path`` is replaced, its target untouched
        file_replace.replace(path, data, 0o644)


def _names_a_stream(target: Path) -> bool:
    """Is ``target`` a link the system keeps for an open stream (``/dev/stdout``, ``/dev/fd/N``,
    ``/proc/self/fd/N``)? Only root can put a link in ``/dev`` itself or in ``/proc``;
    ``/dev/shm``, which everyone can write, is not among them."""
    if not os.path.islink(target):
        return False
    folder = os.path.realpath(os.path.dirname(os.path.abspath(target)))
    return folder == "/dev" or folder.startswith("/proc/")


def _write_in_place(path: Path, text: str, encoding: str, *, follow: bool) -> None:
    """Open and write ``path`` itself: a device, a pipe, or the stream a system link names
    (a file behind ``/dev/stdout`` is truncated, as a shell's ``>`` would)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)
    if not follow:  # swapped for a link since it was looked at: refuse (ELOOP) rather than follow
        flags |= getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags, 0o666)
    with os.fdopen(fd, "w", encoding=encoding, newline="") as out:
        out.write(text)
