"""Parse and format byte sizes ("2 GiB", "512M") and durations (stdlib only)."""

from __future__ import annotations

import re

_FACTORS = {
    "": 1,
    "b": 1,
    "k": 1000,
    "kb": 1000,
    "kib": 1 << 10,
    "m": 1000**2,
    "mb": 1000**2,
    "mib": 1 << 20,
    "g": 1000**3,
    "gb": 1000**3,
    "gib": 1 << 30,
    "t": 1000**4,
    "tb": 1000**4,
    "tib": 1 << 40,
}


def parse_size(text: str) -> int:
    """Parse "2 GiB", "512M", "1.5gb" or a plain byte count; raise ValueError otherwise."""
    found = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([a-zA-Z]*)\s*", text)
    if found is None or found.group(2).lower() not in _FACTORS:
        raise ValueError(f"not a size: {text!r} (use e.g. 512MiB, 2GiB, 1.5GB)")
    return int(float(found.group(1)) * _FACTORS[found.group(2).lower()])


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
