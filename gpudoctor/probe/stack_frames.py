"""Sort the lines of a captured stack for display: the user's frames, library frames,
native frames, and gpudoctor's own bootstrap, with the frame the process is blocked in.

A stack of a hung TensorFlow worker is sixty lines of C++ and library Python; the
two lines that matter are the user's own call and the frame it waits in. The HTML
report shows every frame but marks those, and leaves out the bootstrap's frames
(``sitecustomize.py`` wraps ``os.waitpid`` in every process of the tree), as the
explanation does: they are gpudoctor's, never where the program is blocked.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpudoctor.probe.stacks import is_bootstrap, is_library, is_main_thread, py_spy_frame

# What a line of a dump is.
HEADER = "header"  # "Process 8747: ...", "Python v3.11.7 (...)"
THREAD = "thread"  # a thread's title line
USER = "user"  # a Python frame in the user's own files
LIBRARY = "library"  # a Python frame in the standard library or an installed package
NATIVE = "native"  # a C/C++ frame (py-spy --native)
BOOTSTRAP = "bootstrap"  # gpudoctor's own sitecustomize: not shown

_PY_SPY_THREAD = re.compile(r"^Thread \d+")
_FAULTHANDLER_THREAD = re.compile(r"^(Current thread|Thread) 0x")
_FAULTHANDLER_FRAME = re.compile(r'^File "(.*)", line (\d+) in (.*)$')


@dataclass(frozen=True)
class Line:
    """One line of a stack dump, with what it is."""

    text: str
    kind: str
    blocked: bool = False  # the frame the main thread waits in, as the explanation names it


# The scenario scripts stand for a user's program: their frames are the ones to read, although
# they are files of the installed gpudoctor package.
_SCENARIOS = "gpudoctor/probe/scenarios/"


def _kind(where: str) -> str:
    if is_bootstrap(where):
        return BOOTSTRAP
    if _SCENARIOS in where and not where.rsplit(":", 1)[0].endswith("/__init__.py"):
        return USER
    return LIBRARY if is_library(where) else USER


def _classify(line: str, faulthandler: bool) -> tuple[str, str | None, str | None]:
    """Return (kind, function name, "name (where)") of one line."""
    stripped = line.strip()
    if not line.startswith(" "):
        thread = _FAULTHANDLER_THREAD if faulthandler else _PY_SPY_THREAD
        return (THREAD if thread.match(stripped) else HEADER), None, None
    if faulthandler:
        found = _FAULTHANDLER_FRAME.match(stripped)
        if found is None:
            return HEADER, None, None
        path, number, name = found.groups()
        where = f"{path}:{number}"
        return _kind(where), name, f"{name} ({where})"
    frame = py_spy_frame(stripped)
    if frame is None:
        return NATIVE, stripped, None
    if frame.python:
        return _kind(frame.where), frame.name, f"{frame.name} ({frame.where})"
    return NATIVE, frame.name, None


def _blocked_target(blocked_in: str | None) -> tuple[str | None, str | None]:
    """Split ``blocked_in`` ("native, Python name (where), in your code ...") into the
    native frame's name and the innermost Python frame, whichever it names."""
    if not blocked_in:
        return None, None
    if blocked_in.startswith("Python "):
        return None, blocked_in.removeprefix("Python ").split(", in your code ", 1)[0]
    return blocked_in.split(", Python ", 1)[0], None


def lines(text: str, source: str | None, blocked_in: str | None) -> list[Line]:
    """Return the lines of a stack dump, each with its kind; mark the blocked frame.

    ``source`` is the dump's ("py-spy" or "faulthandler"); ``blocked_in`` what the
    diagnosis named, so the frame marked is the one the explanation cites: the native
    frame it waits in, else its innermost Python frame, in the main thread.
    """
    faulthandler = source == "faulthandler"
    native_target, python_target = _blocked_target(blocked_in)
    classified = [(raw, *_classify(raw, faulthandler)) for raw in text.splitlines() if raw.strip()]
    titles = [raw.strip() for raw, kind, _, _ in classified if kind == THREAD]
    # The main thread, else the first one (as the diagnosis chose it).
    main = next((i for i, title in enumerate(titles) if is_main_thread(title)), 0)
    found: list[Line] = []
    thread = -1
    marked = False
    for raw, kind, name, label in classified:
        if kind == THREAD:
            thread += 1
        in_main = thread == main
        blocked = False
        if in_main and not marked and kind not in (THREAD, HEADER, BOOTSTRAP):
            blocked = (native_target is not None and kind == NATIVE and name == native_target) or \
                (python_target is not None and label == python_target)
            marked = blocked
        found.append(Line(raw.rstrip(), kind, blocked))
    return found
