"""``[tool.gpudoctor]`` in pyproject.toml: read, validate, and name the key that is wrong."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gpudoctor.errors import GpudoctorError
from gpudoctor.lint.patterns import check as check_patterns
from gpudoctor.lint.targets import PLATFORMS, TARGET_VERSIONS

LIST_KEYS = ("select", "ignore", "extend-select", "exclude", "extend-exclude")
KNOWN_KEYS = (*LIST_KEYS, "per-file-ignores", "target-version", "platform")


@dataclass(frozen=True)
class FileConfig:
    """The validated ``[tool.gpudoctor]`` table; empty when there is none."""

    path: Path | None = None
    select: tuple[str, ...] | None = None
    ignore: tuple[str, ...] = ()
    extend_select: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    target_version: str | None = None
    platform: str | None = None
    requires_python: str | None = field(default=None)
    # ``[project] requires-python`` when it is there but not a string (a number, a list).
    requires_python_other: object = None

    @property
    def origin(self) -> str:
        return f"{self.path} [tool.gpudoctor]" if self.path else "the defaults"


def _strings(value: object, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise GpudoctorError(f"{where} must be a list of strings")
    return tuple(value)


def _patterns(table: dict[str, object], key: str, where: Callable[[str], str]) -> tuple[str, ...]:
    """The gitignore-syntax patterns under ``key``, each one that cannot be compiled an error.

    git lets the same line in a .gitignore match nothing, and so does discovery; but this
    is gpudoctor's own setting, and a pattern that silently excludes nothing would lint
    what the user meant to leave out (as ruff, which rejects a bad glob in ``exclude``).
    """
    patterns = _strings(table.get(key, []), where(key))
    check_patterns(patterns, where(key))
    return patterns


def _codes(value: object, where: str, known: Sequence[str]) -> tuple[str, ...]:
    codes = tuple(v.strip().upper() for v in _strings(value, where))
    for code in codes:
        if code != "ALL" and (not code.strip() or not any(k.startswith(code) for k in known)):
            raise GpudoctorError(f"unknown rule code or prefix {code!r} in {where}")
    return codes


def parse_table(data: dict[str, object], path: Path, known_codes: Sequence[str]) -> FileConfig:
    """Validate a parsed pyproject document; every error names the file and the key."""
    project = data.get("project")
    requires = project.get("requires-python") if isinstance(project, dict) else None
    tool = data.get("tool")
    table = tool.get("gpudoctor") if isinstance(tool, dict) else None
    if table is None:
        return FileConfig(path=None, requires_python=requires if isinstance(requires, str) else None,
                          requires_python_other=requires if not isinstance(requires, str) else None)
    origin = f"{path} [tool.gpudoctor]"
    if not isinstance(table, dict):
        raise GpudoctorError(f"{origin} must be a table")
    for key in table:
        if key not in KNOWN_KEYS:
            raise GpudoctorError(f"unknown key {key!r} in {origin} (known keys: {', '.join(KNOWN_KEYS)})")

    def where(key: str) -> str:
        return f"key {key!r} of {origin}"

    pfi: list[tuple[str, tuple[str, ...]]] = []
    raw_pfi = table.get("per-file-ignores", {})
    if not isinstance(raw_pfi, dict):
        raise GpudoctorError(f"{where('per-file-ignores')} must be a table of pattern = [codes]")
    for pattern, codes in raw_pfi.items():
        pfi.append((pattern, _codes(codes, f"{where('per-file-ignores')} ({pattern!r})", known_codes)))
    check_patterns(tuple(raw_pfi), where("per-file-ignores"))
    target = table.get("target-version")
    if target is not None and target not in TARGET_VERSIONS:
        raise GpudoctorError(
            f"invalid target-version {target!r} in {origin} (expected one of {', '.join(TARGET_VERSIONS)})")
    platform = table.get("platform")
    if platform is not None and platform not in PLATFORMS:
        raise GpudoctorError(
            f"invalid platform {platform!r} in {origin} (expected one of {', '.join(PLATFORMS)})")
    return FileConfig(
        path=path,
        select=_codes(table["select"], where("select"), known_codes) if "select" in table else None,
        ignore=_codes(table.get("ignore", []), where("ignore"), known_codes),
        extend_select=_codes(table.get("extend-select", []), where("extend-select"), known_codes),
        # Both add to the default folder exclusions (ruff's exclude replaces them; here they
        # always apply, so the two keys mean the same).
        exclude=_patterns(table, "exclude", where) + _patterns(table, "extend-exclude", where),
        per_file_ignores=tuple(pfi),
        target_version=target,
        platform=platform,
        requires_python=requires if isinstance(requires, str) else None,
        requires_python_other=requires if not isinstance(requires, str) else None,
    )
