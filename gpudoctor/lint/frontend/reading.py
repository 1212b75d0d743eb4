"""Read one file's text without libcst: a file that cannot be read becomes a value, not a crash."""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from gpudoctor.input_file import read_regular
from gpudoctor.lint import notebook

# Python's own line breaks (str.splitlines also breaks at form feeds and more); libcst
# numbers rows the same way.
NEWLINE = re.compile(r"\r\n|\r|\n")


def split_lines(text: str) -> list[str]:
    """``NEWLINE.split(text)``, faster for the usual text without a ``\r`` (docs/performance.md)."""
    return text.split("\n") if "\r" not in text else NEWLINE.split(text)


@dataclass(frozen=True)
class ParseFailure:
    """Why a file could not be analysed, and where."""

    path: str
    message: str
    row: int
    col: int
    # Nothing is wrong with the file, it is only more than gpudoctor analyses (a warning).
    too_large: bool = False


# The most lines gpudoctor analyses in one file: at about 75 µs a line (libcst's parse and
# the walk), 200,000 lines take some 15 s; more would look like a hang to pre-commit.
# The largest hand-written modules are tens of thousands of lines; past this, a file is
# generated, and reported (GD000, a warning) instead of analysed.
MAX_LINES = 200_000


# What a file's status says of its bytes: size, modification and change times, inode. A
# file whose status is unchanged since its digest was taken has the same bytes (the cache
# keeps the pair: see ``Project.digest``).
Signature = tuple[int, int, int, int]


def signature(path: str | Path) -> Signature | None:
    """The status of a regular file, as compared with the one its digest was kept with."""
    try:
        info = os.stat(path)
    except (OSError, ValueError):
        return None
    if not stat.S_ISREG(info.st_mode):
        return None
    return (info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino)


def read_text(path: Path) -> str | ParseFailure:
    """Return the file's text (PEP 263 encoding declarations honoured), or why it has none."""
    return decode(path, read_bytes(path))


def read_bytes(path: Path) -> bytes | ParseFailure:
    """The file's bytes, or why it has none. Only a regular file of a sane size is read,
    and never by a call that can block: a named pipe or ``/dev/zero`` under a ``.py``
    name (or a file swapped for one since it was found) would hang or fill memory."""
    try:
        return read_regular(path)
    except OSError as exc:
        return ParseFailure(str(path), f"cannot read file: {exc.strerror or exc}", 1, 0)


def decode(path: Path, raw: bytes | ParseFailure) -> str | ParseFailure:
    """The text of a file's bytes, or why they are not Python source text."""
    import io
    import tokenize

    if isinstance(raw, ParseFailure):
        return raw
    if path.suffix.lower() == ".ipynb":
        return _notebook_program(path, raw)
    if b"\x00" in raw:
        return ParseFailure(str(path), "file contains a null byte", 1, 0)
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
    except SyntaxError as exc:
        return ParseFailure(str(path), f"cannot read file: {exc.msg}", 1, 0)
    try:
        text = raw.decode(encoding)
    except UnicodeDecodeError as exc:
        row = raw[: exc.start].count(b"\n") + 1
        return ParseFailure(str(path), f"file is not valid {encoding.upper()} ({exc.reason})", row, 0)
    except LookupError:
        return ParseFailure(str(path), f"unknown source encoding {encoding!r}", 1, 0)
    except UnicodeError as exc:  # a codec that is no text encoding ("undefined", "punycode")
        return ParseFailure(str(path), f"cannot read file as {encoding!r}: {exc}", 1, 0)
    lines = text.count("\n")
    if lines > MAX_LINES:
        return ParseFailure(str(path), f"not analysed: {lines:,} lines, more than the {MAX_LINES:,} gpudoctor "
                                       "analyses in one file (a generated file? exclude it)", 1, 0, too_large=True)
    return text


def _notebook_program(path: Path, raw: bytes) -> str | ParseFailure:
    """A Jupyter notebook's code cells as one program (see notebook.py), or why it has none."""
    try:
        found = notebook.read(raw)
    except notebook.NotANotebook as exc:
        return ParseFailure(str(path), exc.message, exc.row, exc.col)
    notebook.remember(str(path), found)
    return found.program
