"""Who uses a linted file's functions, and which other files a run must analyse for them.

A function is analysed on its own (an entry point: nothing known of its arguments, nor of
the process it runs in) unless a file of the project that is analysed *uses* it, by a name
it imports: that file's analysis runs the function with what the caller passes and after
what the caller did (the start method it chose, the GPU runtime it initialized). An import
that is never used, and a package ``__init__`` that only hands a name on, are not uses: a
function's findings must not depend on who imports it. A name used through a package that
hands it on is a use of the function in the module that defines it.

A use is read from names, and the analysis of a file that uses a name may still not reach
the function: it holds the object on ``self`` and calls the method from another method
nothing runs, or by a name known only at run time (``getattr``, a Ray actor's ``.remote()``).
Each analysis says which of the functions it left to others it reached; those none reached
are analysed in their own file after all, each on its own (engine._unreached).

A file's findings therefore come from its own analysis and from the analyses that reach it:
those of the project files that may matter and import it, directly or through other
modules, at most ``Limits.max_import_depth`` imports away (the analysis follows no deeper;
see analyzer.py). A run of the whole project analyses every one of them. A run that names some
files only (pre-commit names the changed ones) analyses those too, as *context*: only their
findings in the named files are shown. Which names count as used is read from the whole
project in both runs, so each analysis is the same in either, and so are the findings in
the named files (save those re-homed: see rehoming.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Set
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpudoctor.lint.analysis.project import Project
    from gpudoctor.lint.frontend.prescan import Prescan



def plan(project: Project, named: Iterable[Path], linted: list[Path],
         project_files: Iterable[Path]) -> tuple[list[Path], dict[Path, frozenset[str]], int]:
    """The context files of a run naming ``named`` (``linted``: those that may matter), for
    each analysed file the names the project uses from it, and 1 if the budget left some
    context out (else 0).

    ``project_files``: every file of the project (its root discovered with the settings'
    exclusions). When the named files include them all, there is no context to add.

    The context is bounded (``project.limits``): a file that half a large project uses would
    otherwise cost a run naming it alone as much as the whole project. The nearest files
    (fewest imports away) are analysed first, up to ``max_context_chars`` of source; the
    search for them reads the CPython prescan of each module that may lead to the named
    files, up to ``max_search_chars``, and past that stops as when the context is full."""
    limits = project.limits
    named_set = {project.real(p) for p in named}
    universe = dict.fromkeys(project.real(p) for p in project_files)
    if universe.keys() <= named_set:
        return [], used_names(project, linted, linted), 0
    universe.update(dict.fromkeys(named_set))
    linted_set = set(linted)
    reach = _Reach(project, list(universe))
    changed = reach.start(named_set)
    found: dict[Path, int] = {}  # module -> how many imports from a named file
    context: list[Path] = []  # nearest first
    size = 0
    hops = 0
    full = False  # the budget is used up: the rest is left out
    while changed and hops < limits.max_import_depth and not full:
        hops += 1
        now: set[Path] = set()
        for path in reach.step(changed, limits.max_search_chars):
            now.add(path)
            if path in found:
                continue
            found[path] = hops
            if reach.runs.get(path) and path not in linted_set and project.gate.may_matter(path):
                size += project.size(path)
                if size > limits.max_context_chars and context:
                    full = True
                    break
                context.append(path)
        changed = now
        full = full or reach.searched > limits.max_search_chars
    analysed = [*linted, *context]
    # The files that use names of an analysed one found last (its analysis must know its
    # callers, else it runs their functions on their own): one import further, from it
    # and from the packages found with it (which may hand its names on).
    chosen = set(context)
    if changed and not full:
        last = {p for p in changed if p in chosen or p in linted_set or p.name == "__init__.py"}
        for path in reach.step(last):
            found.setdefault(path, hops + 1)
    importers = [*analysed, *(p for p in found if p not in linted_set and p not in chosen
                             and project.gate.may_matter(p))]
    called = used_names(project, analysed, importers)
    if full:
        # The search stopped short: some callers of what leads to the named files may be
        # unknown. Those names count as used (so never run on their own, with nothing
        # known): a finding they would cause may be missing, none is made up.
        for path in analysed:
            called[path] |= reach.names.get(path) or frozenset()
    return context, called, int(full)

def used_names(project: Project, targets: list[Path], importers: list[Path]) -> dict[Path, frozenset[str]]:
    """For each of ``targets``, the names ``importers`` (analysed files) use from it.

    The analysis of an importer follows its uses with the values it passes, so the
    functions and classes they name are not analysed on their own with nothing known;
    except those only functions in a ring of such uses call (``run()`` of one module calls
    ``run()`` of another, which calls the first): none of their callers is analysed but as
    called by another, so each is left to its own module (see _unreached)."""
    from gpudoctor.lint.frontend.text_facts import attributes_read

    out: dict[Path, set[str]] = {path: set() for path in targets}
    uses: dict[Path, list[_Use]] = {path: [] for path in targets}
    stems: dict[str, int] = {}  # module name -> how many targets have it
    for path in targets:
        stem = _stem(path)
        stems[stem] = stems.get(stem, 0) + 1
        # the packages above it, which may hand its names on
        for folder in path.parents[1 if path.name == "__init__.py" else 0:]:
            if folder == project.root or not folder.name:
                break
            if folder.name != stem:
                stems[folder.name] = stems.get(folder.name, 0) + 1
    for importer in importers:
        words, own = project.gate.import_words(importer), _stem(importer)
        if words is not None and not any(stems.get(w, 0) > (w == own) for w in words):
            continue  # its imports name no target module (None: a relative import may)
        text = project.text(importer)
        if not isinstance(text, str):
            continue
        scan = project.prescan(importer)
        if scan is None:
            continue
        used = scan.used
        for bound, module, level, member in scan.imports:
            if bound not in used:
                continue  # imported, never used: not a call
            whole = project.resolve(importer, module, level)
            part = project.resolve(importer, f"{module}.{member}" if module else member, level) \
                if member is not None else None
            if part is not None and part in out and part != importer:
                out[part] |= used  # ``from package import module``: any name it uses
                uses[part].extend(_users(importer, scan, bound, None))
                continue
            if whole is None or whole == importer:
                continue
            if whole in out:
                out[whole] |= used if member is None else {member}
                uses[whole].extend(_users(importer, scan, bound, member))
            if whole.name != "__init__.py":
                continue
            # A package that hands on a function of one of its modules: the use is of that one.
            names = [member] if member is not None else list(attributes_read(text, bound))
            for name in names:
                found = project.gate.source_of(whole, name)
                if found is not None and found[0] in out and found[0] != importer:
                    out[found[0]].add(found[1])
                    uses[found[0]].append((importer, None, frozenset({found[1]})))
    return _unreached(out, uses)


# A use of names of a module: (the file using them, the top-level function or class whose
# code does (None: the file's top level, or not known), the names it may use).
_Use = tuple[Path, str | None, Set[str]]


def _users(importer: Path, scan: Prescan, bound: str, member: str | None) -> list[_Use]:
    """The uses of what ``bound`` names in ``importer``: one per function (or class, by
    its methods) of the file whose code reads it, one for the top level; ``member``: the
    one name it is (None: a module, whose names any it reads may be)."""
    found: list[_Use] = []
    if bound in scan.top_used:
        found.append((importer, None, scan.top_used if member is None else {member}))
    for unit in scan.units:
        if bound in unit.refs:
            found.append((importer, unit.owner or unit.name, unit.refs if member is None else {member}))
    return found or [(importer, None, scan.used if member is None else {member})]


def _unreached(out: dict[Path, set[str]], uses: dict[Path, list[_Use]]) -> dict[Path, frozenset[str]]:
    """``out`` less the names only functions that are themselves such names use.

    A function used by name elsewhere is not run on its own: its callers' analyses run it.
    That holds when some caller is run: by its file's top level, on its own (a function
    of it no other file uses) or, in turn, by a caller of its own. Callers known only by a
    ring of such uses are run by none: the ring's names stay with their own modules, which
    run them on their own (as a module runs the first of its own functions that only call
    one another)."""
    covered: dict[Path, set[str]] = {}
    waiting: dict[tuple[Path, str], list[tuple[Path, str]]] = {}  # caller -> the uses it would cover
    for path, names in out.items():
        reached = covered[path] = set()
        for importer, caller, read in uses[path]:
            run = caller is None or importer not in out or caller not in out[importer]
            for name in names.intersection(read):
                if run:
                    reached.add(name)
                else:
                    assert caller is not None
                    waiting.setdefault((importer, caller), []).append((path, name))
    todo = [(path, name) for path, names in covered.items() for name in names]
    while todo:
        key = todo.pop()
        for path, name in waiting.pop(key, ()):
            if name not in covered[path]:
                covered[path].add(name)
                todo.append((path, name))
    return {path: frozenset(covered[path]) for path in out}


def _stem(path: Path) -> str:
    return path.parent.name if path.name == "__init__.py" else path.stem


class _Reach:
    """Which modules lead, by the names they use, to code of the named files at which a
    finding can be reported (see Prescan.sites and Prescan.reaching).

    A module leads there when it uses such a name of a module that does (an import alone
    hands the name on to its own importers: a package ``__init__``), or imports one whose
    top level runs such code. Over-approximated, as the prescan is: a name that might be
    one counts."""

    def __init__(self, project: Project, files: list[Path]) -> None:
        self.project = project
        self.files = files
        self.names: dict[Path, frozenset[str] | None] = {}  # the names that lead there (None: any)
        self.top: set[Path] = set()  # modules whose import runs such code
        self.runs: dict[Path, bool] = {}  # whose own code (may) run it
        self._imports: dict[Path, list[tuple[str, Path, str | None]]] = {}
        self._attributes: dict[tuple[Path, str], frozenset[str]] = {}
        self.named: set[Path] = set()
        self.searched = 0  # characters of the modules whose prescan the search read
        self._scanned: set[Path] = set()

    def start(self, named: set[Path]) -> set[Path]:
        """Begin at the named files that have code a finding can be reported at."""
        self.named = named
        changed = set()
        for path in named:
            scan = self.project.prescan(path)
            if scan is None:  # a finding (GD000) can be reported anywhere in it
                self.names[path], self.runs[path] = None, True
                self.top.add(path)
            elif scan.sites:
                names, self.runs[path], top = scan.reaching(set(), own_sites=True)
                self.names[path] = frozenset(names)
                if top:
                    self.top.add(path)
            else:
                continue
            changed.add(path)
        return changed

    def step(self, changed: set[Path], limit: int | None = None) -> Iterator[Path]:
        """One import further: the modules that now lead there through one of ``changed``,
        as they are found; stopped once the prescans read hold ``limit`` characters."""
        stems = {_stem(p) for p in changed}
        for path in self.files:
            if not self._may_import(path, stems):
                continue
            if not any(target in changed for _, target, _ in self._imports_of(path)):
                continue
            if limit is not None and self.searched > limit:
                return
            before = (self.names.get(path, frozenset()), path in self.top)
            if self._visit(path) and (self.names.get(path, frozenset()), path in self.top) != before:
                yield path

    def _visit(self, path: Path) -> bool:
        """Update what ``path`` leads to from the modules it imports; whether it leads anywhere."""
        from gpudoctor.lint.frontend.text_facts import attributes_read

        seeds: set[str] = set()
        any_name = False
        imports_top = False
        text = self.project.text(path)
        for bound, target, name in self._imports_of(path):
            if target in self.top:
                imports_top = True
            if not bound or target not in self.names:
                continue  # (a package above the module imported: its top level runs, no name)
            leads = self.names[target]
            if name == "*":
                if leads is None:
                    any_name = True
                else:
                    seeds |= leads
            elif name is not None:
                if leads is None or name in leads:
                    seeds.add(bound)
            elif leads is None:
                seeds.add(bound)
            else:  # the module object: ``bound.name`` for a name that leads there
                key = (path, bound)
                if key not in self._attributes:
                    self._attributes[key] = frozenset(attributes_read(text, bound)) if isinstance(text, str) else leads
                read = leads & self._attributes[key]
                if read:
                    seeds.add(bound)
                    seeds |= read  # (``bound.name()`` calls ``name``)
        if not seeds and not any_name and not imports_top:
            return False
        if path not in self._scanned:
            self._scanned.add(path)
            self.searched += self.project.size(path)
        scan = self.project.prescan(path)
        if scan is None or any_name:  # cannot tell which of its names
            self.names[path], self.runs[path] = None, True
            self.top.add(path)
            return True
        # (a named file leads there by its own code too: see start)
        names, runs, top = scan.reaching(seeds, own_sites=path in self.named)
        self.names[path] = frozenset(names)
        self.runs[path] = runs or imports_top
        if top or imports_top:
            self.top.add(path)
        return True

    def _imports_of(self, path: Path) -> list[tuple[str, Path, str | None]]:
        """(name bound, project module, name taken from it: None for the module itself) for
        each import statement of ``path``, packages above a module included."""
        from gpudoctor.lint.frontend.text_facts import dotted_imports, from_imports

        found = self._imports.get(path)
        if found is not None:
            return found
        text = self.project.text(path)
        out: list[tuple[str, Path, str | None]] = []
        resolve = self.project.resolve
        if isinstance(text, str):
            for base, level, name, bound in from_imports(text):
                parts = base.split(".") if base else []
                for cut in range(1, len(parts)):  # the packages above run first
                    package = resolve(path, ".".join(parts[:cut]), level)
                    if package is not None:
                        out.append(("", package, ""))
                whole = resolve(path, base, level) if base or level else None
                if whole is not None:
                    out.append((bound, whole, name))
                if name != "*" and name.isidentifier():
                    module = resolve(path, f"{base}.{name}" if base else name, level)
                    if module is not None:
                        out.append((bound, module, None))
            for module_name, bound in dotted_imports(text):
                parts = module_name.split(".")
                for cut in range(1, len(parts) + 1):
                    module = resolve(path, ".".join(parts[:cut]), 0)
                    if module is not None:
                        out.append((bound, module, None))
        found = self._imports[path] = [entry for entry in out if entry[1] != path]
        return found

    def _may_import(self, path: Path, stems: set[str]) -> bool:
        """Can an import statement of ``path`` name a module of one of these ``stems`` (a
        relative import may name any)? Read from the words of its import statements, which
        the gate keeps (in the cache too: a warm run reads no file to answer)."""
        words = self.project.gate.import_words(path)
        return words is None or not words.isdisjoint(stems)
