"""Absolute, symlink-free paths that never raise: a symlink loop is just a path."""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path


def real_path(path: str | os.PathLike[str]) -> Path:
    """``Path(path).resolve()``, or the absolute path when a symlink loop (or an unreadable
    folder) makes resolving impossible."""
    return _resolved(os.path.abspath(path))  # relative paths: against today's working folder


@lru_cache(maxsize=16384)
def _resolved(absolute: str) -> Path:
    try:
        return Path(absolute).resolve()
    except (OSError, RuntimeError):  # RuntimeError: "Symlink loop" before Python 3.13
        return Path(absolute)
