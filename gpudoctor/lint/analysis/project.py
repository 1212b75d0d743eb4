"""The checked project: which file a module name means, and which files can matter."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from gpudoctor.knowledge.registry import FRAMEWORK_ROOTS
from gpudoctor.lint.analysis.rings import RingStore
from gpudoctor.lint.analysis.shared_walks import ModuleStore
from gpudoctor.lint.frontend.module_files import ModuleFinder
from gpudoctor.lint.frontend.prescan import Prescan, TooDeep, Unit, prescan
from gpudoctor.lint.frontend.project_gate import Kept, ProjectGate, Touched
from gpudoctor.lint.frontend.reading import ParseFailure, decode, read_bytes, signature
from gpudoctor.lint.limits import DEFAULT_LIMITS, Limits
from gpudoctor.lint.paths import real_path

if TYPE_CHECKING:
    from gpudoctor.lint.frontend.parsed import ParsedModule
    from gpudoctor.lint.frontend.reading import Signature

# A status is kept only for a file last changed this long before its bytes were read: a
# change made later gets a later time, whatever the clock's tick on that file system
# (ext4 counts nanoseconds, FAT two seconds).
SETTLED_NS = 2_000_000_000



class Project:
    """Files under one root, each read, scanned and parsed at most once, and the budgets
    (``limits``) of the analyses made in it."""

    def __init__(self, root: Path, kept: Kept | None = None, contents: dict[Path, bytes] | None = None,
                 known_scans: dict[str, tuple[str, Prescan]] | None = None,
                 limits: Limits = DEFAULT_LIMITS) -> None:
        """``kept``: what a cache kept of the files (valid for the bytes of the digest it
        names); ``contents``: text given for a file (read from stdin); ``known_scans``: the
        prescans a parent process made; ``limits``: the analyses' budgets."""
        kept = kept or Kept()
        self.limits = limits  # the run's budgets, read by every part of the analysis
        self.gate = ProjectGate(self, kept)  # which files can matter
        self.root = root.resolve()
        self._roots = [self.root] + ([self.root / "src"] if (self.root / "src").is_dir() else [])
        self._bytes: dict[Path, bytes | ParseFailure] = {}
        self._read_ns: dict[Path, int] = {}  # when each file was read
        self._digests: dict[Path, str] = {}
        self._digests_by_name: dict[str, str] = {}
        self._listings_by_name: dict[str, str] = {}
        self._texts: dict[Path, str | ParseFailure] = {}
        self._parsed: dict[Path, ParsedModule | ParseFailure] = {}
        self._scans: dict[Path, Prescan | None] = {}
        self._known_scans = known_scans or {}  # path -> (digest, scan), from the parent process
        self._too_deep: dict[Path, ParseFailure] = {}
        self._touched: Touched | None = None
        # path -> (status, digest) of files whose digest a run took (the cache's), and
        # those taken in this run, for the cache to keep
        self._known_signatures = kept.signatures
        self.new_signatures: dict[str, tuple[Signature, str]] = {}
        self._real: dict[Path, Path] = {}
        self._paths: dict[str, Path] = {}
        self._framework_names: dict[Path, str | None] = {}
        self._imported: dict[Path, tuple[frozenset[Path], Touched]] = {}  # (see ``imported``)
        self._cycle_mates: dict[Path, tuple[frozenset[Path], Touched]] = {}  # (see ``cycle_mates``)
        self._sizes: dict[Path, int] = {}  # text lengths of modules a summary stood for (summaries.py)
        self.summary_parts: dict[object, object] = {}  # what summaries read back share (summaries.py)
        self.modules = ModuleFinder(self._roots, self.real)
        self.walks = ModuleStore(limits)
        self.rings = RingStore(limits)  # summaries of calls into rings of modules (rings.py)
        # The spawn fix of a start, by its node and its module's walk (fixes/spawn_context.py):
        # a walk many analyses share gives each the same rewrite.
        self.rewrites: dict[tuple[int, int, str], tuple[object, object, object]] = {}
        self._given: set[Path] = set()
        for path, data in (contents or {}).items():  # text given for a file (read from stdin)
            self._bytes[self.real(path)] = data
            self._given.add(self.real(path))
        self._given_names = {str(path) for path in self._given}

    # -- reading -------------------------------------------------------------------------
    def real(self, path: Path) -> Path:
        """``path.resolve()``, computed once per path (it costs a system call per component)."""
        found = self._real.get(path)
        if found is None:
            found = self._real[path] = real_path(path)
            self._real[found] = found
        return found

    def path_of(self, name: str) -> Path:
        """The real path of a module the analysis names by text (its values carry paths as
        text), built once: the analysis asks for the same few thousands of times."""
        found = self._paths.get(name)
        if found is None:
            found = self._paths[name] = self.real(Path(name))
        return found

    def data(self, path: Path) -> bytes | ParseFailure:
        path = self.real(path)
        if self._touched is not None:
            self._touched.files.add(path)
        if path not in self._bytes:
            self._read_ns[path] = time.time_ns()
            self._bytes[path] = read_bytes(path)
        return self._bytes[path]

    def digest_of(self, name: str) -> str:
        """``digest`` of a path given as text (the cache's records), without building a Path
        for each of the thousands a warm run checks."""
        found = self._digests_by_name.get(name)
        if found is None:
            known = self._known_signatures.get(name) if self._touched is None and name not in self._given_names \
                else None
            if known is not None and known[0] == signature(name):
                # (not resolved again: the status is that of the file the name leads to now)
                found = self._digests_by_name[name] = known[1]
            else:
                found = self._digests_by_name[name] = self.digest(Path(name))
        elif self._touched is not None:
            self._touched.files.add(self.real(Path(name)))
        return found

    def listing_digest_of(self, name: str) -> str:
        found = self._listings_by_name.get(name)
        if found is None:
            found = self._listings_by_name[name] = self.listing_digest(Path(name))
        return found

    def digest(self, path: Path) -> str:
        """A hash of the file's bytes ("-" if it cannot be read).

        A file whose status (``signature``) is the one a run kept with its digest is not
        read again: a warm run over an unchanged project reads no file it does not analyse.
        """
        path = self.real(path)
        found = self._digests.get(path)
        if found is None:
            found = self._digests[path] = self._hash(path)
        elif self._touched is not None:
            self._touched.files.add(path)
        return found

    def _hash(self, path: Path) -> str:
        status = None if path in self._given else signature(path)
        if status is not None:
            known = self._known_signatures.get(str(path))
            if known is not None and known[0] == status:
                if self._touched is not None:
                    self._touched.files.add(path)
                return known[1]
        raw = self.data(path)
        if isinstance(raw, ParseFailure):
            return "-"
        digest = hashlib.blake2b(raw, digest_size=16).hexdigest()
        # Kept only if the file had settled before it was read: a change made after the
        # status was taken, or after the read, has a later time.
        if status is not None and max(status[1], status[2]) < self._read_ns.get(path, 0) - SETTLED_NS:
            self.new_signatures[str(path)] = (status, digest)
        return digest

    def text(self, path: Path) -> str | ParseFailure:
        path = self.real(path)
        if path not in self._texts:
            self._texts[path] = decode(path, self.data(path))
        elif self._touched is not None:
            self._touched.files.add(path)
        return self._texts[path]

    def size(self, path: Path) -> int:
        """The length of a file's text, if it was read (0 if not, or if it is unreadable)."""
        path = self.real(path)
        text = self._texts.get(path)
        return len(text) if isinstance(text, str) else self._sizes.get(path, 0)

    def note_size(self, path: Path, size: int) -> None:
        """The length of a module's text, known from a summary that stands for its walk:
        the budget of modules followed counts it as if it had been read."""
        self._sizes[self.real(path)] = size

    @contextmanager
    def tracking(self) -> Iterator[Touched]:
        """Record every file and directory listing read inside the block.

        Blocks nest: what an inner block read, the outer one read too.
        """
        outer = self._touched
        touched = Touched(set(), {self.root})
        self._touched = touched
        try:
            yield touched
        finally:
            self._touched = outer
            if outer is not None:
                self.note_touched(touched)

    @property
    def touched(self) -> Touched | None:
        """What the analysis being tracked (``tracking``) has read so far; None outside one."""
        return self._touched

    def note_touched(self, touched: Touched) -> None:
        """Count what an earlier block read as read now (its result is being reused)."""
        if self._touched is not None:
            self._touched.files |= touched.files
            self._touched.dirs |= touched.dirs


    # -- parsing ---------------------------------------------------------------------------
    def prescan(self, path: Path) -> Prescan | None:
        """CPython's first look at the file (None: unreadable, or CPython cannot parse it)."""
        path = self.real(path)
        if path not in self._scans:
            known = self._known_scans.get(str(path))
            if known is not None and known[0] == self.digest(path):
                self._scans[path] = known[1]
                return known[1]
            text = self.text(path)
            try:
                self._scans[path] = None if isinstance(text, ParseFailure) else prescan(text)
            except TooDeep as deep:
                self._scans[path] = None
                self._too_deep[path] = ParseFailure(str(path), deep.message, deep.row, deep.col)
        elif self._touched is not None:
            self._touched.files.add(path)
        return self._scans[path]

    def all_scans(self) -> dict[str, tuple[str, Prescan]]:
        """Every prescan made here, with its file's digest: a worker given them does not
        parse those files with CPython again."""
        return {str(path): (self.digest(path), scan) for path, scan in self._scans.items() if scan is not None}

    def parsed(self, path: Path) -> ParsedModule | ParseFailure:
        """The libcst tree; in a long file (``Limits.elide_min_chars``), function bodies
        are parsed when the analysis first needs them."""
        from gpudoctor.lint.frontend.parsed import parse

        path = self.real(path)
        if path not in self._parsed:
            text = self.text(path)
            scan = None if isinstance(text, ParseFailure) else self.prescan(path)
            if isinstance(text, ParseFailure):
                self._parsed[path] = text
            elif path in self._too_deep:
                self._parsed[path] = self._too_deep[path]
            else:
                elide = scan.elidable() if scan is not None and len(text) >= self.limits.elide_min_chars else ()
                self._parsed[path] = parse(str(path), text, scan.units if scan else (), elide,
                                           scan.top_rows if scan else (), scan.cut_rows if scan else ())
        elif self._touched is not None:
            self._touched.files.add(path)
        return self._parsed[path]

    def parsed_already(self, path: Path) -> ParsedModule | None:
        """The tree of a file this run has parsed; None if it has not (no parse is made)."""
        found = self._parsed.get(self.real(path))
        return None if found is None or isinstance(found, ParseFailure) else found

    def entry_points(self, path: Path) -> list[Unit] | None:
        """The functions of linted ``path`` worth analysing on their own (None: all of them)."""
        scan = self.prescan(path)
        return None if scan is None else scan.entry_points(self.acting_names(self.real(path), scan))

    def acting_names(self, path: Path, scan: Prescan) -> frozenset[str]:
        """Names ``path`` imports from project modules that start processes or configure the GPU."""
        out = set()
        packages = set()
        for bound, target in self.import_targets(path, scan):
            if target != path and self.gate.starts(target):
                out.add(bound)
            elif target.name == "__init__.py":
                packages.add(bound)
        if packages - out:  # ``bound.function`` that a package hands on
            out.update(name for name, module in self.gate.attribute_members(path)
                       if name in packages and self.gate.facts(module).spawns)
        return frozenset(out)

    def import_targets(self, path: Path, scan: Prescan) -> Iterator[tuple[str, Path]]:
        """(name bound, project file) for each import in ``path`` that names a project module."""
        for bound, module, level, member in scan.imports:
            targets = [self.resolve(path, module, level)]
            if member is not None:
                dotted = f"{module}.{member}" if module else member
                # the submodule ``member``, or the module the package takes ``member`` from
                targets.append(self.resolve(path, dotted, level) or self.gate.member_path(path, dotted, level))
            for target in targets:
                if target is not None:
                    yield bound, target

    def imported(self, path: Path) -> frozenset[Path]:
        """The project modules an import statement of ``path`` names (read from its prescan).

        Kept once found; each later ask counts the files and listings it was read from as
        read again (``tracking``), as a walk that decides by it depends on them."""
        path = self.real(path)
        found = self._imported.get(path)
        if found is None:
            with self.tracking() as touched:
                scan = self.prescan(path)
                targets = frozenset() if scan is None else frozenset(
                    self.real(target) for _, target in self.import_targets(path, scan))
            found = self._imported[path] = (targets - {path}, touched)
        else:
            self.note_touched(found[1])
        return found[0]

    def cycle_mates(self, path: Path) -> frozenset[Path]:
        """The modules ``path`` imports that import it back: each is in an import cycle of two
        with it (read from the prescans of ``path`` and of the modules it imports)."""
        path = self.real(path)
        found = self._cycle_mates.get(path)
        if found is None:
            with self.tracking() as touched:
                mates = frozenset(m for m in self.imported(path) if path in self.imported(m))
            found = self._cycle_mates[path] = (mates, touched)
        else:
            self.note_touched(found[1])
        return found[0]

    # -- module names ------------------------------------------------------------------------
    def framework_name(self, path: Path) -> str | None:
        """The qualified name Python imports ``path`` by, when the knowledge tables may
        speak of it: the module lies in a package at the top of a project root that is named
        like a GPU framework (registry.FRAMEWORK_ROOTS: the project is the framework's own
        tree, or vendors it), and no part of its name is private (the tables describe public
        names only; a framework's ``_internal`` helpers are its implementation). None for
        any other module: ``utils/torch.py`` is ``utils.torch``, not ``torch``, and a
        top-level ``cuda.py`` is the project's own module."""
        path = self.real(path)
        if path in self._framework_names:
            return self._framework_names[path]
        found = None
        for root in self._roots:
            if not path.is_relative_to(root):
                continue
            parts = list(path.relative_to(root).parts)
            if len(parts) < 2 or parts[0] not in FRAMEWORK_ROOTS:
                continue  # a file at the top is a module, not the framework's package
            if parts[-1] == "__init__.py":
                parts.pop()
            elif parts[-1].endswith(".py"):
                parts[-1] = parts[-1][:-3]
            else:
                continue
            if all(part.isidentifier() and not part.startswith("_") for part in parts):
                found = ".".join(parts)
                break
        self._framework_names[path] = found
        return found

    def resolve(self, importer: Path, name: str, level: int = 0) -> Path | None:
        """Return the project file a module name refers to, from ``importer``'s point of view."""
        found, folders = self.modules.resolve(importer, name, level)
        if self._touched is not None:
            self._touched.dirs.update(folders)
        return found

    def listing_digest(self, folder: Path) -> str:
        return self.modules.listing_digest(folder)
