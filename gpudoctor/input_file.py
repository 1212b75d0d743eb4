"""Read a file gpudoctor did not write the way a careful tool must: a regular file only,
never blocking, never more than a bound.

A path in a project (or in place of a cache or configuration file) can name a named pipe
(reading it blocks until someone writes), a device (``/dev/zero`` never ends), or a file of
gigabytes. Opening with ``O_NONBLOCK`` keeps a FIFO from blocking the open itself; the
opened descriptor, not the path, is then checked to be a regular file, so a path swapped
between a check and the read cannot slip a device in.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

# The largest source or data file gpudoctor reads (generated modules of some megabytes are
# real; nothing a person wrote comes near this).
DEFAULT_LIMIT = 16 * 1024 * 1024


class NotReadable(OSError):
    """The path exists but is not something gpudoctor reads: its ``strerror`` says why in
    words fit to show a user ("a named pipe, not a regular file")."""


def not_regular(mode: int) -> str:
    """Why a file of this mode is not read, in words fit to show a user."""
    if stat.S_ISFIFO(mode):
        return "a named pipe, not a regular file"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device, not a regular file"
    if stat.S_ISSOCK(mode):
        return "a socket, not a regular file"
    if stat.S_ISDIR(mode):
        return "a directory, not a regular file"
    return "not a regular file"


def read_regular(path: str | os.PathLike[str], limit: int = DEFAULT_LIMIT, *, follow: bool = True) -> bytes:
    """The bytes of the regular file at ``path``; raise OSError (``NotReadable`` when it is
    not a regular file or is larger than ``limit`` bytes). ``follow=False``: a symbolic
    link at ``path`` itself is refused (ELOOP)."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)
    if not follow:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotReadable(0, not_regular(info.st_mode), str(path))
        if info.st_size > limit:
            raise NotReadable(0, f"larger than {_size(limit)} ({_size(info.st_size)})", str(path))
        chunks = []
        left = limit + 1  # a file that grew past the limit since fstat is refused too
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
        if len(data) > limit:
            raise NotReadable(0, f"larger than {_size(limit)}", str(path))
        return data
    finally:
        os.close(fd)


def read_regular_text(path: str | os.PathLike[str], limit: int = DEFAULT_LIMIT, *, follow: bool = True,
                      encoding: str = "utf-8", errors: str = "strict") -> str:
    """``read_regular`` decoded; a UnicodeDecodeError is a ValueError for the caller."""
    return read_regular(path, limit, follow=follow).decode(encoding, errors)


def is_regular(path: Path) -> bool:
    """Is ``path`` (followed) a regular file? False for anything that cannot be looked at."""
    try:
        return stat.S_ISREG(path.stat().st_mode)
    except (OSError, ValueError):
        return False


def too_many_digits(exc: ValueError) -> str | None:
    """Why a JSON or TOML reader raised ``exc``, in words fit to show a user, when it is
    Python's limit on converting digits to an integer (``sys.get_int_max_str_digits``):
    valid JSON and TOML can hold a number of 5,000 digits that Python will not read.
    None for any other ValueError."""
    if "integer string conversion" not in str(exc):
        return None
    limit = getattr(sys, "get_int_max_str_digits", lambda: 4300)()
    return f"an integer of more than {limit} digits, more than Python converts"


def _size(count: int) -> str:
    amount: float = count  # (an int until it is divided: bytes are shown whole)
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if amount < 1024 or unit == "GiB":
            return f"{amount} {unit}" if unit == "bytes" else f"{amount:.1f} {unit}".replace(".0 ", " ")
        amount /= 1024
    return f"{amount} bytes"
