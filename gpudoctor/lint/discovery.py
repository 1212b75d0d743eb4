"""Find the Python files (and Jupyter notebooks) to lint: walk directories, honour
.gitignore, skip the usual junk.

Only what can be source code is found: a regular file, or a symbolic link to one inside
the project. A named pipe or a device in a walked folder is passed over in silence, as git
passes over it (git never tracks one, so it is no project's source); named on the command
line it is an error, since the user asked for something that cannot be checked. A folder
that cannot be read is said, and the rest is still walked.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from gpudoctor.errors import GpudoctorError
from gpudoctor.input_file import NotReadable, not_regular, read_regular
from gpudoctor.lint.patterns import compile_lines
from gpudoctor.lint.reporters.printable import printable

if TYPE_CHECKING:
    from pathspec import GitIgnoreSpec
    from pathspec.patterns.gitignore.spec import GitIgnoreSpecPattern

# Folders no one wants linted: ruff's default exclusions (and this tool's cache, and
# Python's). A folder ruff does check (``build``, ``env``) is checked here too; a
# .gitignore usually lists them.
DEFAULT_EXCLUDES = frozenset({
    ".bzr", ".direnv", ".eggs", ".git", ".git-rewrite", ".hg", ".ipynb_checkpoints", ".mypy_cache",
    ".nox", ".pants.d", ".pyenv", ".pytest_cache", ".pytype", ".ruff_cache", ".svn", ".tox", ".venv",
    ".vscode", "__pypackages__", "_build", "buck-out", "dist", "node_modules", "site-packages", "venv",
    ".gpudoctor_cache", "__pycache__",
})
# Jupyter notebooks are read as the program of their code cells (see notebook.py).
PY_SUFFIXES = (".py", ".pyi", ".ipynb")
# Named on the command line, these are said to be skipped rather than read as Python.
NOT_CHECKED: dict[str, str] = {}
# What reading a file that is simply not there says (no warning for a folder without a .gitignore).
_ABSENT = (errno.ENOENT, errno.ENOTDIR)


def _gitignore_spec(folder: Path, problems: list[str]) -> GitIgnoreSpec | None:
    """The .gitignore of ``folder`` compiled, or None; a .gitignore that is there but
    cannot be read is said in ``problems`` (git warns too) and counts as none."""
    ignore_file = folder / ".gitignore"
    try:
        raw = read_regular(ignore_file)  # too large (git too has a bound) is said, not read
    except OSError as exc:
        if isinstance(exc, NotReadable) or exc.errno not in _ABSENT:
            problems.append(f"cannot read {printable(str(ignore_file))}: {exc.strerror or exc}")
        return None
    # Names that are not UTF-8 come from os.scandir with their bytes as lone surrogates;
    # a pattern's bytes read the same way match them. git skips a byte order mark.
    text = raw.decode("utf-8", "surrogateescape").removeprefix("\ufeff")
    return compile_lines(text.splitlines())


def _named_folder_specs(root: Path, problems: list[str]) -> list[tuple[Path, GitIgnoreSpec]]:
    """The .gitignore files above a folder named on the command line, as they apply to it.

    The folder is checked even if one of them lists it (as ruff does). A pattern that
    matches the folder or a folder on the way down to it is dropped if it is anchored
    (``/build``, ``out/gen``); an unanchored one (``build``, ``gen*``) still applies below
    the named folder, as it would to any other folder of that name.
    """
    import pathspec

    specs: list[tuple[Path, GitIgnoreSpec]] = []
    below: list[GitIgnoreSpecPattern] = []  # unanchored patterns that matched the way down
    for base in reversed(root.parents):
        spec = _gitignore_spec(base, problems)
        if spec is None:
            continue
        parts = root.relative_to(base).parts
        folders = ["/".join(parts[: i + 1]) + "/" for i in range(len(parts))]
        kept: list[GitIgnoreSpecPattern] = []
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


def _ignored(path: Path, is_dir: bool, specs: Sequence[tuple[Path, GitIgnoreSpec]]) -> bool:
    """As git decides: the deepest .gitignore with a word on the path wins (its ``!`` can
    bring back what one above excluded), and a folder's exclusion covers what is in it."""
    for base, spec in reversed(specs):
        try:
            rel = path.relative_to(base).as_posix()
        except ValueError:
            continue
        result = spec.check_file(rel + "/" if is_dir else rel)
        if result.include is not None:
            return bool(result.include)
    return False


def _inside(path: str, folders: Sequence[str]) -> bool:
    return any(path == folder or path.startswith(folder.rstrip(os.sep) + os.sep) for folder in folders)


def _source_file(entry: os.DirEntry[str], within: Sequence[str]) -> bool:
    """Is this directory entry a file to lint: a regular file, or a symbolic link to one
    inside ``within`` (the project)? A link that leads nowhere or loops is kept: reading
    it then says why it cannot be read (GD000), as for any file that is there but broken."""
    try:
        if not entry.is_symlink():
            return entry.is_file(follow_symlinks=False)  # the type the listing gave: no system call
        info = os.stat(entry.path)
    except OSError:
        return True
    # A link out of the project is someone else's code (and a fix would write there), and
    # a link to a device (/dev/zero) or a pipe is nothing to read.
    return stat.S_ISREG(info.st_mode) and _inside(os.path.realpath(entry.path), within)


