"""The program's own source files, read (never imported) for what an explanation quotes:
where a pool was made, the test on the rank around a call, how many processes a launcher
was told to start."""

from __future__ import annotations

import ast
import functools
from collections.abc import Sequence
from pathlib import Path


@functools.lru_cache(maxsize=32)
def parsed(path: str) -> tuple[ast.Module, str] | None:
    """The file's syntax tree and text; None when it cannot be read or parsed."""
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
        return ast.parse(text), text
    except (OSError, SyntaxError, ValueError):
        return None


def file_of(where: str, cmdline: Sequence[str]) -> Path | None:
    """The file of a frame's "path:line": py-spy names a file under a ``sys.path`` entry
    relative to it (the script's folder, or the working directory of ``python -m``)."""
    path = Path(where.rsplit(":", 1)[0])
    if path.is_absolute():
        return path if path.is_file() else None
    folders = [Path(arg).parent for arg in cmdline if arg.endswith(".py")] + [Path.cwd()]
    return next((folder / path for folder in folders if (folder / path).is_file()), None)
