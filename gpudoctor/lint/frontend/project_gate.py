"""Which files of the project can matter: the gate's facts per file, and what a linted or
imported file reaches through its imports (a Project's ``gate``; the text tests are
text_facts.py's)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeVar

from gpudoctor.lint.frontend.reading import ParseFailure, Signature
from gpudoctor.lint.frontend.text_facts import (
    ACTS,
    UNREADABLE,
    USES_GPU,
    Facts,
    attributes_read,
    has_relative_import,
    import_candidates,
    import_members,
    import_names,
    imported_words,
    mentioned_words,
    mentions_acts,
    mentions_collectives,
    mentions_processes,
    mentions_starts,
    plain_imports,
    reexports,
)

if TYPE_CHECKING:
    from gpudoctor.lint.frontend.module_files import ModuleFinder
    from gpudoctor.lint.frontend.prescan import Prescan
    from gpudoctor.lint.limits import Limits


@dataclass(frozen=True)
class Kept:
    """What a cache kept of a project's files, each entry with the digest of the bytes it
    was made from (by path): the gate's facts, the words of the import statements, and the
    status each digest was taken with (Project.digest)."""

    facts: Mapping[str, tuple[str, Facts]] = field(default_factory=dict)
    import_words: Mapping[str, tuple[str, frozenset[str] | None]] = field(default_factory=dict)
    signatures: Mapping[str, tuple[Signature, str]] = field(default_factory=dict)


_T = TypeVar("_T")


@dataclass
class Touched:
    """The files and directory listings one analysis read: what its result depends on."""

    files: set[Path]
    dirs: set[Path]


class ProjectFiles(Protocol):
    """What the gate reads of its project (a Project): files, their scans, module names,
    and the record of what the analysis being tracked read."""

    @property
    def limits(self) -> Limits: ...

    @property
    def modules(self) -> ModuleFinder: ...

    @property
    def touched(self) -> Touched | None: ...

    def real(self, path: Path) -> Path: ...

    def digest(self, path: Path) -> str: ...

    def text(self, path: Path) -> str | ParseFailure: ...

    def prescan(self, path: Path) -> Prescan | None: ...

    def resolve(self, importer: Path, name: str, level: int = 0) -> Path | None: ...

    def tracking(self) -> AbstractContextManager[Touched]: ...

    def note_touched(self, touched: Touched) -> None: ...


class ProjectGate:
    """A project's gate: facts by file (cached by digest), and the decisions made from
    them. It reads the files through its project."""

    def __init__(self, project: ProjectFiles, kept: Kept) -> None:
        self.project = project
        self._facts: dict[Path, Facts] = {}
        self._known_facts = kept.facts  # path -> (digest, facts), from the cache
        self.new_facts: dict[Path, tuple[str, Facts]] = {}  # computed in this run
        self._words: dict[Path, frozenset[str] | None] = {}
        self._known_words = kept.import_words
        self.new_words: dict[Path, tuple[str, frozenset[str] | None]] = {}
        self._gate: dict[Path, bool] = {}
        self._own: dict[Path, tuple[list[Path], Touched]] = {}
        self._reexports: dict[Path, tuple[dict[str, tuple[str, int]], tuple[tuple[str, int], ...]]] = {}
        self._handed: dict[tuple[Path, str], tuple[Path | None, Touched]] = {}
        self._leads: dict[tuple[Path, int], tuple[bool, Touched]] = {}

    def facts(self, path: Path) -> Facts:
        return self._kept_or_made(path, self._facts, self._known_facts, self.new_facts, self._compute_facts)

    def import_words(self, path: Path) -> frozenset[str] | None:
        """Every word of the file's import statements (a module it imports by any means is
        among them); None if one of them is relative (it may import any module of its
        package). Kept in the cache: which files may import a named one is decided from
        them without reading the project's files again (callers.py)."""
        return self._kept_or_made(path, self._words, self._known_words, self.new_words, self._compute_words)

    def _kept_or_made(self, path: Path, memo: dict[Path, _T], kept: Mapping[str, tuple[str, _T]],
                      made: dict[Path, tuple[str, _T]], make: Callable[[Path], _T]) -> _T:
        """What ``make`` finds of a file, once per run: the cache's if it was made from the
        same bytes (``kept``: path -> (digest, value)), else made and added to ``made``."""
        path = self.project.real(path)
        if path in memo:
            if self.project.touched is not None:
                self.project.touched.files.add(path)
            return memo[path]
        digest = self.project.digest(path)
        known = kept.get(str(path))
        if known is not None and known[0] == digest:
            found = known[1]
        else:
            found = make(path)
            made[path] = (digest, found)
        memo[path] = found
        return found

    def _compute_words(self, path: Path) -> frozenset[str] | None:
        text = self.project.text(path)
        if isinstance(text, ParseFailure):
            return frozenset()
        return None if has_relative_import(text) else frozenset(imported_words(text))

    def all_facts(self) -> dict[str, tuple[str, Facts]]:
        """Every file's facts known here (from the cache, or computed), with its digest."""
        known = dict(self._known_facts)
        known.update((str(path), entry) for path, entry in self.new_facts.items())
        return known

    def _compute_facts(self, path: Path) -> Facts:
        text = self.project.text(path)
        if isinstance(text, ParseFailure):
            return UNREADABLE
        words = mentioned_words(text)
        collectives = mentions_collectives(text)
        acts = (mentions_acts(text, words) or collectives) and self._acts(path)
        uses_gpu = USES_GPU.search(text) is not None
        starts = (mentions_starts(words) or collectives) and self._acts(path)
        return Facts(acts=acts, uses_gpu=uses_gpu, starts=starts,
                     follow=uses_gpu or ACTS.search(text) is not None,
                     imports=import_names(text) if not acts else (),
                     spawns=starts and mentions_processes(words),
                     members=import_members(text) if not acts and "import" in text else (),
                     program=path.suffix == ".ipynb" or "__main__" in text)

    def may_matter(self, path: Path) -> bool:
        """Is the file worth linting: can a finding be reported in it?

        Yes if its code starts processes or configures the GPU itself, or if it imports a
        project module that does (by ``from package import module`` too, when that module
        starts processes, and ``from package import function`` or ``package.function``,
        when the package hands on a function that does) and it uses a GPU framework, itself or through another module it
        imports (that module's pool may run this file's GPU work). The text is
        searched first; a file the search keeps is confirmed with CPython's parser, which
        ignores strings and comments and thread pools. Everything else is never parsed by
        libcst.
        """
        path = self.project.real(path)
        if path not in self._gate:
            facts = self.facts(path)
            if facts.acts:
                self._gate[path] = True
            else:
                targets = [target for name, level in facts.imports
                           if (target := self.project.resolve(path, name, level)) is not None and target != path]
                members = [target for name, level in facts.members
                           if (target := self.member_path(path, name, level)) is not None and target != path]
                # A program (a notebook, a script with a main guard) that uses the GPU and
                # calls into a module whose helper module builds a pool (a model whose
                # forward forks, a GUI tab whose handler does): followed program_reach
                # imports deep. Libraries one import deep.
                depth = self.project.limits.program_reach if self._program(path) else 1
                starts = any(self._starts_within(self.project.real(t), depth) for t in targets) or \
                    any(self.facts(m).spawns for m in members)
                if starts:
                    self._gate[path] = facts.uses_gpu or any(self.uses_gpu(t) for t in targets + members)
                else:  # ``pkg.function`` after ``import pkg``: read only when the GPU is used
                    self._gate[path] = any(t.name == "__init__.py" for t in targets) and \
                        (facts.uses_gpu or any(self.uses_gpu(t) for t in targets + members)) and \
                        any(self.facts(m).spawns for _, m in self.attribute_members(path))
        return self._gate[path]

    def attribute_members(self, path: Path) -> list[tuple[str, Path]]:
        """(bound name, module) for each name read as ``pkg.name`` after ``import pkg``: the
        module it may come from (see _member), for the project packages ``path`` imports."""
        text = self.project.text(path)
        if isinstance(text, ParseFailure):
            return []
        out = []
        for package, bound in plain_imports(text):
            init = self.project.resolve(path, package)
            if init is None or init.name != "__init__.py":
                continue
            for name in attributes_read(text, bound):
                found = self.member_path(path, f"{package}.{name}", 0)
                if found is not None and found != path:
                    out.append((bound, found))
        return out

    def member_path(self, importer: Path, dotted: str, level: int) -> Path | None:
        """The module ``pkg/name.py`` (or package) that ``from pkg import name`` may run, if
        ``pkg`` is a project package that has one; looked up in the listing of ``pkg``'s
        folder (the package itself is resolved, and cached, for the import's own sake).

        Else the module a package ``__init__`` takes ``name`` from (``from .pools import
        make_pool``, through subpackages and star imports), if ``name`` there starts
        processes: a function of the module that starts them, or calls one of the module's
        own that does (read from its CPython prescan), or a class of it (when the module
        starts processes anywhere). Other names (constants, aliases) are not followed."""
        base, _, name = dotted.rpartition(".")
        package = self.project.resolve(importer, base, level) if base or level else None
        if package is None:
            # A namespace package (a folder without __init__.py) of the project: the module
            # itself resolves. Tried only when the folder is there, not for every import of
            # a third-party package.
            if base and not level and self.project.modules.has_folder(importer, base.split(".")[0]):
                return self.project.resolve(importer, dotted, level)
            return None
        if package.name != "__init__.py":
            return None
        found = self.project.modules.submodule(package.parent, name, self._dirs_read())
        return found if found is not None else self._handed_on(package, name)

    def _handed_on(self, package: Path, name: str) -> Path | None:
        """Computed once per package and name; a later use counts the files and folders
        it read."""
        known = self._handed.get((package, name))
        if known is not None:
            self.project.note_touched(known[1])
            return known[0]
        with self.project.tracking() as touched:
            found = self._handed_on_now(package, name)
        self._handed[(package, name)] = (found, touched)
        return found

    def _handed_on_now(self, package: Path, name: str) -> Path | None:
        found = self._source_of(package, name, 0)
        if found is None or not self.facts(found[0]).spawns:
            return None
        source, original = found
        scan = self.project.prescan(source)
        if scan is None:  # CPython cannot parse it: libcst will say more
            return source
        if any(u.name == original for u in scan.units if not u.method):
            return source if any(u.name == original for u in scan.entry_points() if not u.method) else None
        text = self.project.text(source)
        return source if isinstance(text, str) and re.search(rf"^class[ \t]+{original}\b", text, re.M) else None

    def source_of(self, package: Path, name: str) -> tuple[Path, str] | None:
        """The project module, and the name there, that package ``__init__`` ``package``
        hands on as ``name`` (None: its own name, or not from a project module)."""
        return self._source_of(self.project.real(package), name, 0)

    def _source_of(self, package: Path, name: str, depth: int) -> tuple[Path, str] | None:
        """The project module, and the name there, that a package ``__init__`` binds to
        ``name`` by an import of its own; followed through subpackages' ``__init__``."""
        text = self.project.text(package)  # read each time: the reading is recorded as a dependency
        if isinstance(text, ParseFailure) or depth >= self.project.limits.hand_on_depth:
            return None
        found = self._reexports.get(package)
        if found is None:
            found = self._reexports[package] = reexports(text)
        named, stars = found
        if name in named:
            dotted, level = named[name]
            base, _, original = dotted.rpartition(".")
            source = self.project.resolve(package, base, level) if base or level else None
            if source is None or source == package:
                return None
            if source.name != "__init__.py":
                return source, original
            if self.project.modules.submodule(source.parent, original, self._dirs_read()):
                return None  # a module, not a name defined in one
            return self._source_of(source, original, depth + 1)
        for base, level in stars:
            source = self.project.resolve(package, base, level) if base or level else None
            if source is None or source == package:
                continue
            if source.name == "__init__.py":
                inner = self._source_of(source, name, depth + 1)
                if inner is not None:
                    return inner
            elif not isinstance(source_text := self.project.text(source), ParseFailure) and name in source_text:
                return source, name
        return None

    def _acts(self, path: Path) -> bool:
        scan = self.project.prescan(path)
        return scan is None or scan.acts  # None: libcst decides, or reports GD000

    def worth_following(self, path: Path) -> bool:
        """Should the analysis walk a module it reached through an import?

        Yes if it mentions a GPU framework or something a rule reads; a package
        ``__init__`` also if a module of its own package that it imports does (importing
        the package runs that module's top level).
        """
        project = self.project
        return self._through_package(path, "follow") or self._leads_on(project.real(path), project.limits.lead_depth)

    def _leads_on(self, path: Path, depth: int) -> bool:
        """Does the module import a project module worth following, at most ``depth``
        imports away? A helper that mentions nothing a rule reads can still pass the
        linted file's work on to a module that builds the pool. Computed once per module;
        a later use counts the files and folders it read."""
        known = self._leads.get((path, depth))
        if known is not None:
            self.project.note_touched(known[1])
            return known[0]
        self._leads[(path, depth)] = (False, Touched(set(), set()))  # in an import cycle: no
        project = self.project
        with project.tracking() as touched:
            facts = self.facts(path)
            targets = [t for name, level in facts.imports if (t := project.resolve(path, name, level)) is not None]
            targets += [t for name, level in facts.members if (t := self.member_path(path, name, level)) is not None]
            found = any(t != path and (self._through_package(t, "follow") or
                                       (depth > 1 and self._leads_on(project.real(t), depth - 1))) for t in targets)
        self._leads[(path, depth)] = (found, touched)
        return found

    def _program(self, path: Path) -> bool:
        """Is the file run as a program: a notebook, or a script with a main guard?"""
        return self.facts(path).program

    def _starts_within(self, path: Path, depth: int) -> bool:
        """Does the module start processes, or import (at most ``depth`` imports away) a
        project module that does? A model module whose ``forward`` calls a helper module
        that builds a pool passes the linted file's GPU work on to it. Computed once per
        module; a later use counts the files and folders it read."""
        if self.facts(path).starts:
            return True
        if depth <= 1 or path.name == "__init__.py":
            # (what a package hands on is decided name by name: member_path)
            return False
        key = (path, -depth)  # (shares the memo of _leads_on, apart by sign)
        known = self._leads.get(key)
        if known is not None:
            self.project.note_touched(known[1])
            return known[0]
        self._leads[key] = (False, Touched(set(), set()))  # in an import cycle: no
        project = self.project
        with project.tracking() as touched:
            facts = self.facts(path)
            targets = [t for name, level in facts.imports if (t := project.resolve(path, name, level)) is not None]
            found = any(t != path and self._starts_within(project.real(t), depth - 1) for t in targets)
        self._leads[key] = (found, touched)
        return found

    def _own_modules(self, package: Path, text: str) -> list[Path]:
        """The modules of its own package (subpackages too) that a package ``__init__``
        imports, and, through a subpackage's ``__init__``, what that imports of its own.
        Computed once per package; a later use counts the files and folders it read."""
        known = self._own.get(package)
        if known is not None:
            self.project.note_touched(known[1])
            return known[0]
        out: list[Path] = []
        with self.project.tracking() as touched:
            todo, seen = [(package, text)], {package}
            while todo:
                init, source = todo.pop()
                for name, level in import_candidates(source):
                    target = self.project.resolve(init, name, level)
                    if target is None or target in seen or not target.is_relative_to(package.parent):
                        continue
                    seen.add(target)
                    out.append(target)
                    inner = self.project.text(target) if target.name == "__init__.py" else None
                    if inner is not None and not isinstance(inner, ParseFailure):
                        todo.append((target, inner))
        self._own[package] = (out, touched)
        return out

    def _dirs_read(self) -> set[Path] | None:
        """Where the tracked analysis records the folders it listed (None: not tracked)."""
        touched = self.project.touched
        return touched.dirs if touched is not None else None

    def starts(self, path: Path) -> bool:
        """Does this module, once imported, start processes or configure the GPU?"""
        return self.facts(path).starts

    def uses_gpu(self, path: Path) -> bool:
        """Does this module (or, for a package ``__init__``, a module of its own that it
        imports) use a GPU framework?"""
        return self._through_package(path, "uses_gpu")

    def _through_package(self, path: Path, fact: str) -> bool:
        path = self.project.real(path)
        if getattr(self.facts(path), fact):
            return True
        if path.name != "__init__.py":
            return False
        text = self.project.text(path)
        return not isinstance(text, ParseFailure) and any(
            getattr(self.facts(target), fact) for target in self._own_modules(path, text))
