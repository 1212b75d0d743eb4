"""Lint a set of files: gate, reuse or analyse each linted file, tidy the findings."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from gpudoctor.lint.findings import Edit, Finding, Fix, Related, Site
from gpudoctor.lint.limits import DEFAULT_LIMITS, Limits
from gpudoctor.lint.paths import forget_links, real_path
from gpudoctor.lint.settings import Settings

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from gpudoctor.knowledge.processes import Target
    from gpudoctor.lint.analysis.project import Project
    from gpudoctor.lint.cache import Cache
    from gpudoctor.lint.file_analysis import Outcome
    from gpudoctor.lint.noqa import FileDirectives
    from gpudoctor.lint.notebook import Notebook


@dataclass(frozen=True)
class Plan:
    """What a run analysed: the linted files, the others analysed for their context, the
    names the project uses from each, whether the budget left context out; and the
    findings each analysis made, before they were tidied (``gpudoctor server`` reuses a
    run's plan and context findings for a quick run after an edit: see ``lint_paths``)."""

    linted: tuple[Path, ...]
    context: tuple[Path, ...]
    called: dict[Path, frozenset[str]]
    left_out: int
    found: dict[Path, list[Finding]] = field(default_factory=dict)
    outcomes: dict[Path, Outcome] = field(default_factory=dict)  # (what each reached and left: engine._unreached)


class Cancelled(Exception):
    """A run stopped because its caller no longer wants its result."""


@dataclass
class LintResult:
    findings: list[Finding] = field(default_factory=list)
    files_checked: int = 0
    internal_errors: list[str] = field(default_factory=list)
    analysed: int = 0  # linted files analysed in this run (the others came from the cache)
    cached: int = 0
    # Files not named that import named ones, analysed for their context (see callers.py);
    # how many of them were analysed in this run (the others came from the cache).
    context: int = 0
    context_analysed: int = 0
    workers: int = 0  # worker processes used (0: analysed in this process)
    warnings: list[str] = field(default_factory=list)  # one line each, for the user
    plan: Plan | None = None  # what was analysed, and what each analysis found
    reused: bool = False  # the run reused an earlier one's plan and context findings


# A run this large may need workers: their fork server starts while the plan is made
# (when the cached plan cannot be reused).
PRESTART_MIN_FILES = 200
# Starting worker processes costs about as much as analysing this much source in-process
# (docs/performance.md).
PARALLEL_MIN_BYTES = 150_000


def lint_paths(files: list[Path], settings: Settings, *, cache: Cache | None = None,
               jobs: int = 1, contents: dict[Path, bytes] | None = None,
               project_files: list[Path] | None = None, limits: Limits = DEFAULT_LIMITS,
               reuse: Plan | None = None, cancelled: Callable[[], bool] | None = None) -> LintResult:
    """Check ``files`` (already discovered) and return findings in file order.

    ``contents`` gives the bytes of some files instead of their file on disk (the text of
    ``gpudoctor lint -``); those files are analysed in this process. ``project_files``:
    every file of the project, when the caller knows them (``files``, when a path named
    the project's root); else the project's root is discovered when the plan needs it
    (see callers.py). ``limits``: the analysis's budgets (tests make them small); the cache
    holds findings made with the default ones, so a run with others neither reads nor
    writes it.

    ``reuse``: the plan of an earlier run naming the same files, for a quick run after an
    edit (``gpudoctor server``): the named files are analysed again with the names it
    found used (unless the edit changed which of them can matter: then the run is a full
    one, ``reused`` False), and the context files are not, their earlier outcomes (``reuse.outcomes``,
    their findings already moved to the edited text by the caller) stand in. The analyses made are
    cached as in any run (each is the one a run that found those names used makes); the
    plan is not. ``cancelled``: asked between analyses; when it says so, the run stops with
    ``Cancelled``.
    """
    from gpudoctor.lint.gc_pause import paused

    forget_links()
    with paused():
        return _lint_paths(files, settings, None if limits != DEFAULT_LIMITS else cache,
                           1 if contents else jobs, limits, contents, project_files, reuse, cancelled)


def _lint_paths(files: list[Path], settings: Settings, cache: Cache | None, jobs: int, limits: Limits,
                contents: dict[Path, bytes] | None = None,
                project_files: list[Path] | None = None, reuse: Plan | None = None,
                cancelled: Callable[[], bool] | None = None) -> LintResult:
    from gpudoctor.lint.analysis.project import Project
    from gpudoctor.lint.rules._registry import all_rules

    project = Project(settings.project_root, cache.kept() if cache is not None else None, contents, limits=limits)
    if reuse is not None and {project.real(p) for p in files if project.gate.may_matter(p)} != set(reuse.linted):
        reuse = None  # the edit changed which named files can matter: their uses are not known
    if reuse is not None:
        linted, context, called, left_out = list(reuse.linted), list(reuse.context), reuse.called, reuse.left_out
    else:
        linted, context, called, left_out = _plan(project, files, settings, project_files, cache,
                                                  prestart=jobs > 1 and len(files) >= PRESTART_MIN_FILES)
    if cancelled is not None and cancelled():
        raise Cancelled
    result = LintResult(files_checked=len(files), context=len(context), reused=reuse is not None)
    if left_out:
        result.warnings.append(
            "files that use the named ones were not all analysed for their context (over the budget): "
            "findings those callers would cause in the named files may be missing, and unused noqa "
            "directives are not reported; lint the whole project to see them")
    kept: dict[Path, Outcome] = {}  # each analysed file's outcome, this run's or an earlier one's
    todo = []
    for path in [*linted, *context]:
        if reuse is not None and path in context and path in reuse.outcomes:
            kept[path] = reuse.outcomes[path]
            continue
        cached = cache.lookup(project, path, called[path]) if cache is not None else None
        if cached is None:
            todo.append(path)
        else:
            kept[path] = cached
    if cache is not None and cache.usable and todo:
        # Modules walked for an import are read back from their summaries, when unchanged,
        # and the walks made here are kept (analyses in worker processes keep none).
        project.walks.stored = cache.stored_walk(project)
    fresh: dict[Path, Outcome] = {}
    again: dict[Path, list[str]] = {}

    def second_batch(outcomes: list[Outcome]) -> dict[Path, frozenset[str]]:
        """Given the first analyses, the files to analyse again (engine._unreached), with
        the names other files use from each, marked, for that second analysis."""
        from gpudoctor.lint.analysis.flows import UNREACHED

        for outcome in outcomes:
            kept[outcome.path] = fresh[outcome.path] = outcome
            result.internal_errors.extend(outcome.errors)
        # Functions left to callers that none of the analyses reached are run on their own
        # after all, by a second analysis of their file for them alone. (Not when some
        # context was left out: callers not analysed may reach them.)
        found = {path: [] for path, outcome in kept.items() if outcome.anyway} if left_out else _unreached(kept)
        again.update((path, left) for path, left in found.items() if left != kept[path].anyway)
        if again and cancelled is not None and cancelled():
            raise Cancelled
        return {path: called[path] | {UNREACHED + name for name in left} for path, left in again.items() if left}

    outcomes, second, result.workers = _analyse(project, todo, settings.target, called, jobs,
                                                result.warnings, cancelled, second_batch)
    by_path = {outcome.path: outcome for outcome in second}
    for path, left in again.items():
        first, other = kept[path], by_path.get(path)
        kept[path] = fresh[path] = replace(
            first, anyway=left, extra=other.findings if other is not None else [],
            files={**first.files, **other.files} if other is not None else first.files,
            dirs={**first.dirs, **other.dirs} if other is not None else first.dirs,
            errors=[*first.errors, *(other.errors if other is not None else [])])
        if other is not None:
            result.internal_errors.extend(other.errors)
    if cache is not None and cache.usable and todo:
        cache.store_walks(project, len(todo))
    if cache is not None:
        for outcome in fresh.values():
            cache.store(outcome, called[outcome.path])
    found = {path: [*outcome.findings, *outcome.extra] for path, outcome in kept.items()}
    result.plan = Plan(tuple(linted), tuple(context), called, left_out, found, kept)
    shown = set(linted)
    result.analysed = sum(1 for path in todo if path in shown)
    result.cached = len(linted) - result.analysed
    result.context_analysed = len(todo) - result.analysed
    directives = _directives(project, linted, cache)
    if cache is not None:
        cache.save(project)
    # A context file's findings in the files shown only (the others are dropped by _tidy:
    # neither in a file shown nor reached from one). Of one finding reported by several
    # analyses, the first is kept: a file's own analysis first, then the others by path,
    # whichever files were named.
    analysed = sorted([*linted, *context], key=str)
    raw = [f for path in analysed for f in found.get(path, ()) if f.site.path == str(path)]
    raw += [f for path in analysed for f in found.get(path, ()) if f.site.path != str(path)]
    # A notebook none of whose code can matter is not analysed, but a cell of it that is not
    # Python was still left out: said as in an analysed one (as a .py file that cannot be
    # parsed is reported whatever it holds).
    from gpudoctor.lint.file_analysis import left_out_cells

    notebooks = _notebooks(project, files)
    raw += [f for path, book in notebooks.items() if path not in shown for f in left_out_cells(path, book)]
    display = {project.real(path): str(path) for path in files}
    suppressed_by = {rule.code: rule.suppressed_by for rule in all_rules()}
    next_steps = {rule.code: rule.fix_title for rule in all_rules() if rule.outlives_fix and rule.fix_title}
    result.findings = _tidy(raw, display, settings, suppressed_by, directives, project.text, unused_noqa=not left_out,
                            notebooks=notebooks, next_steps=next_steps)
    return result


def _directives(project: Project, linted: list[Path], cache: Cache | None) -> dict[Path, FileDirectives]:
    """The noqa comments of each linted file whose text can be read: kept in the cache by
    the file's digest (finding them takes Python's tokenizer over the whole text, most of
    what a warm run over keras costs otherwise)."""
    from gpudoctor.lint import noqa

    out = {}
    for path in linted:
        digest = project.digest(path)
        found = cache.directives(str(path), digest) if cache is not None else None
        if found is None:
            text = project.text(path)
            if not isinstance(text, str):
                continue
            found = noqa.parse(text)
            if cache is not None:
                cache.note_directives(str(path), digest, found)
        out[path] = found
    return out


def _notebooks(project: Project, files: list[Path]) -> dict[Path, Notebook]:
    """The Jupyter notebooks among ``files`` that could be read, by real path (their
    findings' rows are mapped to cells)."""
    from gpudoctor.lint import notebook

    out = {}
    for path in files:
        if notebook.is_notebook(path) and isinstance(data := project.data(path), bytes):
            try:
                out[project.real(path)] = notebook.read(data)
            except notebook.NotANotebook:
                continue
    return out


def _plan(project: Project, files: list[Path], settings: Settings, project_files: list[Path] | None,
          cache: Cache | None, prestart: bool = False
          ) -> tuple[list[Path], list[Path], dict[Path, frozenset[str]], int]:
    """Which files to lint, which others to analyse for their context, the names the
    project uses from each analysed file, and whether the budget left some context out
    (see callers.py).

    Reused from the cache when every file has the same bytes as last time and every
    directory listing the decision read is unchanged.
    """
    import hashlib

    from gpudoctor.lint import callers

    if prestart and cache is None:  # a large run without a plan to reuse: workers are likely
        _prestart()
    folders: list[Path] = []
    if project_files is None and \
            not any(project.gate.may_matter(path) or project.gate.facts(path).follow for path in files):
        # No named file can have a finding, of its own or as a module another file's
        # analysis walks (and reports unparseable, GD000): no callers to look for.
        return [], [], {}, 0
    # surrogateescape: a file name that is not UTF-8 is its bytes again, not an error.
    # The exclusions too: they decide which files are the project's, the callers among them
    # (an ``exclude`` added to pyproject.toml changes the plan and no file it read).
    exclusions = [str(settings.config_root or ""), *settings.exclude]
    key = hashlib.blake2b("\n".join([*(f"{project.real(p)}\0{project.digest(p)}" for p in files),
                                     "\0".join(exclusions)])
                          .encode(errors="surrogateescape"), digest_size=16).hexdigest()
    if cache is not None:
        planned = cache.lookup_plan(project, key)
        if planned is not None:
            return planned
        if prestart:
            _prestart()
    if project_files is None and not settings.search_callers:
        project_files = list(files)
    if project_files is None:  # (discovered once the plan kept is known not to hold)
        project_files = _project_files(settings, folders)
    with project.tracking() as touched:
        linted = list(dict.fromkeys(project.real(path) for path in files if project.gate.may_matter(path)))
        context, called, left_out = callers.plan(project, files, linted, project_files)
        if context or not {project.real(p) for p in project_files} <= {project.real(p) for p in files}:
            touched.dirs.update(project.real(f) for f in folders)  # a new file may import a named one
            touched.files.update(project.real(p) for p in project_files)
            # The .gitignore files decide which files are the project's too (one that is not
            # there reads as such: adding it changes the plan).
            top = Path(os.path.abspath(settings.project_root))
            touched.files.update(project.real(f / ".gitignore") for f in (*folders, *top.parents))
    if cache is not None:
        cache.store_plan(key, linted, context, called, left_out,
                         {str(p): project.digest(p) for p in touched.files},
                         {str(d): project.listing_digest(d) for d in touched.dirs})
    return linted, context, called, left_out


def _project_files(settings: Settings, folders: list[Path]) -> list[Path]:
    """Every file of the project: its root, discovered with the settings' exclusions (the
    folders walked are added to ``folders``)."""
    from gpudoctor.lint.discovery import discover

    try:
        return discover([str(settings.project_root)], settings.excluded, root=settings.project_root,
                        skipped=[], folders=folders)
    except Exception:  # noqa: BLE001 - a root that cannot be walked: no context, as before
        return []


def _prestart() -> None:
    from gpudoctor.lint.workers import prestart

    prestart()


def _workers_supported() -> bool:
    from gpudoctor.lint.workers import SUPPORTED

    return SUPPORTED


def _unreached(outcomes: dict[Path, Outcome]) -> dict[Path, list[str]]:
    """For each analysed file, the functions its analysis left to the files that use their
    names (FlowBuilder.function_flows) and that none of the run's analyses reached: a
    caller that holds the object on ``self`` and calls it from another method, a Ray actor's
    method called through ``.remote()``. Nothing else analyses them, so their own file does,
    each on its own with nothing known (as it does any function no file uses).

    Read from the first analysis of each file (not from one that ran such functions), so
    that a run from the cache and one without find the same."""
    reached: dict[str, set[str]] = {}
    for outcome in outcomes.values():
        for name, functions in outcome.reached.items():
            reached.setdefault(name, set()).update(functions)
    out: dict[Path, list[str]] = {}
    for path, outcome in outcomes.items():
        left = [function for function in outcome.deferred if function not in reached.get(str(path), ())]
        if left or outcome.anyway:
            out[path] = left
    return out


def _analyse(project: Project, todo: list[Path], target: Target, called: dict[Path, frozenset[str]],
             jobs: int, warnings: list[str],
             cancelled: Callable[[], bool] | None = None,
             then: Callable[[list[Outcome]], dict[Path, frozenset[str]]] | None = None,
             ) -> tuple[list[Outcome], list[Outcome], int]:
    """Analyse the linted files, in worker processes when there is enough work to share;
    then the files ``then``, given those outcomes, names, each with the names other files
    use from it for that second analysis (on the same workers). Return both outcomes and
    how many workers there were.

    The files a worker took and never returned (it was killed, or ran out of memory) are
    analysed here, with a warning: a lost worker costs time, not findings. ``cancelled``
    is asked before each file analysed in this process."""
    from gpudoctor.lint import file_analysis

    def here(paths: list[Path], names: dict[Path, frozenset[str]], deferred: dict[str, frozenset[str]] | None
             ) -> list[Outcome]:
        out = []
        for path in paths:
            if cancelled is not None and cancelled():
                raise Cancelled
            out.append(file_analysis.analyse(project, path, target, names[path], deferred))
        return out

    sizes = {path: len(data) if isinstance(data := project.data(path), bytes) else 0 for path in todo}
    deferred = {str(path): names for path, names in called.items() if names}
    small = jobs <= 1 or len(todo) < 2 or sum(sizes.values()) < PARALLEL_MIN_BYTES
    if small or not _workers_supported():  # (multiprocessing is not even imported for a small run)
        outcomes = here(todo, called, deferred)
        batch = then(outcomes) if then is not None else {}
        return outcomes, here(list(batch), batch, None), 0
    from gpudoctor.lint.workers import run_files

    processes = min(jobs, len(todo))
    more: dict[Path, frozenset[str]] = {}
    asked: list[bool] = []  # (``then`` is asked once)

    def second(outcomes: list[Outcome]) -> dict[str, list[str]]:
        asked.append(True)
        more.update(then(outcomes) if then is not None else {})
        return {str(path): sorted(names) for path, names in more.items()}

    # The largest first: a worker that took a large file last would finish long after the other.
    ordered = sorted(todo, key=lambda p: -sizes[p])
    outcomes, lost, again = run_files(str(project.root), [str(p) for p in ordered], processes, target,
                                      {str(p): sorted(names) for p, names in called.items()},
                                      project.gate.all_facts(), project.all_scans(),
                                      limits=project.limits, then=second)
    if lost:
        count = f"{len(lost)} file{'s' if len(lost) != 1 else ''}"
        warnings.append(f"a worker process ended abruptly (killed, or out of memory); its {count} "
                        "analysed in this process instead")
        outcomes.extend(here([Path(path) for path in lost], called, deferred))
    if again is None:  # (no second batch, or a worker died before it or during it)
        if not asked and then is not None:
            more.update(then(outcomes))
        again = here(list(more), more, None)
    return outcomes, again, processes


def _tidy(raw: list[Finding], display: dict[Path, str], settings: Settings,
          suppressed_by: dict[str, tuple[str, ...]], directives: dict[Path, FileDirectives],
          text_of: Callable[[Path], object],
          unused_noqa: bool = True, notebooks: dict[Path, Notebook] | None = None,
          next_steps: dict[str, str] | None = None) -> list[Finding]:
    """Dedupe, drop superseded advisories, apply noqa and per-file-ignores, then selection
    (and report unused noqa directives, unless ``unused_noqa`` is False: some findings the
    directives were written for may not have been looked for).

    ``next_steps``: for the rules whose finding outlives the fix of the one that supersedes
    it (GD401 under GD101: once the pool spawns, each worker reserves the GPU's memory), the
    fix title the superseding finding's help then names as the next step."""
    from gpudoctor.lint.rehoming import rehome

    unique: dict[tuple[str, str, int, int], Finding] = {}
    for finding in raw:
        if real_path(finding.site.path) not in display:
            # in code a linted file reaches: shown there, at the call or import
            moved = rehome(finding, display)
            if moved is None:
                continue
            finding = moved
        if finding.code == "GD000" and finding.related and real_path(finding.related[0].site.path) in display:
            continue  # the unparseable module is linted too: reported there, once
        key = (finding.code, finding.site.path, finding.site.row, finding.site.col)
        kept = unique.get(key)
        if kept is None or (kept.severity != "error" and finding.severity == "error"):
            unique[key] = finding
    at_site = {(f.code, f.site.path, f.site.row, f.site.col) for f in unique.values()}
    used: set[tuple[Path, int, str]] = set()
    out = []
    then: dict[tuple[str, str, int, int], list[str]] = {}  # a superseding finding -> the codes it hides
    for (code, path, row, col), finding in unique.items():
        hidden_by = [other for other in suppressed_by.get(code, ()) if (other, path, row, col) in at_site]
        if hidden_by:
            hidden_noqa = directives.get(real_path(path))
            if next_steps and code in next_steps and _selected(code, real_path(path), settings) \
                    and not (hidden_noqa is not None and hidden_noqa.suppresses(row, code)):
                for other in hidden_by:
                    then.setdefault((other, path, row, col), []).append(code)
            continue
        resolved = real_path(path)
        found = directives.get(resolved)
        if found is not None and found.suppresses(row, code):
            used.add((resolved, row, code))
            continue
        if not _selected(code, resolved, settings):
            continue
        out.append(finding)
    if then and next_steps:
        out = [_with_next_steps(f, then.get((f.code, f.site.path, f.site.row, f.site.col), ()), next_steps)
               for f in out]
    # A file that could not be parsed (or a function of it); not one that imports such a file.
    broken = {real_path(f.site.path) for f in unique.values() if f.code == "GD000" and not f.related}
    if unused_noqa:
        out.extend(_unused_noqa({p: d for p, d in directives.items() if p not in broken}, used, settings,
                                frozenset(suppressed_by), text_of))
    out.extend(_malformed_noqa(directives, settings))  # whatever was analysed: it is in the comment alone
    return sorted((_relabel(f, display, notebooks or {}) for f in out), key=lambda f: f.sort_key)


def _with_next_steps(finding: Finding, hidden: Sequence[str], next_steps: dict[str, str]) -> Finding:
    """``finding`` with its help naming what the findings it hides will still ask once it is
    fixed."""
    if not hidden or finding.fix_hint is None:
        return finding
    steps = "; ".join(f"{next_steps[code][:1].lower()}{next_steps[code][1:]} ({code})" for code in sorted(set(hidden)))
    return replace(finding, fix_hint=f"{finding.fix_hint}; then {steps}")


def _selected(code: str, path: Path, settings: Settings) -> bool:
    if code not in settings.selection:
        return False
    return not any(code.startswith(prefix) for prefix in settings.ignored_codes(path))


def _malformed_noqa(directives: dict[Path, FileDirectives], settings: Settings) -> list[Finding]:
    """GD001 for each ``# noqa:`` that names no code (``# noqa: XYZ``): it suppresses
    nothing, and says so (see gpudoctor.lint.noqa)."""
    from gpudoctor.lint.rules.gd001_unused_noqa import MALFORMED, UnusedNoqa

    rule = UnusedNoqa()
    return [rule.finding(Site(str(path), row, directive.col, row, directive.end_col), MALFORMED)
            for path, found in directives.items() if not found.whole_file and _selected(rule.code, path, settings)
            for row, directive in found.lines.items() if directive.malformed]


def _unused_noqa(directives: dict[Path, FileDirectives], used: set[tuple[Path, int, str]],
                 settings: Settings, known: frozenset[str], text_of: Callable[[Path], object]) -> list[Finding]:
    """GD001 for each ``# noqa`` code that suppressed nothing (a file that cannot be parsed
    has no findings to suppress, so none of its directives is called unused)."""
    from gpudoctor.lint import noqa
    from gpudoctor.lint.rules.gd001_unused_noqa import UnusedNoqa

    rule = UnusedNoqa()
    out = []
    for path, found in directives.items():
        if found.whole_file or not _selected(rule.code, path, settings):
            continue
        for row, directive in found.lines.items():
            stale = sorted(c for c in directive.codes or () if c.startswith("GD") and (path, row, c) not in used)
            if stale:
                site = Site(str(path), row, directive.col, row, directive.end_col)
                unknown = [c for c in stale if c not in known]
                unused = [c for c in stale if c in known]
                parts = ([f"unused noqa directive for {', '.join(unused)}"] if unused else []) + \
                    ([f"unknown rule code{'s' if len(unknown) > 1 else ''} {', '.join(unknown)} in noqa directive "
                      "(see `gpudoctor rule --all`)"] if unknown else [])
                text = text_of(path)
                fix = noqa.fix_unused(text if isinstance(text, str) else "", directive, stale)
                out.append(rule.finding(site, "; ".join(parts), fix=fix))
    return out


def _relabel(finding: Finding, display: dict[Path, str], notebooks: dict[Path, Notebook]) -> Finding:
    """Each site under the name its file was given (or relative to the working folder);
    in a notebook, at its cell and the line in that cell."""
    def show(site: Site) -> Site:
        resolved = real_path(site.path)
        shown = display.get(resolved)
        if shown is None:
            try:
                shown = str(resolved.relative_to(Path.cwd()))
            except (ValueError, OSError):  # OSError: the working folder was deleted
                shown = str(resolved)
        notebook = notebooks.get(resolved)
        start = notebook.locate(site.row) if notebook is not None else None
        if notebook is None or start is None:
            return replace(site, path=shown)
        end = notebook.locate(site.end_row)
        end_row, end_col = (end[1], site.end_col) if end is not None and end[0] == start[0] else \
            (start[1], site.col)  # a span past its cell (a syntax error's): its start
        return Site(shown, start[1], site.col, end_row, end_col, cell=start[0])

    related = tuple(Related(show(r.site), r.message) for r in finding.related)
    reached = None if finding.reached is None else Related(show(finding.reached.site), finding.reached.message)
    fix = finding.fix
    notebook = notebooks.get(real_path(finding.site.path))
    if fix is not None and notebook is not None:
        fix = _fix_in_cell(fix, notebook)
    return replace(finding, site=show(finding.site), related=related, reached=reached, fix=fix)


def _fix_in_cell(fix: Fix, notebook: Notebook) -> Fix | None:
    """A notebook's fix with its edits at rows of their cell (as ruff's JSON gives them);
    None when an edit spans cells or leaves them. (Fixes are not applied to notebooks:
    fixes/apply.py says so.)"""
    edits = []
    cells = set()
    for edit in fix.edits:
        start, end = notebook.locate(edit.start[0]), notebook.locate(edit.end[0])
        if start is None or end is None or start[0] != end[0]:
            return None
        cells.add(start[0])
        edits.append(Edit(edit.content, (start[1], edit.start[1]), (end[1], edit.end[1])))
    return replace(fix, edits=tuple(edits)) if len(cells) <= 1 else None
