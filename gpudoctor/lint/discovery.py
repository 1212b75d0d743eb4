"""Find the Python files to lint: walk directories, honour .gitignore, skip the usual junk."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from gpudoctor.errors import GpudoctorError

# Folders no one wants linted: ruff's default exclusions (and this tool's cache, and
# Python's). A folder ruff does check (``build``, ``env``) is checked here too; a
# .gitignore usually lists them.
DEFAULT_EXCLUDES = frozenset({
    ".bzr", ".direnv", ".eggs", ".git", ".git-rewrite", ".hg", ".ipynb_checkpoints", ".mypy_cache",
    ".nox", ".pants.d", ".pyenv", ".pytest_cache", ".pytype", ".ruff_cache", ".svn", ".tox", ".venv",
    ".vscode", "__pypackages__", "_build", "buck-out", "dist", "node_modules", "site-packages", "venv",
    ".gpudoctor_cache", "__pycache__",
})
PY_SUFFIXES = (".py", ".pyi")
# Named on the command line, these are said to be skipped rather than read as Python.
NOT_CHECKED = {".ipynb": "Jupyter notebooks are not checked yet"}


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


def _without_patterns_matching(spec, root: Path, base: Path):  # type: ignore[no-untyped-def]
    """A folder named on the command line is checked even if a .gitignore above it lists it
    (as ruff does): the patterns that match the folder (or a folder above it) are dropped;
    what the others say of its contents still holds."""
    import pathspec

    try:
        parts = root.relative_to(base).parts
    except ValueError:
        return spec
    folders = ["/".join(parts[: i + 1]) + "/" for i in range(len(parts))]
    kept = [p for p in spec.patterns if not (p.include and any(p.match_file(f) for f in folders))]
    return pathspec.GitIgnoreSpec(kept) if len(kept) != len(spec.patterns) else spec


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
        if spec is not None and parent != root:
            spec = _without_patterns_matching(spec, root, parent)
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
             force_exclude: bool = False, missing: list[str] | None = None,
             skipped: list[str] | None = None) -> list[Path]:
    """Return the files to lint, in a stable order, each once.

    Directories are walked, skipping what ``excluded`` says; files named explicitly are
    linted even when excluded, unless ``force_exclude`` (what pre-commit needs, since it
    names every changed file; the default exclusions then apply to them too). A path that
    does not exist is an error; with ``missing``, its message is added there and the other
    paths are still discovered. A file named explicitly that is not checked (a notebook)
    is said in ``skipped``.
    """
    found: dict[Path, None] = {}
    for raw in paths or ["."]:
        path = Path(raw)
        reason = NOT_CHECKED.get(path.suffix.lower())
        if reason is not None and path.is_file():
            if skipped is not None:
                skipped.append(f"{raw}: skipped ({reason})")
            continue
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
        elif not (force_exclude and (excluded(path) or _in_default_excludes(path))):
            found.setdefault(path, None)
    return list(found)


def _in_default_excludes(path: Path) -> bool:
    return any(part in DEFAULT_EXCLUDES or part.endswith(".egg-info") for part in path.parent.parts)
