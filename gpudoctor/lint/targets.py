"""What a run may target: the Python versions and platforms whose start-method defaults
the rules know.

Its own module, free of imports, because both the command line's options and the
``pyproject.toml`` reader check values against it, and the options module must stay
import-light (``gpudoctor lint --help`` answers without the rest of the linter).
"""

from __future__ import annotations

TARGET_VERSIONS = ("py310", "py311", "py312", "py313", "py314")
PLATFORMS = ("linux", "darwin", "win32")
