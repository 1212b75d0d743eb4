"""Find the Python files to lint: walk directories, honour .gitignore, skip the usual junk."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from gpudoctor.errors import GpudoctorError

# Folders no one wants linted; ruff skips the same kind by default.
DEFAULT_EXCLUDES = frozenset({
    ".git", ".hg", ".svn", ".venv", "venv", ".env", "env", "__pycache__", ".mypy_cache",
    ".pytest_cache", ".ruff_cache", ".tox", ".nox", ".eggs", "build", "dist", "node_modules",
    "site-packages", "__pypackages__", ".gpudoctor_cache", ".ipynb_checkpoints",
})
PY_SUFFIXES = (".py", ".pyi")


def _gitignore_spec(folder: Path):  # type: ignore[no-untyped-def]
    ignore_file = folder / ".gitignore"
    if not ignore_file.is_file():
        return None
    import pathspec

    try:
        lines = ignore_file.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    return pathspec.GitIgnoreSpec.from_lines(lines)


def _ignored(path: Path, is_dir: bool, specs: list[tuple[Path, object]]) -> bool:
    for base, spec in specs:
        try:
            rel = path.relative_to(base).as_posix()
        except ValueError:
            continue
        if is_dir:
            rel += "/"
        if spec.match_file(rel):  # type: ignore[attr-defined]
            return True
    return False


def _walk(root: Path, excluded: Callable[[Path], bool]) -> Iterator[Path]:
    specs: list[tuple[Path, object]] = []
    for parent in reversed((root, *root.parents)):
        spec = _gitignore_spec(parent)
        if spec is not None:
            specs.append((parent, spec))
    for dirpath, dirnames, filenames in os.walk(root):  # followlinks=False: no symlink loops
        here = Path(dirpath)
        spec = _gitignore_spec(here) if here != root else None
        if spec is not None:
            specs.append((here, spec))
        dirnames[:] = sorted(
            name for name in dirnames
            if name not in DEFAULT_EXCLUDES
            and not name.endswith(".egg-info")
            and not _ignored(here / name, True, specs)
            and not excluded(here / name)
        )
        for name in sorted(filenames):
            candidate = here / name
            if name.endswith(PY_SUFFIXES) and not _ignored(candidate, False, specs) \
                    and not excluded(candidate):
                yield candidate


def discover(paths: Sequence[str], excluded: Callable[[Path], bool] = lambda _: False,
             force_exclude: bool = False, missing: list[str] | None = None) -> list[Path]:
    """Return the files to lint, in a stable order, each once.

    Directories are walked, skipping what ``excluded`` says; files named explicitly are
    linted even when excluded, unless ``force_exclude`` (what pre-commit needs, since it
    names every changed file). A path that does not exist is an error; with ``missing``,
    its message is added there and the other paths are still discovered.
    """
    found: dict[Path, None] = {}
    for raw in paths or ["."]:
        path = Path(raw)
        if not path.exists():
            message = (f"{raw}: a symbolic link to nothing (or a symlink loop)" if path.is_symlink()
                       else f"{raw}: no such file or directory")
            if missing is None:
                raise GpudoctorError(message)
            missing.append(message)
            continue
        if path.is_dir():
            for item in _walk(path, excluded):
                found.setdefault(item, None)
        elif not (force_exclude and excluded(path)):
            found.setdefault(path, None)
    return list(found)
