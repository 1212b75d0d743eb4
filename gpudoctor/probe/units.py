"""Parse and format byte sizes ("2 GiB", "512M") and durations (stdlib only)."""

from __future__ import annotations

import math
import re

_FACTORS = {
    "": 1,
    "b": 1,
    "k": 1000,
    "kb": 1000,
    "ki": 1 << 10,
    "kib": 1 << 10,
    "m": 1000**2,
    "mb": 1000**2,
    "mi": 1 << 20,
    "mib": 1 << 20,
    "g": 1000**3,
    "gb": 1000**3,
    "gi": 1 << 30,
    "gib": 1 << 30,
    "t": 1000**4,
    "tb": 1000**4,
    "ti": 1 << 40,
    "tib": 1 << 40,
}
# No machine has this much memory, nor writes this much output: a larger size is a typo.
MAX_SIZE = 1 << 60


def is_unit(word: str) -> bool:
    """Tell whether ``word`` is a size unit alone ("GB", "MiB", "g"), as in ``8 GB``."""
    return word.lower() in _FACTORS and word != ""


def parse_size(text: str) -> int:
    """Parse "2 GiB", "512M", "1.5gb" or a plain byte count; raise ValueError otherwise,
    and for a size no machine has (more than 1 EiB)."""
    found = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([a-zA-Z]*)\s*", text)
    shown = repr(text if len(text) <= 40 else text[:39] + "…")
    if found is None or found.group(2).lower() not in _FACTORS:
        raise ValueError(f"not a size: {shown} (use e.g. 512MiB, 2GiB, 1.5GB)")
    value = float(found.group(1)) * _FACTORS[found.group(2).lower()]
    if not math.isfinite(value) or value > MAX_SIZE:  # a number of 400 digits is inf as a float
        raise ValueError(f"not a possible size: {shown} (more than 1 EiB)")
    return int(value)


def format_size(value: int | None) -> str:
    """Format bytes with a binary unit ("1.5 GiB"); "n/a" for None."""
    if value is None:
        return "n/a"
    size = float(value)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(size) < 1024:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TiB"
