"""Analyse one linted file on its own: its flows, every rule, and what the result depended on.

Each linted file is analysed with a fresh analyzer, so that its findings depend only on its
own code, the modules it reaches, and the names the project uses from it (callers.py). That is
what lets results be cached per file and files be analysed in parallel with the same
answer as in one process.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from gpudoctor.lint.findings import WARNING, Finding, Related, Site
from gpudoctor.lint.paths import real_path

if TYPE_CHECKING:
    from gpudoctor.knowledge.processes import Target
    from gpudoctor.lint.analysis.project import Project
    from gpudoctor.lint.frontend.reading import ParseFailure
    from gpudoctor.lint.notebook import Notebook


@dataclass
class Outcome:
    """What analysing one linted file produced."""

    path: Path
    findings: list[Finding] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)  # file read -> digest of its bytes
    dirs: dict[str, str] = field(default_factory=dict)  # directory listed -> digest of its names
    errors: list[str] = field(default_factory=list)  # internal errors: never cached
    # Functions of other files, left to their callers, that this analysis reached (path ->
    # qualified names); and this file's own such functions its own code does not reach.
    reached: dict[str, list[str]] = field(default_factory=dict)
    deferred: list[str] = field(default_factory=list)
    # Of its own deferred, those none reached, each run on its own after all by a second
    # analysis of the file, and what that one found (engine.py).
    anyway: list[str] = field(default_factory=list)
    extra: list[Finding] = field(default_factory=list)


def analyse(project: Project, path: Path, target: Target,
            called_elsewhere: frozenset[str] = frozenset(),
            deferred: dict[str, frozenset[str]] | None = None) -> Outcome:
    """Run the module flow and the entry-point flows of ``path``, then every rule.

    ``target`` is the Pythons and platform judged (their default start methods, whether
    the forkserver runs the main script's top level before forking the workers). ``deferred``:
    for the other analysed files, the names the project uses from them, of whose functions
    the outcome says which this analysis reached (engine.py)."""
    from gpudoctor.lint.analysis.analyzer import Analyzer
    from gpudoctor.lint.analysis.flows import FlowBuilder
    from gpudoctor.lint.frontend.reading import ParseFailure
    from gpudoctor.lint.nesting import headroom
    from gpudoctor.lint.rehoming import attach
    from gpudoctor.lint.rules._base import CheckContext
    from gpudoctor.lint.rules._registry import all_rules
    from gpudoctor.lint.rules.gd000_unparseable_file import UnparseableFile

    path = project.real(path)
    outcome = Outcome(path)
    # The analysis stops nesting where its own meter says, the same wherever it was
    # called from; Python's recursion limit is raised past that (see nesting.py).
    with headroom(project.limits.max_nesting), project.tracking() as touched:
        analyzer = Analyzer(project, frozenset({path}))
        builder = FlowBuilder(analyzer, target)
        try:
            state = analyzer.module(path)
            if isinstance(state, ParseFailure):
                outcome.findings.append(UnparseableFile().finding(site_of(state), state.message,
                                                                  severity=WARNING if state.too_large else None))
            else:
                outcome.findings.extend(left_out_cells(path))
                flows = [builder.module_flow(state)]
                flows.extend(builder.function_flows(state, called_elsewhere))
                ctx = CheckContext(state, flows, builder, analyzer)
                # Every rule runs, so that an advisory rule stays quiet where the rule that
                # supersedes it fired, even when that one is not selected.
                for rule in all_rules():
                    outcome.findings.extend(rule().check(ctx))
                outcome.findings.extend(cut_short(path, builder.cuts()))
                outcome.deferred = builder.deferred
                if deferred:
                    outcome.reached = analyzer.reached_of(deferred)
                outcome.findings = attach(outcome.findings, flows, str(path),
                                          frozenset(r.code for r in all_rules() if r.shown_at_callers))
            # A module the analysis followed into and could not parse: reported in it, and at
            # the import that led there (shown when the module itself is not being linted).
            for failure in analyzer.failures:
                if failure == state:  # the linted file itself: reported above
                    continue
                outcome.findings.append(UnparseableFile().finding(site_of(failure), failure.message,
                                                                  severity=WARNING if failure.too_large else None))
                via = analyzer.failed_imports.get(failure.path)
                if via is not None:
                    name = Path(failure.path).name
                    outcome.findings.append(UnparseableFile().finding(
                        via, f"{name} cannot be parsed, so gpudoctor cannot follow this import: "
                             f"{failure.message}",
                        (Related(site_of(failure), f"{name} cannot be parsed here"),)))
        except RecursionError:
            outcome.errors.append(f"{path}: nesting too deep to analyse")
        except Exception:  # noqa: BLE001
            outcome.errors.append(f"{path}: internal error\n{traceback.format_exc()}")
    # (sorted as text: ordering Paths compares their parts, many times slower)
    outcome.files = {name: project.digest(p) for name, p in sorted((str(p), p) for p in touched.files)}
    outcome.dirs = {name: project.listing_digest(d) for name, d in sorted((str(d), d) for d in touched.dirs)}
    return outcome


def left_out_cells(path: Path, book: Notebook | None = None) -> list[Finding]:
    """A warning (GD000) for each code cell of a notebook that is not Python and was left
    out of its analysis (notebook.py): the rest of the notebook was checked. ``book``: the
    notebook as read already (else the one this process read for ``path``, if any)."""
    from gpudoctor.lint import notebook
    from gpudoctor.lint.findings import WARNING
    from gpudoctor.lint.rules.gd000_unparseable_file import UnparseableFile

    found = book or (notebook.read_already(str(path)) if notebook.is_notebook(path) else None)
    if found is None:
        return []
    return [UnparseableFile().finding(Site(str(path), row, col, row, col),
                                      f"cell {number} is not Python ({why}): it is left out, and the rest of the "
                                      "notebook is checked", severity=WARNING)
            for number, why, row, col in found.skipped]


def cut_short(path: Path, cuts: list[str]) -> list[Finding]:
    """A warning (GD000) where the analysis of ``path`` left out something a finding may be
    in, for one of its bounds (limits.py): the findings it shows are right, and one may be
    missing. Said, as the budget of the context is, so that a cut never hides one silently."""
    from gpudoctor.lint.findings import WARNING
    from gpudoctor.lint.rules.gd000_unparseable_file import UnparseableFile

    if not cuts:
        return []
    return [UnparseableFile().finding(Site(str(path), 1, 0, 1, 0),
                                      f"the analysis was cut short: {'; '.join(cuts)}; a finding may be missing",
                                      severity=WARNING)]


def site_of(failure: ParseFailure) -> Site:
    return Site(str(real_path(failure.path)), failure.row, failure.col, failure.row, failure.col)


# A worker process's state (see start_worker): its project, whose parses and module walks
# the files it analyses share, the target judged and the names the project uses from
# each file; or why it could not be set up.
_worker: tuple[Project, Target, dict[str, frozenset[str]]] | str | None = None


def start_worker(root: str, target: Target, state: bytes) -> None:
    """Worker initializer: the project this process analyses its files in. ``state`` is
    the pickled names the project uses from each file, the gate's facts, the
    prescans the parent made (each kept while its file's digest matches) and the run's
    limits: one blob, which reaches a worker faster than the objects themselves.

    It never raises: a pool whose initializer fails starts a new worker, which fails
    again, for ever. The failure is kept, and each file handed to this worker reports it."""
    global _worker  # noqa: PLW0603 - one per worker process
    try:
        import pickle

        from gpudoctor.lint.analysis.project import Project
        from gpudoctor.lint.frontend.project_gate import Kept
        from gpudoctor.lint.gc_pause import off_until_exit

        off_until_exit()  # a worker lives as long as its pool: one run
        called_elsewhere, facts, scans, limits = pickle.loads(state)  # noqa: S301 - written by this run's own parent
        _worker = (Project(Path(root), Kept(facts or {}), known_scans=scans, limits=limits), target,
                   {path: frozenset(names) for path, names in called_elsewhere.items()})
    except Exception:  # noqa: BLE001
        _worker = f"a worker could not start\n{traceback.format_exc()}"


def analyse_in_worker(paths: list[str], names: dict[str, list[str]] | None = None) -> list[tuple[str, Outcome]]:
    """Worker task: analyse some linted files in this worker's project; each outcome with
    the path it was asked for. ``names``: for a second analysis, the names other files use
    from each (those of the worker's start otherwise)."""
    if not isinstance(_worker, tuple):
        reason = _worker or "a worker could not start"
        return [(path, Outcome(Path(path), errors=[f"{path}: internal error: {reason}"])) for path in paths]
    project, target, called_elsewhere = _worker
    if names is not None:
        return [(path, analyse(project, Path(path), target, frozenset(names[path]))) for path in paths]
    return [(path, analyse(project, Path(path), target, called_elsewhere.get(path, frozenset()),
                           called_elsewhere))
            for path in paths]
