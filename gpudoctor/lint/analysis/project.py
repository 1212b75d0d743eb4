"""The checked project: which file a module name means, and which files can matter."""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from gpudoctor.lint.analysis.prescan import Prescan, TooDeep, Unit, prescan
from gpudoctor.lint.analysis.reading import ParseFailure, decode, read_bytes
from gpudoctor.lint.paths import real_path

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


@dataclass(frozen=True)
class Facts:
    """What the gate needs to know about one file; a function of its bytes alone (cacheable)."""

    acts: bool  # its code can get a finding: starts processes, configures the GPU, ...
    uses_gpu: bool  # it mentions a GPU framework
    starts: bool  # as an imported module, it starts processes or configures the GPU
    follow: bool  # as an imported module, its code is worth walking
    imports: tuple[tuple[str, int], ...]  # (module, relative level) of its import lines

    def to_json(self) -> list[object]:
        return [self.acts, self.uses_gpu, self.starts, self.follow, [list(i) for i in self.imports]]

    @classmethod
    def from_json(cls, data: list[object]) -> Facts:
        acts, uses_gpu, starts, follow, imports = data
        return cls(bool(acts), bool(uses_gpu), bool(starts), bool(follow),
                   tuple((str(n), int(level)) for n, level in imports))  # type: ignore[union-attr]


UNREADABLE = Facts(acts=True, uses_gpu=False, starts=False, follow=False, imports=())  # reported as GD000


@dataclass
class Touched:
    """The files and directory listings one analysis read: what its result depends on."""

    files: set[Path]
    dirs: set[Path]


