"""Which project file a module name means: resolved through directory listings, each read once."""

from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Callable
from pathlib import Path

from gpudoctor.lint.paths import real_path

_LISTED = (".py", ".pyi", ".ipynb")


class ModuleFinder:
    """Resolve module names under a project's roots; remember what each answer looked at."""

    def __init__(self, roots: list[Path], real: Callable[[Path], Path]) -> None:
        self._roots = roots
        self._real = real
        self._dirs: dict[Path, Path] = {}
        self._resolved: dict[tuple[Path, str, int], tuple[Path | None, frozenset[Path]]] = {}
        self._files: dict[tuple[Path, tuple[str, ...]], tuple[Path | None, tuple[Path, ...]]] = {}
        self._listings: dict[Path, frozenset[str]] = {}
        self._links: dict[Path, tuple[str, ...]] = {}  # folder -> "name -> real path" of its links
        self._digests: dict[Path, str] = {}

    def resolve(self, importer: Path, name: str, level: int = 0) -> tuple[Path | None, frozenset[Path]]:
        """The project file ``name`` means in ``importer``, and the folders whose listings
        the answer depends on."""
        home = self._dirs.get(importer)
        if home is None:
            home = self._dirs[importer] = self._real(importer).parent
        key = (home, name, level)
        found = self._resolved.get(key)
        if found is None:
            consulted: list[tuple[Path, tuple[str, ...]]] = []
            target = self._resolve(home, name, level, consulted)
            found = self._resolved[key] = (target, frozenset(
                folder for base, parts in consulted for folder in self._files[(base, parts)][1]))
        return found

    def listing_digest(self, folder: Path) -> str:
        """A hash of what an import can name in ``folder``: the names, and where each
        symbolic link among them leads (an import through ``link.py`` reads the file it
        points to, so pointing it elsewhere changes what the import means)."""
        found = self._digests.get(folder)
        if found is None:
            lines = sorted(self._listing(folder)) + list(self._links.get(folder, ()))
            found = self._digests[folder] = hashlib.blake2b(
                "\n".join(lines).encode(errors="surrogateescape"), digest_size=16).hexdigest()
        return found

    def _resolve(self, home: Path, name: str, level: int,
                 consulted: list[tuple[Path, tuple[str, ...]]]) -> Path | None:
        parts = [p for p in name.split(".") if p]
        if level:
            base = home
            for _ in range(level - 1):
                base = base.parent
            consulted.append((base, tuple(parts)))
            return self._module_file(base, parts)
        bases = (home, *self._roots)
        if parts and parts[0] in sys.stdlib_module_names:
            # Inside a package, ``import multiprocessing`` is the standard library's, never a
            # sibling ``multiprocessing.py`` (Python 3 has no implicit relative imports; a
            # script's own folder comes first on the path only for the script run).
            consulted.append((home, ("__init__",)))
            if self._module_file(home, ["__init__"]) is not None:
                bases = tuple(self._roots)
        for base in bases:
            consulted.append((base, tuple(parts)))
            found = self._module_file(base, parts)
            if found is not None:
                return found
        return None

    def _module_file(self, base: Path, parts: list[str]) -> Path | None:
        key = (base, tuple(parts))
        found = self._files.get(key)
        if found is None:
            folders: list[Path] = []
            found = self._files[key] = (self._find_module(base, parts, folders), tuple(folders))
        return found[0]

    def _find_module(self, base: Path, parts: list[str], consulted: list[Path]) -> Path | None:
        """``parts`` as a module under ``base``: a ``.py`` file or a package's ``__init__.py``.

        Directory listings are read once each, so resolving every import of a large
        project costs one system call per directory, not several per import.
        """
        if not parts:
            candidate = base / "__init__.py"
        else:
            folder = base.joinpath(*parts[:-1])
            consulted.append(folder)
            names = self._listing(folder)
            if parts[-1] + ".py" in names:
                candidate = folder / (parts[-1] + ".py")
            elif parts[-1] in names:
                candidate = folder / parts[-1] / "__init__.py"
            else:
                return None
        consulted.append(candidate.parent)
        if candidate.name not in self._listing(candidate.parent) or not candidate.is_file():
            return None
        return real_path(candidate)

    def has_folder(self, importer: Path, name: str) -> bool:
        """Is there a folder ``name`` beside ``importer`` or in a project root (a package,
        perhaps a namespace package, that an absolute import can name)?"""
        home = self._dirs.get(importer) or self._real(importer).parent
        return any(name in self._listing(base) and (base / name).is_dir() for base in (home, *self._roots))

    def submodule(self, folder: Path, name: str, consulted: set[Path] | None = None) -> Path | None:
        """The module ``name`` of the package in ``folder`` (``consulted``: the folders looked at)."""
        names = self._listing(folder)
        if consulted is not None:
            consulted.add(folder)
        if name + ".py" in names:
            return real_path(folder / (name + ".py"))
        if name in names:
            if consulted is not None:
                consulted.add(folder / name)
            if "__init__.py" in self._listing(folder / name):
                return real_path(folder / name / "__init__.py")
        return None

    def _listing(self, folder: Path) -> frozenset[str]:
        names = self._listings.get(folder)
        if names is None:
            links: list[str] = []
            try:
                with os.scandir(folder) as entries:
                    # What an import can name: modules and packages (not dot-folders); and
                    # the other files a project's discovery finds (stubs, notebooks), whose
                    # arrival changes which files may call a named one (engine.py's plan).
                    found = [entry for entry in entries if not entry.name.startswith(".")
                             and (entry.name.endswith(_LISTED) or entry.is_dir())]
                names = frozenset(entry.name for entry in found)
                # Links are rare: the real path of each costs a few system calls.
                links = sorted(f"{entry.name}\0{os.path.realpath(entry.path)}"
                               for entry in found if entry.is_symlink())
            except OSError:
                names = frozenset()
            self._listings[folder] = names
            if links:
                self._links[folder] = tuple(links)
        return names
