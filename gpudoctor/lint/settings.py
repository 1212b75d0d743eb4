"""Settings of one lint run: target Python, platform, project root, rule selection."""

from __future__ import annotations

import os
import re
import stat
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from gpudoctor.errors import GpudoctorError
from gpudoctor.input_file import read_regular, too_many_digits
from gpudoctor.knowledge import processes
from gpudoctor.lint.paths import real_path
from gpudoctor.lint.patterns import compile_lines
from gpudoctor.lint.reporters.printable import printable
from gpudoctor.lint.selection import Selection

if TYPE_CHECKING:
    from pathspec import GitIgnoreSpec

SUPPORTED_MINORS = range(10, 15)  # py310 .. py314
_LOWER_BOUND = re.compile(r"(>=|~=|==|\^|>)\s*3\.(\d+)")


@dataclass(frozen=True)
class Settings:
    """Everything the analysis needs to know besides the files themselves."""

    selection: Selection
    target_minor: int
    platform: str
    project_root: Path
    exclude: tuple[str, ...] = ()
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    config_file: Path | None = None  # the pyproject.toml these came from (None: defaults)
    config_root: Path | None = None  # where exclude and per-file-ignores patterns start (else project_root)
    cache_root: Path | None = None  # where the cache folder goes by default (else project_root)
    search_callers: bool = True  # False: the project is only the named files (no folder walked for callers)
    # The newest 3.x minor the project supports (its requires-python's upper bound, else
    # the newest known); None: ``target_minor`` alone is judged.
    newest_minor: int | None = None

    @property
    def target(self) -> processes.Target:
        """The Pythons and platform judged, as the analysis carries them."""
        return processes.Target(self.target_minor, self.platform, self.newest_minor)

    def _relative(self, path: Path) -> str | None:
        try:
            return real_path(path).relative_to(real_path(self.config_root or self.project_root)).as_posix()
        except ValueError:
            return None

    def excluded(self, path: Path) -> bool:
        """True if ``path`` matches the configured ``exclude`` patterns (gitignore syntax)."""
        if not self.exclude:
            return False
        rel = self._relative(path)
        # os.path.isdir, not Path.is_dir: a folder that cannot be searched raises there.
        return rel is not None and _spec(self.exclude).match_file(rel + ("/" if os.path.isdir(path) else ""))

    def ignored_codes(self, path: Path) -> set[str]:
        """Codes (and prefixes) that ``per-file-ignores`` switches off for ``path``."""
        rel = self._relative(path)
        if rel is None:
            return set()
        return {code for pattern, codes in self.per_file_ignores if _spec((pattern,)).match_file(rel)
                for code in codes}

    @property
    def default_start_method(self) -> str:
        """Return multiprocessing's default start method for the target.

        fork on Linux up to 3.13, forkserver on Linux from 3.14, spawn on macOS
        (since 3.8) and Windows.
        """
        return processes.default_start_method(self.target_minor, self.platform)

    @property
    def forkserver_preloads_main(self) -> bool:
        """Whether the target's forkserver runs the main script's top level and forks every
        worker from it (3.13 and 3.14: see knowledge/processes.py)."""
        return processes.forkserver_preloads_main(self.target_minor)


@lru_cache(maxsize=64)
def _spec(patterns: tuple[str, ...]) -> GitIgnoreSpec:
    # The configuration's patterns were checked where they were read (config.py); one
    # given otherwise (a test, an API user) that cannot be compiled matches nothing.
    return compile_lines(patterns)


def parse_target_version(value: str, origin: str) -> int:
    """Turn ``py312`` into 12, or raise naming where the bad value came from."""
    match = re.fullmatch(r"py3(\d+)", value)
    if not match or _number(match.group(1)) not in SUPPORTED_MINORS:
        raise GpudoctorError(
            f"invalid target-version {value!r} in {origin} (expected py310 .. py314)"
        )
    return _number(match.group(1))


def _number(digits: str) -> int:
    """The number ``digits`` write, capped at 10000: a minor version past any Python is
    out of range (or clamped) all the same, and thousands of digits are more than ``int``
    converts (ValueError)."""
    digits = digits.lstrip("0") or "0"
    return int(digits) if len(digits) <= 4 else 10_000


