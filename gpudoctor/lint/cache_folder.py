"""Decide where the result cache may live, and delete only what gpudoctor can prove it made.

A cache folder is gpudoctor's when it is a real folder (not a symbolic link) of this user,
not writable by every user, holding ``CACHEDIR.TAG`` with gpudoctor's exact text: the
cachedir signature alone is not enough, other tools write the same first line. Inside such
a folder, and only there, a version folder (``<version>-<16 hex digits>``) that holds
nothing but gpudoctor's store files is a cache of another gpudoctor version and is deleted.
The markers (``CACHEDIR.TAG``, ``.gitignore``, ``README``) are written only into a folder
that is new, empty or already gpudoctor's, and never over an existing file.

Nothing here follows a symbolic link: a committed ``.gpudoctor_cache -> ..`` is a link,
not a folder gpudoctor made, so the run goes without a cache rather than into the
repository's parent.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable
from pathlib import Path

from gpudoctor.errors import GpudoctorError
from gpudoctor.input_file import read_regular
from gpudoctor.lint.cache_seal import mine

FOLDER = ".gpudoctor_cache"
TAG = ("Signature: 8a477f597d28d172789f06886806bc55\n"
       "# This file marks gpudoctor's cache (https://bford.info/cachedir/).\n")
README = "This folder is gpudoctor's result cache. It can be deleted at any time.\n"
# CACHEDIR.TAG first: once it is there the folder is gpudoctor's, so a run stopped
# half-way leaves a folder the next run recognises (and completes).
MARKERS = (("CACHEDIR.TAG", TAG), (".gitignore", "*\n"), ("README", README))

_VERSION_FOLDER = re.compile(r"[0-9A-Za-z.+!_-]+-[0-9a-f]{16}")
# The store files and their temporary files (see cache.py): nothing else is gpudoctor's.
_STORE_FILE = re.compile(r"(facts|results-[0-9a-f]{16}|walks-[0-9a-f]{16}-[0-9a-f]{16})\.json"
                         r"|\.(facts|results-[0-9a-f]{16}|walks-[0-9a-f]{16}-[0-9a-f]{16})\.json\.[A-Za-z0-9_]+\.tmp")

ABSENT = "absent"
EMPTY = "empty"
OURS = "ours"

Warn = Callable[[str], None]


def judge(folder: Path) -> str:
    """``ABSENT``, ``EMPTY`` (a folder of this user gpudoctor may take), ``OURS``, or why the
    folder is not gpudoctor's (a phrase: "is a symbolic link")."""
    try:
        info = folder.lstat()
    except (FileNotFoundError, NotADirectoryError):
        return ABSENT
    except OSError as exc:
        return f"cannot be looked at ({exc.strerror or exc})"
    if stat.S_ISLNK(info.st_mode):
        return "is a symbolic link"
    if not stat.S_ISDIR(info.st_mode):
        return "is not a folder"
    if not mine(info):
        return "belongs to another user"
    if info.st_mode & stat.S_IWOTH:
        return "can be written by every user"
    try:
        names = os.listdir(folder)
    except OSError as exc:
        return f"cannot be listed ({exc.strerror or exc})"
    if not names:
        return EMPTY
    if "CACHEDIR.TAG" not in names:
        return "holds files that are not gpudoctor's"
    try:
        tag = read_regular(folder / "CACHEDIR.TAG", 4096, follow=False)
    except OSError:
        return "holds a CACHEDIR.TAG gpudoctor cannot read"
    return OURS if tag == TAG.encode() else "is another tool's cache (its CACHEDIR.TAG is not gpudoctor's)"


