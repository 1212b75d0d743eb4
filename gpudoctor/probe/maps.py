"""Which GPU runtimes a process has loaded, from its memory mappings (``/proc/PID/maps``).

Read from outside the process, so it works on any process of the user's, supervised or
attached to. Loaded is not initialized: a mapped TensorFlow library says TensorFlow was
imported, not that its thread pools exist.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from gpudoctor.knowledge.runtimes import LIBRARIES


def loaded_runtimes(pid: int) -> dict[str, tuple[str, str]]:
    """Return the GPU runtimes whose libraries ``pid`` has mapped: id -> (path, address)."""
    with open(f"/proc/{pid}/maps") as maps:
        return runtimes_in(maps)


def runtimes_in(lines: Iterable[str]) -> dict[str, tuple[str, str]]:
    """The runtimes of the libraries a ``/proc/PID/maps`` text maps: id -> (path, address)."""
    found: dict[str, tuple[str, str]] = {}
    for line in lines:
        parts = line.split(None, 5)
        if len(parts) < 6:
            continue
        path = parts[5].strip()
        name = os.path.basename(path)
        for mark, runtime in LIBRARIES:
            if runtime not in found and _is(mark, path, name):
                found[runtime] = (path, parts[0].split("-", 1)[0])
    return found


def _is(mark: str, path: str, name: str) -> bool:
    """Is the file at ``path`` (named ``name``) the library ``mark`` names: a part of its
    name, or, for a mark with a folder ("jaxlib/_jax."), a name beginning so in that folder?"""
    folder, _, start = mark.rpartition("/")
    return name.startswith(start) and f"/{folder}/" in path if folder else mark in name
