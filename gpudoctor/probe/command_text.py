"""One process's command line as one short line of a report."""

from __future__ import annotations

import os
from collections.abc import Sequence


def short_command(argv: Sequence[str], limit: int = 80) -> str:
    """The program's file name and its arguments on one line, cut to ``limit`` characters.

    The program's directory is dropped so that a long virtualenv path does not push the
    arguments that tell processes apart off the end; runs of whitespace (the newlines of
    ``python -c`` code) become single spaces; a cut ends with an ellipsis.
    """
    if not argv:
        return ""
    text = " ".join(" ".join([os.path.basename(argv[0]) or argv[0], *argv[1:]]).split())
    return text if len(text) <= limit else text[:limit - 1] + "…"