def _walk(root: Path, excluded: Callable[[Path], bool], within: Sequence[str],
          problems: list[str], walked: list[Path] | None = None) -> Iterator[Path]:
    """The Python files under ``root`` (as given: relative stays relative), in order:
    each folder's files, then its folders, by name. A folder that cannot be read is said
    in ``problems`` and passed over; ``root`` itself raises its OSError. Symbolic links to
    folders are not followed (no loops, no walking out of the project). Each folder read
    is added to ``walked``, if given."""
    top = Path(os.path.abspath(root))
    specs = tuple(_named_folder_specs(top, problems))
    # Depth first with a stack rather than recursion: a deep tree must not hit Python's limit.
    stack: list[tuple[Path, tuple[tuple[Path, GitIgnoreSpec], ...]]] = [(top, specs)]
    while stack:
        here, specs = stack.pop()
        try:
            with os.scandir(here) as listing:
                entries = sorted(listing, key=lambda e: e.name)
        except OSError as exc:
            if here == top:
                raise
            problems.append(f"cannot read folder {printable(str(root / here.relative_to(top)))}: "
                            f"{exc.strerror or exc}")
            continue
        if walked is not None:
            walked.append(here)
        if any(entry.name == ".gitignore" for entry in entries):
            own = _gitignore_spec(here, problems)
            if own is not None:
                specs = (*specs, (here, own))
        shown = root / here.relative_to(top)
        folders = []
        for entry in entries:
            name = entry.name
            if _is_folder(entry):
                if name not in DEFAULT_EXCLUDES and not name.endswith(".egg-info") \
                        and not _ignored(here / name, True, specs) and not excluded(shown / name):
                    folders.append(here / name)
            elif name.endswith(PY_SUFFIXES) and _source_file(entry, within) \
                    and not _ignored(here / name, False, specs) and not excluded(shown / name):
                yield shown / name
        stack.extend((folder, specs) for folder in reversed(folders))


def _is_folder(entry: os.DirEntry[str]) -> bool:
    """A folder to walk into: a real one (a symbolic link to a folder is not followed)."""
    try:
        return entry.is_dir(follow_symlinks=False)
    except OSError:
        return False


def discover(paths: Sequence[str], excluded: Callable[[Path], bool] = lambda _: False,
             force_exclude: bool = False, missing: list[str] | None = None,
             skipped: list[str] | None = None, root: Path | None = None,
             folders: list[Path] | None = None) -> list[Path]:
    """Return the files to lint, in a stable order, each once.

    Directories are walked, skipping what ``excluded`` says; files named explicitly are
    linted even when excluded, unless ``force_exclude`` (what pre-commit needs, since it
    names every changed file; the default exclusions then apply to them too). A path that
    does not exist, cannot be read or is not a file or folder (a named pipe) is an error;
    with ``missing``, its message is added there and the other paths are still discovered.
    A file named explicitly that is not checked (a notebook), and a folder met in a walk
    that cannot be read, are said in ``skipped``. ``root``: the project's folder, below
    which a folder name among the default exclusions counts (a project that lives under
    ``/srv/dist/`` is checked), and inside which a symbolic link met in a walk may lead.
    ``folders``: each folder walked is added to it.
    """
    found: dict[Path, None] = {}
    problems: list[str] = []

    def fail(message: str) -> None:
        if missing is None:
            raise GpudoctorError(message)
        missing.append(message)

    for raw in paths or ["."]:
        path = Path(raw)
        try:
            info = path.stat()
        except OSError as exc:
            fail(_missing_message(raw, path, exc))
            continue
        reason = NOT_CHECKED.get(path.suffix.lower())
        if reason is not None and stat.S_ISREG(info.st_mode):
            if skipped is not None:
                skipped.append(f"{printable(raw)}: skipped ({reason})")
            continue
        is_dir = stat.S_ISDIR(info.st_mode)
        if force_exclude and (excluded(path) or in_default_excludes(path, root, is_dir)):
            continue
        if is_dir:
            within = [os.path.realpath(path)] + ([os.path.realpath(root)] if root is not None else [])
            try:
                for item in _walk(path, excluded, within, problems, folders):
                    found.setdefault(item, None)
            except OSError as exc:
                fail(f"cannot read folder {printable(raw)}: {exc.strerror or exc}")
        elif stat.S_ISREG(info.st_mode):
            found.setdefault(path, None)
        else:
            fail(f"{printable(raw)}: {not_regular(info.st_mode)}")
    if skipped is not None:
        skipped.extend(problems)
    return list(found)


def _missing_message(raw: str, path: Path, exc: OSError) -> str:
    if exc.errno in _ABSENT or exc.errno == errno.ELOOP:
        if os.path.islink(path):
            return f"{printable(raw)}: a symbolic link to nothing (or a symlink loop)"
        if exc.errno != errno.ELOOP:
            return f"{printable(raw)}: no such file or directory"
    return f"{printable(raw)}: {exc.strerror or exc}"


def in_default_excludes(path: Path, root: Path | None, is_dir: bool = False) -> bool:
    """Is ``path`` (a folder, or a file's folder) in a folder ruff excludes by default,
    counting the folders below ``root`` (or below the working folder) only?"""
    from gpudoctor.safe_path import working_folder

    full = Path(os.path.abspath(path))
    for base in (root, working_folder()):
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
