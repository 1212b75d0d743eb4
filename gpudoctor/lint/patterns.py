"""Gitignore-syntax patterns (.gitignore files, ``exclude``, ``per-file-ignores``):
compiled as git reads them, and what is wrong with one that cannot be."""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathspec import GitIgnoreSpec


def compile_lines(lines: Sequence[str]) -> GitIgnoreSpec:
    """The gitignore ``lines`` as one spec; a line pathspec cannot compile is left out.

    git reads a line it cannot make sense of (a lone ``!``, a pattern that ends in an
    unescaped backslash, ``**/\\``) as one that matches nothing, and goes on: a
    .gitignore git accepts is accepted here. (gpudoctor's own settings are checked
    before they get here: see ``problem``.)
    """
    import pathspec

    try:
        return pathspec.GitIgnoreSpec.from_lines(lines)
    except (ValueError, re.error):
        return pathspec.GitIgnoreSpec.from_lines([line for line in lines if problem(line) is None])


@lru_cache(maxsize=256)
def problem(pattern: str) -> str | None:
    """Why ``pattern`` cannot be compiled, in words fit for a user; None if it can."""
    import pathspec

    try:
        pathspec.GitIgnoreSpec.from_lines([pattern])
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