def choose(root: Path, option: str | None, warn: Warn) -> Path | None:
    """The folder to keep the cache in, or None to run without one (``warn`` has said why).

    The default, ``.gpudoctor_cache`` in the project root, is taken as it is: the project
    (perhaps a pull request) decides what is there, so a link or a foreign folder means no
    cache. ``--cache-dir DIR`` is the user's own choice, typed on their command line: links
    in it are followed, and a folder that holds other things (``--cache-dir .``,
    ``--cache-dir ~/.cache``) gets the cache in a ``.gpudoctor_cache`` folder inside it,
    as a user who names a parent folder means. The one folder refused outright is the root
    of the file system (GpudoctorError): a cache folder there would be the system's, not
    the user's, and no one means it.
    """
    if option is None:
        folder = root / FOLDER
        state = judge(folder)
        if state in (ABSENT, EMPTY, OURS):
            return folder
        warn(f"{folder} {state}, not a folder gpudoctor made: running without the cache "
             "(remove it, or choose one with --cache-dir)")
        return None
    given = Path(os.path.realpath(os.path.expanduser(option)))
    if given.parent == given:
        raise GpudoctorError(f"--cache-dir {option}: the root of the file system is no place for a cache "
                             "(name a folder of its own, e.g. ~/.cache/gpudoctor)")
    state = judge(given)
    if state in (ABSENT, EMPTY, OURS):
        return given
    if not given.is_dir():
        warn(f"--cache-dir {option} {state}: running without the cache")
        return None
    inside = given / FOLDER
    inner = judge(inside)
    if inner in (ABSENT, EMPTY, OURS):
        if inner != OURS:  # said on the run that makes it; later runs just use it
            warn(f"--cache-dir {option} {state}: keeping the cache in {inside} instead")
        return inside
    warn(f"--cache-dir {option} {state}, and {inside} {inner}: running without the cache")
    return None


def claim(folder: Path) -> str:
    """Make ``folder`` gpudoctor's cache if it is new or empty; return ``OURS`` or why not.

    Called just before writing: the folder is judged again, as another run (or the user)
    may have changed it since the start. Raise OSError when it cannot be made.
    """
    state = judge(folder)
    if state == ABSENT:
        try:
            folder.mkdir(parents=True, mode=0o755)
        except FileExistsError:
            pass
        state = judge(folder)
    if state == EMPTY:
        _create(folder, *MARKERS[0])
        state = judge(folder)
    if state != OURS:
        return state
    for name, text in MARKERS[1:]:  # the user may have deleted one: put it back
        _create(folder, name, text)
    return OURS


def _create(folder: Path, name: str, text: str) -> None:
    """Write a new file; leave an existing one (or a link in its place) as it is."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(folder / name, flags, 0o644)
    except FileExistsError:
        return
    with os.fdopen(fd, "w", encoding="utf-8") as stream:
        stream.write(text)


def is_own_folder(folder: Path) -> bool:
    """Is ``folder`` a real folder of this user (the version folder, before use)?"""
    try:
        info = folder.lstat()
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and mine(info)


def prune(base: Path, keep: str) -> None:
    """Delete the other version folders of ``base`` (which ``claim`` found gpudoctor's).

    Through folder descriptors opened without following links, so that a folder swapped
    for a link between the look and the delete is not followed. A version folder holding
    anything but gpudoctor's store files is left alone: gpudoctor did not make all of it.
    Where the platform cannot do this (no ``dir_fd``: Windows), old folders are kept.
    """
    needed = (os.open, os.unlink, os.rmdir, os.stat)
    if not all(f in os.supports_dir_fd for f in needed) or not hasattr(os, "O_DIRECTORY"):
        return
    flags = os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        base_fd = os.open(base, flags)
    except OSError:
        return
    try:
        if not mine(os.fstat(base_fd)):
            return
        for name in os.listdir(base_fd):
            if name != keep and _VERSION_FOLDER.fullmatch(name):
                _remove_version_folder(base_fd, name, flags)
    except OSError:
        return  # another run pruning at the same time, or a folder that changed: next time
    finally:
        os.close(base_fd)


def _remove_version_folder(base_fd: int, name: str, flags: int) -> None:
    try:
        fd = os.open(name, flags, dir_fd=base_fd)
    except OSError:  # a link, a file, gone
        return
    try:
        if not mine(os.fstat(fd)):
            return
        names = os.listdir(fd)
        for entry in names:
            if not _STORE_FILE.fullmatch(entry):
                return
            if not stat.S_ISREG(os.stat(entry, dir_fd=fd, follow_symlinks=False).st_mode):
                return
        for entry in names:
            os.unlink(entry, dir_fd=fd)
    except OSError:
        return
    finally:
        os.close(fd)
    try:
        os.rmdir(name, dir_fd=base_fd)
    except OSError:
        pass
