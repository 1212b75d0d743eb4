"""Absolute, symlink-free paths that never raise: a symlink loop is just a path."""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path


def real_path(path: str | os.PathLike[str]) -> Path:
    """``Path(path).resolve()``, or the absolute path when a symlink loop (or an unreadable
    folder) makes resolving impossible."""
    return _resolved(os.path.abspath(path))  # relative paths: against today's working folder


def forget_links() -> None:
    """Resolve afresh from now on: a run sees the links as they are when it starts (one
    process may lint again after a link was pointed elsewhere: the API, the tests)."""
    _resolved.cache_clear()


# Folders resolved one by one (recursively, remembered) up to this depth; deeper paths are
# resolved whole, so that no path, however deep, runs out of Python's recursion.
_DEEPEST = 64


@lru_cache(maxsize=16384)
def _resolved(absolute: str) -> Path:
    """Resolve the folder (remembered: the files of one folder share it), then the last
    component: one ``lstat`` per file rather than one per component of its path."""
    head, tail = os.path.split(absolute)
    if not tail or head == absolute:
        return _resolve(absolute)
    if absolute.count(os.sep) > _DEEPEST:  # (a path of hundreds of folders: resolved at once)
        return _resolve(absolute)
    candidate = os.path.join(_resolved(head), tail)
    try:
        linked = os.path.islink(candidate)
    except ValueError:  # a NUL in the name: nothing on disk has it
        return Path(candidate)
    return _resolve(candidate) if linked else Path(candidate)


def _resolve(path: str) -> Path:
    try:
        return Path(path).resolve()
    except (OSError, RuntimeError):  # RuntimeError: "Symlink loop" before Python 3.13
        return Path(path)
