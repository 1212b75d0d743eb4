"""Seal the result cache's files with a key only this user has, so that a cache gpudoctor did
not write here cannot change what it reports.

A cache folder can arrive with the code: committed by mistake, or crafted in a pull
request to turn findings into "All checks passed!". Its files are JSON, so they can never
run code, but they decide which findings are shown. Each file therefore starts with an
HMAC-SHA256 of its content (and of its name, so one file cannot stand in for another),
keyed with a random secret kept outside every project, readable by this user only. A file
whose seal does not verify is not gpudoctor's own writing for this user: it is ignored,
and its JSON is never parsed (a crafted file cannot reach the parser).
"""

from __future__ import annotations

import hmac
import os
import secrets
import stat
import tempfile
from pathlib import Path

from gpudoctor.file_replace import signals_held

_MAGIC = b"gpudoctor-cache-1 "
_KEY_SIZE = 32
_DIGEST_HEX = 64  # sha256


def mine(info: os.stat_result) -> bool:
    """Is this file or folder this user's? (Where there are no user ids, Windows: yes.)"""
    return not hasattr(os, "geteuid") or info.st_uid == os.geteuid()


class Rejected(ValueError):
    """A cache file that is not gpudoctor's own writing; the message says why, in words."""


def key_file() -> Path:
    """Where this user's key lives: ``$XDG_CACHE_HOME/gpudoctor/key`` (or ``~/.cache/...``).

    A cache folder, not a configuration one: losing the key only makes the next run
    rebuild the cache. Never under a project, where it could be committed or planted.
    """
    base = os.environ.get("XDG_CACHE_HOME", "")
    # The XDG spec: a relative value is invalid and must be ignored.
    folder = Path(base) if os.path.isabs(base) else Path.home() / ".cache"
    return folder / "gpudoctor" / "key"


def user_key() -> bytes | str:
    """This user's key, made on first use; or, when it cannot be had safely, why (a
    sentence that names the file)."""
    try:
        path = key_file()
    except RuntimeError:  # Path.home(): no HOME and no password entry
        return "no home folder to keep the cache key in"
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        info = path.parent.lstat()
    except OSError as exc:
        return f"cannot make {path.parent}: {exc.strerror or exc}"
    # Whoever can write this folder can replace the key: it must be this user's alone.
    if not stat.S_ISDIR(info.st_mode) or not mine(info) or info.st_mode & 0o022:
        return f"{path.parent} is not a folder only this user can write"
    try:
        return _read(path)
    except FileNotFoundError:
        pass
    except OSError as exc:
        return f"cannot read {path}: {exc.strerror or exc}"
    except Rejected as exc:
        return f"{path} {exc} (delete it: a new one is made)"
    try:
        _create(path)
        return _read(path)
    except OSError as exc:
        return f"cannot make {path}: {exc.strerror or exc}"
    except Rejected as exc:
        return f"{path} {exc} (delete it: a new one is made)"


def _read(path: Path) -> bytes:
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
                 | getattr(os, "O_CLOEXEC", 0))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or not mine(info):
            raise Rejected("is not a file of this user")
        if info.st_mode & 0o077:
            raise Rejected("can be read or written by other users")
        data = os.read(fd, _KEY_SIZE + 1)
    finally:
        os.close(fd)
    if len(data) != _KEY_SIZE:
        raise Rejected("is not a gpudoctor key")
    return data


def _create(path: Path) -> None:
    """Write a new key whole, then link it into place: two runs starting at once agree on
    one key (the second link fails and that run reads the first one's). The signals that
    stop a run wait until the temporary file is gone (gpudoctor.file_replace)."""
    with signals_held():
        fd, temporary = tempfile.mkstemp(prefix=".key.", suffix=".tmp", dir=path.parent)  # 0600, O_EXCL
        try:
            with os.fdopen(fd, "wb") as stream:
                stream.write(secrets.token_bytes(_KEY_SIZE))
            try:
                os.link(temporary, path)
            except FileExistsError:
                pass
            except OSError:  # a file system without hard links
                os.replace(temporary, path)
        finally:
            Path(temporary).unlink(missing_ok=True)


def seal(key: bytes, name: str, body: bytes) -> bytes:
    """``body`` with its seal in front; ``name`` says which file of the cache it is."""
    return _MAGIC + _mac(key, name, body).encode() + b"\n" + body


def unseal(key: bytes, name: str, data: bytes) -> bytes:
    """The body ``seal`` wrapped; raise Rejected unless the seal verifies for ``name``."""
    if not data.startswith(_MAGIC):
        raise Rejected("not written by this version of gpudoctor (no seal)")
    start = len(_MAGIC)
    mac, newline = data[start:start + _DIGEST_HEX], data[start + _DIGEST_HEX:start + _DIGEST_HEX + 1]
    body = data[start + _DIGEST_HEX + 1:]
    if newline != b"\n" or not hmac.compare_digest(mac, _mac(key, name, body).encode()):
        raise Rejected("its seal does not match: edited, or not written by gpudoctor for this user")
    return body


def _mac(key: bytes, name: str, body: bytes) -> str:
    return hmac.new(key, name.encode() + b"\0" + body, "sha256").hexdigest()
