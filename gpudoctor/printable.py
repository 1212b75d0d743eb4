"""Show text that came from outside gpudoctor on a terminal or a page, never raw.

A file name is bytes on POSIX, and a process's command line, its output, its stack
frames and its environment are whatever that process (maybe another user's) made them:
they may hold a newline (which would cut a ``path:row:col:`` line in two and make an
editor or a CI problem matcher read half of it as another finding), an escape sequence
that repaints or retitles the terminal of the person reading the report (``\\x1b]0;...``,
``\\x1b[2J``), or bytes that are not UTF-8 (Python gives those as lone surrogates, which
no UTF-8 stream can write: ``print`` would raise). Such characters are shown the way
Python writes them in a string (``\\n``, ``\\x1b``, ``\\xff`` for an undecodable byte),
as git quotes file names; the text itself is kept as it is for everything else, and
JSON and SARIF carry it exactly (they escape it themselves).

Shared by the linter's reporters and the probe's terminal, live view and HTML outputs.
"""

from __future__ import annotations

import re

# C0 and C1 controls (newline, tab, escape, NEL), DEL, the Unicode line and paragraph
# separators (str.splitlines and many editors break lines there), lone surrogates, and the
# bidirectional controls (U+202A-202E, U+2066-2069, the marks U+200E/200F and U+061C):
# a right-to-left override in a file name shows ``evil\u202etxt.py`` as ``evilyp.txt``.
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2028\u2029\u2066-\u2069"
                          "\ud800-\udfff]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:  # a byte os.fsdecode could not decode: show the byte
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """``text`` with every character that would break a line or a UTF-8 stream escaped."""
    if _UNPRINTABLE.search(text) is None:  # the usual case: nothing to copy
        return text
    return _UNPRINTABLE.sub(_escape, text)


def printable_lines(text: str) -> str:
    """``text`` escaped as ``printable`` does, but for its line breaks (``\\n``): a report of
    several lines (an explanation, a stack) that quotes what a process wrote."""
    if _UNPRINTABLE.search(text) is None:
        return text
    return "\n".join(printable(line) for line in text.split("\n"))
