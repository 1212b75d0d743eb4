"""Lint what the inputs name, and apply or preview the fixes: the second stage of a run
(inputs, execution, presentation, exit code: see runner.py).

The findings come back as values; what is said on stderr here is about the fixes
themselves (how many were applied, which files were refused), and about the noqa comments
``--add-noqa`` wrote, in the order they happen.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from gpudoctor.lint.inputs import LintInputs, names_root

if TYPE_CHECKING:
    from gpudoctor.lint.cache import Cache
    from gpudoctor.lint.engine import LintResult
    from gpudoctor.lint.findings import Finding
    from gpudoctor.lint.fixes.add_noqa import Left
    from gpudoctor.lint.settings import Settings


@dataclass(frozen=True)
class Execution:
    """How the files are linted: the worker processes and the result cache (None: none)."""

    jobs: int
    cache: Cache | None


def prepare(inputs: LintInputs, jobs: int | None, no_cache: bool, cache_dir: str | None) -> Execution:
    """Choose the workers and the cache (never for stdin: its source is no file's).

    Never more workers than the CPUs this process may use (``--jobs 10000`` would start
    hundreds of processes that share them, each paying its start-up), nor, later, than
    the files to analyse (the engine's ``_analyse``)."""
    cache = None if no_cache or inputs.from_stdin else cache_for(inputs.settings, cache_dir)
    cpus = _cpus()
    return Execution(min(jobs, cpus) if jobs else cpus, cache)


def lint(inputs: LintInputs, execution: Execution) -> LintResult:
    """Lint the inputs' files (their whole project for context, when a path names its root)."""
    from gpudoctor.lint.engine import lint_paths

    whole = not inputs.from_stdin and names_root(inputs.paths, inputs.settings.project_root)
    return lint_paths(inputs.files, inputs.settings, cache=execution.cache, jobs=execution.jobs,
                      contents=inputs.contents, project_files=inputs.files if whole else None)


def fix(result: LintResult, inputs: LintInputs, execution: Execution, unsafe: bool,
        talk: bool = True) -> LintResult:
    """Apply fixes, then lint again so that what is reported is what is left (``talk``:
    say how many were fixed, and with ``unsafe``, why a finding whose rule has a fix got
    none)."""
    from gpudoctor.lint.engine import lint_paths
    from gpudoctor.lint.fixes import apply

    fix_plan = apply.plan(result.findings, unsafe, inputs.settings.project_root)
    apply.write(fix_plan)
    say_refused(fix_plan.refused)
    if talk and unsafe:
        say_no_fix(result.findings)
    if fix_plan.texts and talk:
        print(f"Fixed {len(fix_plan.fixed)} finding{'s' if len(fix_plan.fixed) != 1 else ''} "
              f"in {len(fix_plan.texts)} file{'s' if len(fix_plan.texts) != 1 else ''}.", file=sys.stderr)
    if fix_plan.texts:
        return lint_paths(inputs.files, inputs.settings, cache=execution.cache, jobs=execution.jobs)
    return result


def add_noqa(result: LintResult, inputs: LintInputs, talk: bool = True, listing: bool = True) -> list[Left]:
    """Give each finding a ``# noqa`` on its line (fixes/add_noqa.py) and return those left
    without one; say which could not be given one (``listing``) and how many lines were
    (``talk``), on stderr as ``--fix`` says what it fixed."""
    from gpudoctor.lint.fixes import add_noqa as noqa_comments
    from gpudoctor.lint.reporters.printable import printable

    noqa_plan = noqa_comments.plan(result.findings, inputs.files, inputs.settings.project_root)
    noqa_plan.write()
    say_refused(noqa_plan.edits.refused, doing="adding noqa to")
    left = noqa_plan.left
    if left and listing:
        count = f"{len(left)} finding{'s' if len(left) != 1 else ''}"
        print(f"gpudoctor: {count} could not be given a noqa (the next run still reports "
              f"{'them' if len(left) != 1 else 'it'}):", file=sys.stderr)
        for item in left:
            site = item.finding.site
            print(f"{printable(site.path)}:{site.position()}: {item.finding.code} {item.reason}", file=sys.stderr)
    if talk:
        added, files = noqa_plan.added(), len(noqa_plan.edits.texts)
        print(f"Added {added} noqa directive{'s' if added != 1 else ''} in {files} file{'s' if files != 1 else ''}."
              if added else "No noqa directive added." if left else "No noqa directive to add.", file=sys.stderr)
    return left


@dataclass(frozen=True)
class DiffPreview:
    """What --diff shows: the diff of every fix, and the line that sums it up on stderr."""

    diff: str
    changes: bool  # a file would change
    summary: str  # "Would fix 2 findings (1 file) with the fixes above.", or why there is none
    refused: list[tuple[str, str]]


def preview(findings: list[Finding], unsafe: bool, root: Path | None) -> DiffPreview:
    """Plan the fixes without writing them."""
    from gpudoctor.lint.fixes import apply

    fix_plan = apply.plan(findings, unsafe, root)
    fixed, files = len(fix_plan.fixed), len(fix_plan.texts)
    if fixed:
        noun = "fix" if fixed == 1 else "fixes"
        summary = (f"Would fix {fixed} finding{'s' if fixed != 1 else ''} "
                   f"({files} file{'s' if files != 1 else ''}) with the {noun} above.")
    else:
        hidden = 0 if unsafe else sum(1 for f in findings
                                      if apply.eligible(f, unsafe=True) and not apply.eligible(f, unsafe=False))
        summary = "No fix to show" + (f": {hidden} unsafe fix{'es' if hidden != 1 else ''} hidden, "
                                      "add `--unsafe-fixes` to see them." if hidden else ".")
    return DiffPreview(apply.diff(fix_plan), bool(fix_plan.texts), summary, fix_plan.refused)


def say_refused(refused: list[tuple[str, str]], doing: str = "fixing") -> None:
    from gpudoctor.lint.reporters.printable import printable

    for path, reason in refused:
        print(f"gpudoctor: not {doing} {printable(path)}: {reason}", file=sys.stderr)


def say_no_fix(findings: list[Finding]) -> None:
    """One line per finding whose rule has a fix but offers none here, and why."""
    from gpudoctor.lint.reporters.printable import printable

    for finding in findings:
        if finding.fix is None and finding.no_fix:
            print(f"gpudoctor: no fix for {finding.code} at {printable(finding.site.path)}:{finding.site.position()}: "
                  f"{printable(finding.no_fix)}", file=sys.stderr)


def _cpus() -> int:
    import os

    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def cache_for(settings: Settings, folder: str | None) -> Cache | None:
    """The result cache for these settings (only what changes the analysis is in its key),
    or None when there is no folder gpudoctor may use for it (the cache has said why)."""
    from gpudoctor.lint.cache import Cache

    key = f"py3{settings.target_minor}-{settings.newest_minor}|{settings.platform}|{settings.project_root.resolve()}"
    cache = Cache(settings.cache_root or settings.project_root, key, Path(folder) if folder else None)
    return cache if cache.usable else None
