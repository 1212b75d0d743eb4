"""The checked project: which file a module name means, and which files can matter."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

from gpudoctor.lint.analysis.prescan import Prescan, prescan
from gpudoctor.lint.analysis.reading import ParseFailure, read_text

if TYPE_CHECKING:
    from gpudoctor.lint.analysis.source import ParsedModule

# What a file must mention for a rule to report anything in it: a process or thread start,
# a GPU environment write or device configuration, a DataLoader, or a gpudoctor directive.
ACTS = re.compile(
    r"multiprocess|concurrent\.futures|ProcessPool|fork\(|DataLoader|start_processes|\.spawn\(|"
    r"environ\[[^\]\n]+\]\s*=[^=]|environ\.(?:update|setdefault)|putenv|set_memory_growth|"
    r"set_visible_devices|set_logical_device|set_virtual_device|parallelism_threads|"
    r"noqa:\s*GD|gpudoctor:"
)
# Words one of which a file matching ACTS contains (``str.find`` is much faster than the
# regular expression; the expression confirms).
_ACTS_WORDS = ("multiprocess", "concurrent.futures", "ProcessPool", "fork(", "DataLoader",
               "start_processes", ".spawn(", "environ", "putenv", "set_memory_growth",
               "set_visible_devices", "set_logical_device", "set_virtual_device",
               "parallelism_threads", "gpudoctor:")
_NOQA_GD = re.compile(r"noqa:\s*GD")
# What an imported module must mention for a GPU-using importer to matter: it starts
# processes (the importer's GPU work may run in them) or configures the GPU (after the
# importer initialized it).
STARTS = re.compile(
    r"multiprocess|concurrent\.futures|ProcessPool|fork\(|DataLoader|start_processes|\.spawn\(|"
    r"set_memory_growth|set_visible_devices|set_logical_device|set_virtual_device|parallelism_threads|"
    r"CUDA_VISIBLE_DEVICES|CUDA_DEVICE_ORDER|TF_FORCE_GPU|TF_GPU_ALLOCATOR|XLA_|CUPY_GPU|PYTORCH_CUDA"
)
# What a module must mention for its code to have effects worth following into it.
USES_GPU = re.compile(r"tensorflow|keras|cupy|torch|jax|numba|pycuda")
_IMPORT_LINE = re.compile(r"^\s*(?:from\s+(\.*[\w.]*)\s+import|import\s+([\w., ]+))", re.M)


class Project:
    """Files under one root, parsed on demand and each at most once."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self._roots = [self.root] + ([self.root / "src"] if (self.root / "src").is_dir() else [])
        self._texts: dict[Path, str | ParseFailure] = {}
        self._parsed: dict[Path, ParsedModule | ParseFailure] = {}
        self._gate: dict[Path, bool] = {}
        self._scans: dict[Path, Prescan | None] = {}
        self._files: dict[tuple[Path, tuple[str, ...]], Path | None] = {}
        self._dirs: dict[Path, Path] = {}
        self._listings: dict[Path, frozenset[str]] = {}
        self.linted: frozenset[Path] = frozenset()  # files whose own functions are entry points

    def text(self, path: Path) -> str | ParseFailure:
        path = path.resolve()
        if path not in self._texts:
            self._texts[path] = read_text(path)
        return self._texts[path]

    def prescan(self, path: Path) -> Prescan | None:
        """CPython's first look at the file (None: unreadable, or CPython cannot parse it)."""
        path = path.resolve()
        if path not in self._scans:
            text = self.text(path)
            self._scans[path] = None if isinstance(text, ParseFailure) else prescan(text)
        return self._scans[path]

    def parsed(self, path: Path) -> ParsedModule | ParseFailure:
        """The libcst tree, with the bodies no one is known to need left for later."""
        from gpudoctor.lint.analysis.source import parse

        path = path.resolve()
        if path not in self._parsed:
            text = self.text(path)
            if isinstance(text, ParseFailure):
                self._parsed[path] = text
            else:
                scan = self.prescan(path)
                elide = [] if scan is None else scan.elidable(
                    path in self.linted, self._acting_names(path, scan) if path in self.linted else frozenset())
                self._parsed[path] = parse(str(path), text, scan.units if scan else (), elide)
        return self._parsed[path]

    def _acting_names(self, path: Path, scan: Prescan) -> frozenset[str]:
        """Names ``path`` imports from project modules that start processes or configure the GPU."""
        out = set()
        for bound, module, level, member in scan.imports:
            targets = [self.resolve(path, module, level)]
            if member is not None:
                targets.append(self.resolve(path, f"{module}.{member}" if module else member, level))
            if any(t is not None and t != path and self._starts(t) for t in targets):
                out.add(bound)
        return frozenset(out)

    def resolve(self, importer: Path, name: str, level: int = 0) -> Path | None:
        """Return the project file a module name refers to, from ``importer``'s point of view."""
        parts = [p for p in name.split(".") if p]
        home = self._dirs.get(importer)
        if home is None:
            home = self._dirs[importer] = importer.resolve().parent
        if level:
            base = home
            for _ in range(level - 1):
                base = base.parent
            return self._module_file(base, parts)
        for base in (home, *self._roots):
            found = self._module_file(base, parts)
            if found is not None:
                return found
        return None

    def _module_file(self, base: Path, parts: list[str]) -> Path | None:
        key = (base, tuple(parts))
        if key not in self._files:
            self._files[key] = self._find_module(base, parts)
        return self._files[key]

    def _find_module(self, base: Path, parts: list[str]) -> Path | None:
        """``parts`` as a module under ``base``: a ``.py`` file or a package's ``__init__.py``.

        Directory listings are read once each, so resolving every import of a large
        project costs one system call per directory, not several per import.
        """
        if not parts:
            candidate = base / "__init__.py"
        else:
            folder = base.joinpath(*parts[:-1])
            names = self._listing(folder)
            if parts[-1] + ".py" in names:
                candidate = folder / (parts[-1] + ".py")
            elif parts[-1] in names:
                candidate = folder / parts[-1] / "__init__.py"
            else:
                return None
        if candidate.name not in self._listing(candidate.parent) or not candidate.is_file():
            return None
        return candidate.resolve()

    def _listing(self, folder: Path) -> frozenset[str]:
        names = self._listings.get(folder)
        if names is None:
            try:
                with os.scandir(folder) as entries:
                    names = frozenset(entry.name for entry in entries)
            except OSError:
                names = frozenset()
            self._listings[folder] = names
        return names

    def may_matter(self, path: Path) -> bool:
        """Cheap text gate for a file to lint: can a finding be reported in it?

        Yes if its code starts processes or configures the GPU itself, or if it uses a GPU
        framework and imports a project module that does (its pool may run this file's
        GPU work). The text is searched first; a file the search keeps is confirmed with
        CPython's parser, which ignores strings and comments and thread pools. Everything
        else is never parsed by libcst.
        """
        path = path.resolve()
        if path not in self._gate:
            text = self.text(path)
            if isinstance(text, ParseFailure):
                self._gate[path] = True  # reported as GD000
            else:
                self._gate[path] = (_mentions_acts(text) and self._acts(path)) or (
                    USES_GPU.search(text) is not None
                    and any(self._starts(dep) for dep in self._imports(path, text)))
        return self._gate[path]

    def _acts(self, path: Path) -> bool:
        scan = self.prescan(path)
        return scan is None or scan.acts  # None: libcst decides, or reports GD000

    def worth_following(self, path: Path) -> bool:
        """Should the analysis walk a module it reached through an import?"""
        text = self.text(path)
        return not isinstance(text, ParseFailure) and (
            ACTS.search(text) is not None or USES_GPU.search(text) is not None)

    def _starts(self, path: Path) -> bool:
        text = self.text(path)
        return not isinstance(text, ParseFailure) and STARTS.search(text) is not None and self._acts(path)

    def _imports(self, path: Path, text: str) -> list[Path]:
        found = []
        for match in _IMPORT_LINE.finditer(text):
            if match.group(1) is not None:
                dotted = match.group(1)
                level = len(dotted) - len(dotted.lstrip("."))
                names = [dotted.lstrip(".")]
            else:
                level = 0
                names = [n.split(" as ")[0].strip() for n in match.group(2).split(",")]
            for name in names:
                target = self.resolve(path, name, level) if name or level else None
                if target is not None:
                    found.append(target)
        return found


def _mentions_acts(text: str) -> bool:
    """The ACTS search, with a fast rejection of the many files that mention none of its words."""
    if any(word in text for word in _ACTS_WORDS):
        return ACTS.search(text) is not None
    return "noqa" in text and _NOQA_GD.search(text) is not None