def minor_from_requires_python(spec: str) -> int | None:
    """Return the oldest 3.x minor a ``requires-python`` specifier admits, if it names one."""
    minors = [_number(m.group(2)) for m in _LOWER_BOUND.finditer(spec)]
    if not minors:
        return None
    oldest = min(minors)
    return min(max(oldest, SUPPORTED_MINORS.start), SUPPORTED_MINORS.stop - 1)


_CLAUSE = re.compile(r"^\s*(<=|<|==|~=)\s*3\.(\d+)(\.(\d+|\*))?\s*$")


def newest_from_requires_python(spec: str) -> int | None:
    """Return the newest 3.x minor a ``requires-python`` specifier admits (``<3.14``: 13,
    ``<=3.12``, ``==3.12.*``, ``~=3.12.1``: 12), or None where it sets no upper bound on
    the minor (``>=3.10``, ``~=3.10``, ``<4``)."""
    bounds = []
    for clause in spec.split(","):
        match = _CLAUSE.match(clause)
        if match is None:
            continue
        op, minor, patch = match.group(1), _number(match.group(2)), match.group(3)
        if op == "<":
            bounds.append(minor - 1 if patch is None or set(patch) <= {".", "0"} else minor)
        elif op in ("<=", "==") or (op == "~=" and patch is not None):
            bounds.append(minor)
    return min(bounds) if bounds else None


def find_config(start: Path) -> tuple[Path | None, dict[str, object], Path | None, dict[str, object]]:
    """The nearest ``pyproject.toml`` at or above ``start`` that has a ``[tool.gpudoctor]``
    table (a pyproject.toml without it is skipped for the configuration, as ruff does),
    and the nearest one at all (the project: its folder is the root imports resolve from,
    and its ``requires-python`` the target), each with its contents."""
    here = start if os.path.isdir(start) else start.parent
    nearest: tuple[Path | None, dict[str, object]] = (None, {})
    for folder in (here, *here.parents):
        candidate = folder / "pyproject.toml"
        if not _present(candidate):
            continue
        data = read_pyproject(candidate)
        if nearest[0] is None:
            nearest = (candidate, data)
        tool = data.get("tool")
        if isinstance(tool, dict) and "gpudoctor" in tool:
            return candidate, data, *nearest
    return None, {}, *nearest


def _present(path: Path) -> bool:
    """Is there something at ``path`` to read as a configuration file? A folder of that name
    is not one, and a path that cannot even be looked at counts as absent; a named pipe or
    a device is there (read_pyproject then says it cannot be read, rather than blocking or
    passing it over in silence)."""
    try:
        return not stat.S_ISDIR(path.stat().st_mode)
    except (OSError, ValueError):
        return False


def read_pyproject(path: Path) -> dict[str, object]:
    """Parse a pyproject.toml, turning a syntax or encoding error into a user-facing message.

    TOML files are UTF-8; a byte order mark before the first key is accepted, as ruff does.
    """
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on 3.10 only
        import tomli as tomllib
    shown = printable(str(path))
    try:
        raw = read_regular(path)
    except OSError as exc:
        raise GpudoctorError(f"cannot read {shown}: {exc.strerror or exc}") from exc
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise GpudoctorError(f"cannot read {shown}: it is not UTF-8 text (byte {exc.start + 1} is "
                             f"{raw[exc.start:exc.start + 1]!r}); TOML files must be UTF-8") from exc
    try:
        data: dict[str, object] = tomllib.loads(text)
        return data
    except tomllib.TOMLDecodeError as exc:
        raise GpudoctorError(f"cannot read {shown}: {exc}") from exc
    # Valid TOML that Python's reader cannot hold: arrays or tables nested a few hundred
    # deep (its recursion), an integer of thousands of digits (the int conversion limit).
    except RecursionError:
        raise GpudoctorError(f"cannot read {shown}: its arrays or tables are nested too deeply") from None
    except ValueError as exc:
        digits = too_many_digits(exc)
        raise GpudoctorError(f"cannot read {shown}: {f'it holds {digits}' if digits else exc}") from None


def running_minor() -> int:
    """Return this interpreter's minor version, clamped to the supported range."""
    minor = sys.version_info.minor
    return min(max(minor, SUPPORTED_MINORS.start), SUPPORTED_MINORS.stop - 1)
