"""Lint a set of files: gate, parse, build flows, run the selected rules, tidy the findings."""

from __future__ import annotations

import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from gpudoctor.lint.findings import Finding, Related, Site
from gpudoctor.lint.settings import Settings

if TYPE_CHECKING:
    from gpudoctor.lint.analysis.source import ParseFailure


@dataclass
class LintResult:
    findings: list[Finding] = field(default_factory=list)
    files_checked: int = 0
    internal_errors: list[str] = field(default_factory=list)


def lint_paths(files: list[Path], settings: Settings) -> LintResult:
    """Check ``files`` (already discovered) and return findings in file order."""
    from gpudoctor.lint.analysis.analyzer import Analyzer, ModuleState
    from gpudoctor.lint.analysis.flows import Flow, FlowBuilder
    from gpudoctor.lint.analysis.project import Project
    from gpudoctor.lint.analysis.source import ParseFailure
    from gpudoctor.lint.rules._base import CheckContext
    from gpudoctor.lint.rules._registry import all_rules
    from gpudoctor.lint.rules.gd000_unparseable_file import UnparseableFile

    project = Project(settings.project_root)
    gated = {path for path in files if project.may_matter(path)}
    project.linted = frozenset(path.resolve() for path in gated)
    analyzer = Analyzer(project, frozenset(gated))
    builder = FlowBuilder(analyzer, settings.default_start_method)
    # Every rule runs, so that an advisory rule stays quiet where the rule that supersedes
    # it fired, even when that one is not selected; selection filters the output.
    rules = [rule() for rule in all_rules()]
    display = {path.resolve(): str(path) for path in files}
    result = LintResult(files_checked=len(files))
    raw: list[Finding] = []
    modules: dict[Path, tuple[ModuleState, list[Flow]]] = {}
    # Phase 1: every module as a script, so that every known caller of a function is seen.
    for path in files:
        if path not in gated:
            continue
        with _guard(path, result):
            state = analyzer.module(path)
            if isinstance(state, ParseFailure):
                raw.append(UnparseableFile().finding(_site_of(state), state.message))
                continue
            modules[path] = (state, [builder.module_flow(state)])
    # Phase 2: functions nobody calls, on their own; then the rules.
    for path, (state, flows) in modules.items():
        with _guard(path, result):
            flows.extend(builder.function_flows(state))
            ctx = CheckContext(state, flows, builder, analyzer)
            for rule in rules:
                raw.extend(rule.check(ctx))
    # A module the analysis followed into and could not parse (a gated one is reported above).
    raw.extend(UnparseableFile().finding(_site_of(failure), failure.message)
               for failure in analyzer.failures if Path(failure.path) not in project.linted)
    texts = {Path(state.path): project.text(Path(state.path)) for state, _ in modules.values()}
    texts = {path: text for path, text in texts.items() if isinstance(text, str)}
    result.findings = _tidy(raw, display, settings, {r.code: r.suppressed_by for r in rules}, texts)
    return result


def _site_of(failure: ParseFailure) -> Site:
    return Site(str(Path(failure.path).resolve()), failure.row, failure.col, failure.row, failure.col)


@contextmanager
def _guard(path: Path, result: LintResult) -> Iterator[None]:
    """Turn a crash on one file into a message, so the other files' findings survive."""
    try:
        yield
    except RecursionError:
        result.internal_errors.append(f"{path}: nesting too deep to analyse")
    except Exception:  # noqa: BLE001
        result.internal_errors.append(f"{path}: internal error\n{traceback.format_exc()}")


def _tidy(raw: list[Finding], display: dict[Path, str], settings: Settings,
          suppressed_by: dict[str, tuple[str, ...]], texts: dict[Path, str]) -> list[Finding]:
    """Dedupe, drop superseded advisories, apply noqa and per-file-ignores, then selection."""
    from gpudoctor.lint import noqa

    unique: dict[tuple[str, str, int, int], Finding] = {}
    for finding in raw:
        if Path(finding.site.path).resolve() not in display:
            continue
        key = (finding.code, finding.site.path, finding.site.row, finding.site.col)
        kept = unique.get(key)
        if kept is None or (kept.severity != "error" and finding.severity == "error"):
            unique[key] = finding
    at_site = {(f.code, f.site.path, f.site.row, f.site.col) for f in unique.values()}
    directives = {path: noqa.parse(text) for path, text in texts.items()}
    used: set[tuple[Path, int, str]] = set()
    out = []
    for (code, path, row, col), finding in unique.items():
        if any((other, path, row, col) in at_site for other in suppressed_by.get(code, ())):
            continue
        resolved = Path(path).resolve()
        found = directives.get(resolved)
        if found is not None and found.suppresses(row, code):
            used.add((resolved, row, code))
            continue
        if not _selected(code, resolved, settings):
            continue
        out.append(finding)
    out.extend(_unused_noqa(directives, used, settings))
    return sorted((_relabel(f, display) for f in out), key=lambda f: f.sort_key)


def _selected(code: str, path: Path, settings: Settings) -> bool:
    if code not in settings.selection:
        return False
    return not any(code.startswith(prefix) for prefix in settings.ignored_codes(path))


def _unused_noqa(directives: dict[Path, object], used: set[tuple[Path, int, str]],
                 settings: Settings) -> list[Finding]:
    from gpudoctor.lint.rules.gd001_unused_noqa import UnusedNoqa

    rule = UnusedNoqa()
    out = []
    for path, found in directives.items():
        if found.whole_file or not _selected(rule.code, path, settings):  # type: ignore[attr-defined]
            continue
        for row, directive in found.lines.items():  # type: ignore[attr-defined]
            stale = sorted(c for c in directive.codes or () if c.startswith("GD") and (path, row, c) not in used)
            if stale:
                site = Site(str(path), row, directive.col, row, directive.end_col)
                out.append(rule.finding(site, f"unused noqa directive for {', '.join(stale)}"))
    return out


def _relabel(finding: Finding, display: dict[Path, str]) -> Finding:
    def show(site: Site) -> Site:
        resolved = Path(site.path).resolve()
        shown = display.get(resolved)
        if shown is None:
            try:
                shown = str(resolved.relative_to(Path.cwd()))
            except ValueError:
                shown = str(resolved)
        return replace(site, path=shown)

    related = tuple(Related(show(r.site), r.message) for r in finding.related)
    return replace(finding, site=show(finding.site), related=related)
