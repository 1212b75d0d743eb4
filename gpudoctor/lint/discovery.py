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


def _named_folder_specs(root: Path) -> list[tuple[Path, object]]:
    """The .gitignore files above a folder named on the command line, as they apply to it.

    The folder is checked even if one of them lists it (as ruff does). A pattern that
    matches the folder or a folder on the way down to it is dropped if it is anchored
    (``/build``, ``out/gen``); an unanchored one (``build``, ``gen*``) still applies below
    the named folder, as it would to any other folder of that name.
    """
    import pathspec

    specs: list[tuple[Path, object]] = []
    below: list[object] = []  # unanchored patterns that matched the way down
    for base in reversed(root.parents):
        spec = _gitignore_spec(base)
        if spec is None:
            continue
        parts = root.relative_to(base).parts
        folders = ["/".join(parts[: i + 1]) + "/" for i in range(len(parts))]
        kept = []
        for pattern in spec.patterns:
            if pattern.include and any(pattern.match_file(f) for f in folders):
                if "/" not in str(getattr(pattern, "pattern", "/")).rstrip("/"):
                    below.append(pattern)
                continue
            kept.append(pattern)
        specs.append((base, pathspec.GitIgnoreSpec(kept)))
    if below:
        specs.append((root, pathspec.GitIgnoreSpec(below)))
    return specs


def _ignored(path: Path, is_dir: bool, specs: list[tuple[Path, object]]) -> bool:
    """As git decides: the deepest .gitignore with a word on the path wins (its ``!`` can
    bring back what one above excluded), and a folder's exclusion covers what is in it."""
    for base, spec in reversed(specs):
        try:
            rel = path.relative_to(base).as_posix()
        except ValueError:
            continue
        result = spec.check_file(rel + "/" if is_dir else rel)  # type: ignore[attr-defined]
        if result.include is not None:
            return bool(result.include)
    return False


def _walk(root: Path, excluded: Callable[[Path], bool]) -> Iterator[Path]:
    """The Python files under ``root`` (as given: relative stays relative), in order."""
    top = Path(os.path.abspath(root))
    specs = _named_folder_specs(top)
    own = _gitignore_spec(top)
    if own is not None:
        specs.append((top, own))
    for dirpath, dirnames, filenames in os.walk(top):  # followlinks=False: no symlink loops
        here = Path(dirpath)
        spec = _gitignore_spec(here) if here != top else None
        if spec is not None:
            specs.append((here, spec))
        shown = root / here.relative_to(top)
        dirnames[:] = sorted(
            name for name in dirnames
            if name not in DEFAULT_EXCLUDES
            and not name.endswith(".egg-info")
            and not _ignored(here / name, True, specs)
            and not excluded(shown / name)
        )
        for name in sorted(filenames):
            if name.endswith(PY_SUFFIXES) and not _ignored(here / name, False, specs) \
                    and not excluded(shown / name):
                yield shown / name


def discover(paths: Sequence[str], excluded: Callable[[Path], bool] = lambda _: False,
             force_exclude: bool = False, missing: list[str] | None = None,
             skipped: list[str] | None = None, root: Path | None = None) -> list[Path]:
    """Return the files to lint, in a stable order, each once.

    Directories are walked, skipping what ``excluded`` says; files named explicitly are
    linted even when excluded, unless ``force_exclude`` (what pre-commit needs, since it
    names every changed file; the default exclusions then apply to them too). A path that
    does not exist is an error; with ``missing``, its message is added there and the other
    paths are still discovered. A file named explicitly that is not checked (a notebook)
    is said in ``skipped``. ``root``: the project's folder, below which a folder name among
    the default exclusions counts (a project that lives under ``/srv/dist/`` is checked).
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
        if force_exclude and (excluded(path) or in_default_excludes(path, root, path.is_dir())):
            continue
        if path.is_dir():
            for item in _walk(path, excluded):
                found.setdefault(item, None)
        else:
            found.setdefault(path, None)
    return list(found)


def in_default_excludes(path: Path, root: Path | None, is_dir: bool = False) -> bool:
    """Is ``path`` (a folder, or a file's folder) in a folder ruff excludes by default,
    counting the folders below ``root`` (or below the working folder) only?"""
    full = Path(os.path.abspath(path))
    for base in (root, Path.cwd()):
        if base is not None:
            try:
                parts = full.relative_to(os.path.abspath(base)).parts
                break
            except ValueError:
                continue
    else:
        parts = (full.name,) if is_dir else ()
    folders = parts if is_dir else parts[:-1]
    return any(part in DEFAULT_EXCLUDES or part.endswith(".egg-info") for part in folders)
