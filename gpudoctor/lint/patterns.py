"""Gitignore-syntax patterns (.gitignore files, ``exclude``, ``per-file-ignores``):
compiled as git reads them, and what is wrong with one that cannot be.

A pattern comes from a file anyone can commit, so matching it must stay fast whatever it
holds. pathspec turns each ``*`` into its own ``[^/]*``, and Python's regular expressions
try every way of sharing a name among them: ``********a`` took seconds against one
40-character name, and one .gitignore line of 40 stars stalled a whole run. git's own
matcher does not backtrack that way, so neither may this one. Each path segment is
compiled here in a form that matches the same names without the search:

- a run of ``*`` and ``?`` inside a segment is its ``?`` then one ``*`` (``*?**?`` is
  ``??*``: two characters or more); a segment of stars alone keeps git's ``**``;
- on Python 3.11 and later each piece between two stars is found at its leftmost place and
  kept there (an atomic group): for a glob, where a piece between stars matches first is
  never worse than a later place, so nothing a segment can match is lost.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from collections.abc import Callable

    from pathspec import GitIgnoreSpec
    from pathspec.patterns.gitignore.spec import GitIgnoreSpecPattern

    _Translate = Callable[[str, Literal["literal", "raise"]], str]

# Atomic groups came with Python 3.11; before, the runs are still folded.
_ATOMIC = sys.version_info >= (3, 11)
_STAR = "[^/]*"
_GLOBSTAR = "(?:/.+)?"  # how pathspec writes an inner ``**``


def _pieces(segment: str) -> list[str]:
    """``segment`` cut at its wildcard stars: the glob text between them, with each run of
    ``*`` and ``?`` folded to its ``?`` (kept in the piece before the cut).

    Escapes and bracket expressions are passed over as pathspec reads them (a ``*`` there
    is a character), so every piece is a glob that pathspec translates as before.
    """
    pieces: list[str] = []
    current: list[str] = []
    i, end = 0, len(segment)
    while i < end:
        char = segment[i]
        if char == "\\":
            current.append(segment[i : i + 2])
            i += 2
        elif char == "[":
            j = i + 1
            if j < end and segment[j] in "!^":
                j += 1
            if j < end and segment[j] == "]":
                j += 1
            while j < end and segment[j] != "]":
                j += 1
            stop = j + 1 if j < end else i + 1  # an open '[' is a character: pathspec decides
            current.append(segment[i:stop])
            i = stop
        elif char in "*?":
            j = i
            while j < end and segment[j] in "*?":
                j += 1
            run = segment[i:j]
            current.append("?" * run.count("?"))
            if "*" in run:
                pieces.append("".join(current))
                current = []
            i = j
        else:
            current.append(char)
            i += 1
    pieces.append("".join(current))
    return pieces


def _segment_regex(segment: str, translate: _Translate, range_error: Literal["literal", "raise"]) -> str:
    pieces = _pieces(segment)
    if len(pieces) == 1:
        return translate(pieces[0], range_error)
    first, *middle, last = (translate(piece, range_error) for piece in pieces)
    found = "".join(f"(?>{_STAR}?{piece})" if _ATOMIC and piece else f"{_STAR}{piece}" for piece in middle)
    return f"{first}{found}{_STAR}{last}"


def _between_globstars(regex: str) -> str:
    """The segments between two inner ``**`` found at their leftmost place and kept there.

    pathspec writes an inner ``**`` as ``(?:/.+)?``; with several of them every way of
    sharing the path among them is tried (``**/a/**/a/**/a/**/a/**/a/**/b`` took a second
    on a path 40 folders deep). Segments followed by another ``**`` lose nothing by matching
    as early as they can, since that ``**`` takes whatever comes between. The last ones are
    left as they are: they must end the path or meet a folder's end.
    """
    parts = regex.split(_GLOBSTAR)
    if not _ATOMIC or len(parts) < 3:
        return regex
    first, *middle, last = parts
    found = "".join(f"(?>(?:/.+?)??{group}(?=/|$))" for group in middle)
    return f"{first}{found}{_GLOBSTAR}{last}"


@lru_cache(maxsize=1)
def _pattern_class() -> type[GitIgnoreSpecPattern]:
    from pathspec.patterns.gitignore.spec import GitIgnoreSpecPattern

    translate = GitIgnoreSpecPattern._translate_segment_glob

    class BoundedPattern(GitIgnoreSpecPattern):
        """pathspec's gitignore pattern, each segment compiled so that it cannot backtrack
        without bound (see the module's docstring)."""

        @staticmethod
        def _translate_segment_glob(pattern: str, range_error: Literal["literal", "raise"]) -> str:
            return _segment_regex(pattern, translate, range_error)

        @classmethod
        def pattern_to_regex(cls, pattern: str) -> tuple[str | None, bool | None]:  # type: ignore[override]
            regex, include = super().pattern_to_regex(pattern)
            return (_between_globstars(regex) if isinstance(regex, str) else regex), include

    return BoundedPattern


def _normal(line: str) -> str:
    """A segment of three stars or more is git's ``**`` (git reads any run of stars
    between slashes so); pathspec would read it as one segment of ``*``."""
    if "***" not in line:
        return line
    return "/".join("**" if len(part) > 2 and set(part) == {"*"} else part for part in line.split("/"))


def _compile(lines: Sequence[str]) -> GitIgnoreSpec:
    import pathspec

    return pathspec.GitIgnoreSpec.from_lines(_pattern_class(), [_normal(line) for line in lines])


def compile_lines(lines: Sequence[str]) -> GitIgnoreSpec:
    """The gitignore ``lines`` as one spec; a line pathspec cannot compile is left out.

    git reads a line it cannot make sense of (a lone ``!``, a pattern that ends in an
    unescaped backslash, ``**/\\``) as one that matches nothing, and goes on: a
    .gitignore git accepts is accepted here. (gpudoctor's own settings are checked
    before they get here: see ``problem``.)
    """
    try:
        return _compile(lines)
    except (ValueError, re.error):
        return _compile([line for line in lines if problem(line) is None])


@lru_cache(maxsize=256)
def problem(pattern: str) -> str | None:
    """Why ``pattern`` cannot be compiled, in words fit for a user; None if it can."""
    try:
        _compile([pattern])
    except (ValueError, re.error) as exc:
        body = pattern.rstrip(" ")
        if (len(body) - len(body.rstrip("\\"))) % 2:
            return "it ends in a backslash that escapes nothing"
        if body == "!":
            return "a '!' with no pattern after it"
        return str(exc)
    return None


def check(patterns: Sequence[str], where: str) -> None:
    """Raise GpudoctorError naming ``where`` (a key of a file, an option) for the first
    pattern that cannot be compiled."""
    from gpudoctor.errors import GpudoctorError
    from gpudoctor.lint.reporters.printable import printable

    for pattern in patterns:
        reason = problem(pattern)
        if reason is not None:
            # Not repr(): it would show the backslash a user typed as two.
            raise GpudoctorError(f"invalid pattern '{printable(pattern)}' in {where}: {reason}")