class Project:
    """Files under one root, each read, scanned and parsed at most once."""

    def __init__(self, root: Path, known_facts: dict[str, tuple[str, Facts]] | None = None) -> None:
        self.root = root.resolve()
        self._roots = [self.root] + ([self.root / "src"] if (self.root / "src").is_dir() else [])
        self._bytes: dict[Path, bytes | ParseFailure] = {}
        self._digests: dict[Path, str] = {}
        self._texts: dict[Path, str | ParseFailure] = {}
        self._facts: dict[Path, Facts] = {}
        self._known_facts = known_facts or {}  # path -> (digest, facts), from the cache
        self.new_facts: dict[Path, tuple[str, Facts]] = {}  # computed in this run
        self._parsed: dict[Path, ParsedModule | ParseFailure] = {}
        self._gate: dict[Path, bool] = {}
        self._scans: dict[Path, Prescan | None] = {}
        self._too_deep: dict[Path, ParseFailure] = {}
        self._files: dict[tuple[Path, tuple[str, ...]], tuple[Path | None, tuple[Path, ...]]] = {}
        self._dirs: dict[Path, Path] = {}
        self._resolved: dict[tuple[Path, str, int], tuple[Path | None, tuple[tuple[Path, tuple[str, ...]], ...]]] = {}
        self._listings: dict[Path, frozenset[str]] = {}
        self._touched: Touched | None = None
        self._real: dict[Path, Path] = {}

    # -- reading -------------------------------------------------------------------------
    def real(self, path: Path) -> Path:
        """``path.resolve()``, computed once per path (it costs a system call per component)."""
        found = self._real.get(path)
        if found is None:
            found = self._real[path] = real_path(path)
            self._real[found] = found
        return found

    def data(self, path: Path) -> bytes | ParseFailure:
        path = self.real(path)
        if self._touched is not None:
            self._touched.files.add(path)
        if path not in self._bytes:
            self._bytes[path] = read_bytes(path)
        return self._bytes[path]

    def digest(self, path: Path) -> str:
        """A hash of the file's bytes ("-" if it cannot be read)."""
        path = self.real(path)
        if path not in self._digests:
            raw = self.data(path)
            self._digests[path] = "-" if isinstance(raw, ParseFailure) else \
                hashlib.blake2b(raw, digest_size=16).hexdigest()
        elif self._touched is not None:
            self._touched.files.add(path)
        return self._digests[path]

    def text(self, path: Path) -> str | ParseFailure:
        path = self.real(path)
        if path not in self._texts:
            self._texts[path] = decode(path, self.data(path))
        elif self._touched is not None:
            self._touched.files.add(path)
        return self._texts[path]

    @contextmanager
    def tracking(self) -> Iterator[Touched]:
        """Record every file and directory listing read inside the block."""
        touched = Touched(set(), {self.root})
        self._touched = touched
        try:
            yield touched
        finally:
            self._touched = None

    def listing_digest(self, folder: Path) -> str:
        return hashlib.blake2b("\n".join(sorted(self._listing(folder))).encode(), digest_size=16).hexdigest()

    # -- facts and the gate ----------------------------------------------------------------
    def facts(self, path: Path) -> Facts:
        path = self.real(path)
        found = self._facts.get(path)
        if found is None:
            digest = self.digest(path)
            known = self._known_facts.get(str(path))
            if known is not None and known[0] == digest:
                found = known[1]
            else:
                found = self._compute_facts(path)
                self.new_facts[path] = (digest, found)
            self._facts[path] = found
        elif self._touched is not None:
            self._touched.files.add(path)
        return found

    def _compute_facts(self, path: Path) -> Facts:
        text = self.text(path)
        if isinstance(text, ParseFailure):
            return UNREADABLE
        acts = _mentions_acts(text) and self._acts(path)
        uses_gpu = USES_GPU.search(text) is not None
        starts = STARTS.search(text) is not None and self._acts(path)
        return Facts(acts=acts, uses_gpu=uses_gpu, starts=starts,
                     follow=uses_gpu or ACTS.search(text) is not None,
                     imports=_import_names(text) if uses_gpu and not acts else ())

    def may_matter(self, path: Path) -> bool:
        """Is the file worth linting: can a finding be reported in it?

        Yes if its code starts processes or configures the GPU itself, or if it uses a GPU
        framework and imports a project module that does (its pool may run this file's
        GPU work). The text is searched first; a file the search keeps is confirmed with
        CPython's parser, which ignores strings and comments and thread pools. Everything
        else is never parsed by libcst.
        """
        path = self.real(path)
        if path not in self._gate:
            facts = self.facts(path)
            self._gate[path] = facts.acts or (facts.uses_gpu and any(
                target is not None and target != path and self.facts(target).starts
                for name, level in facts.imports for target in [self.resolve(path, name, level)]))
        return self._gate[path]

    def _acts(self, path: Path) -> bool:
        scan = self.prescan(path)
        return scan is None or scan.acts  # None: libcst decides, or reports GD000

    def worth_following(self, path: Path) -> bool:
        """Should the analysis walk a module it reached through an import?"""
        return self.facts(path).follow

    def starts(self, path: Path) -> bool:
        """Does this module, once imported, start processes or configure the GPU?"""
        return self.facts(path).starts

    # -- parsing ---------------------------------------------------------------------------
    def prescan(self, path: Path) -> Prescan | None:
        """CPython's first look at the file (None: unreadable, or CPython cannot parse it)."""
        path = self.real(path)
        if path not in self._scans:
            text = self.text(path)
            try:
                self._scans[path] = None if isinstance(text, ParseFailure) else prescan(text)
            except TooDeep as deep:
                self._scans[path] = None
                self._too_deep[path] = ParseFailure(str(path), deep.message, deep.row, deep.col)
        elif self._touched is not None:
            self._touched.files.add(path)
        return self._scans[path]

    def parsed(self, path: Path) -> ParsedModule | ParseFailure:
        """The libcst tree; function bodies are parsed when the analysis first needs them."""
        from gpudoctor.lint.analysis.source import parse

        path = self.real(path)
        if path not in self._parsed:
            text = self.text(path)
            scan = None if isinstance(text, ParseFailure) else self.prescan(path)
            if isinstance(text, ParseFailure):
                self._parsed[path] = text
            elif path in self._too_deep:
                self._parsed[path] = self._too_deep[path]
            else:
                self._parsed[path] = parse(str(path), text, scan.units if scan else (),
                                           scan.elidable() if scan else (), scan.top_rows if scan else ())
        elif self._touched is not None:
            self._touched.files.add(path)
        return self._parsed[path]

    def entry_points(self, path: Path) -> list[Unit] | None:
        """The functions of linted ``path`` worth analysing on their own (None: all of them)."""
        scan = self.prescan(path)
        return None if scan is None else scan.entry_points(self.acting_names(self.real(path), scan))

    def acting_names(self, path: Path, scan: Prescan) -> frozenset[str]:
        """Names ``path`` imports from project modules that start processes or configure the GPU."""
        out = set()
        for bound, target in self.import_targets(path, scan):
            if target != path and self.starts(target):
                out.add(bound)
        return frozenset(out)

    def import_targets(self, path: Path, scan: Prescan) -> Iterator[tuple[str, Path]]:
        """(name bound, project file) for each import in ``path`` that names a project module."""
        for bound, module, level, member in scan.imports:
            targets = [self.resolve(path, module, level)]
            if member is not None:
                targets.append(self.resolve(path, f"{module}.{member}" if module else member, level))
            for target in targets:
                if target is not None:
                    yield bound, target

    # -- module names ------------------------------------------------------------------------
    def resolve(self, importer: Path, name: str, level: int = 0) -> Path | None:
        """Return the project file a module name refers to, from ``importer``'s point of view."""
        home = self._dirs.get(importer)
        if home is None:
            home = self._dirs[importer] = self.real(importer).parent
        key = (home, name, level)
        found = self._resolved.get(key)
        if found is None:
            consulted: list[tuple[Path, tuple[str, ...]]] = []
            found = self._resolved[key] = (self._resolve(home, name, level, consulted), tuple(consulted))
        if self._touched is not None:
            for base, parts in found[1]:
                self._touched.dirs.update(self._files[(base, parts)][1])
        return found[0]

    def _resolve(self, home: Path, name: str, level: int,
                 consulted: list[tuple[Path, tuple[str, ...]]]) -> Path | None:
        parts = [p for p in name.split(".") if p]
        if level:
            base = home
            for _ in range(level - 1):
                base = base.parent
            consulted.append((base, tuple(parts)))
            return self._module_file(base, parts)
        for base in (home, *self._roots):
            consulted.append((base, tuple(parts)))
            found = self._module_file(base, parts)
            if found is not None:
                return found
        return None

    def _module_file(self, base: Path, parts: list[str]) -> Path | None:
        key = (base, tuple(parts))
        found = self._files.get(key)
        if found is None:
            consulted: list[Path] = []
            found = self._files[key] = (self._find_module(base, parts, consulted), tuple(consulted))
        if self._touched is not None:
            self._touched.dirs.update(found[1])
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

    def _listing(self, folder: Path) -> frozenset[str]:
        names = self._listings.get(folder)
        if names is None:
            try:
                with os.scandir(folder) as entries:
                    # What an import can name: modules and packages (not dot-folders).
                    names = frozenset(entry.name for entry in entries if not entry.name.startswith(".")
                                      and (entry.name.endswith(".py") or entry.is_dir()))
            except OSError:
                names = frozenset()
            self._listings[folder] = names
        return names


def _import_names(text: str) -> tuple[tuple[str, int], ...]:
    found: list[tuple[str, int]] = []
    for match in _IMPORT_LINE.finditer(text):
        if match.group(1) is not None:
            dotted = match.group(1)
            level = len(dotted) - len(dotted.lstrip("."))
            names = [dotted.lstrip(".")]
        else:
            level = 0
            names = [n.split(" as ")[0].strip() for n in match.group(2).split(",")]
        found.extend((name, level) for name in names if name or level)
    return tuple(dict.fromkeys(found))


def _mentions_acts(text: str) -> bool:
    """The ACTS search, with a fast rejection of the many files that mention none of its words."""
    if any(word in text for word in _ACTS_WORDS):
        return ACTS.search(text) is not None
    return "noqa" in text and _NOQA_GD.search(text) is not None
