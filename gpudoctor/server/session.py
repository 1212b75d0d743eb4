"""Linting that outlives one run: what ``gpudoctor server`` lints the open documents with.

Nothing here speaks the Language Server Protocol (server.py does). A ``Session`` lints the
documents an editor has open, with the text the editor holds (saved or not) and the
settings the command line would use for each file: the nearest ``pyproject.toml``, read
again on every run, so that an edit of it counts at once.

What makes a run after an edit cheap is kept between runs: the interpreter with
gpudoctor's modules and libcst loaded, and one result cache per project and settings
(the same ``.gpudoctor_cache`` the command line uses; its entries are keyed by the
digests of the bytes analysed, so an unsaved text neither reads nor spoils an entry of
the saved file). A full run re-analyses the edited files and every file whose analysis
read one of them (the other files of the project that use them: their context); the
others come from the cache.

A *quick* run follows an edit first: it analyses the edited documents again with the
plan of the last full run of the same documents (which files are context, which names
the project uses from each), and takes the context files' findings from that run instead
of analysing them again, moved to the edited text (a finding on a line the edit changed
is left to the full run). The full run follows and corrects what the edit changed in the
context's analyses.
"""

from __future__ import annotations

import argparse
import difflib
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from gpudoctor.lint.cache import Cache
    from gpudoctor.lint.engine import Plan
    from gpudoctor.lint.findings import Finding, Site
    from gpudoctor.lint.settings import Settings

__all__ = ["Linted", "Session"]

# Result caches kept open at once (a project and its settings each); the one used least
# recently is dropped first (it is on disk, and read again if needed).
MAX_CACHES = 8


@dataclass
class Linted:
    """What one run found: the findings of each document linted (an empty list clears what
    an editor shows for it), and what the run had to say (one line each)."""

    findings: dict[Path, list[Finding]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    analysed: int = 0  # documents analysed in this run (the others came from the cache)
    quick: bool = False  # a quick run (see the module's text): a full one follows


class Session:
    """Lint documents, again and again, in one process."""

    def __init__(self, cache: bool = True) -> None:
        self._use_cache = cache
        self._caches: OrderedDict[str, Cache | None] = OrderedDict()
        # The last full run of each set of documents linted together: its plan, and the
        # texts (by real path) of the documents given (what its findings' rows are of).
        self._full: OrderedDict[tuple[object, ...], tuple[Plan, dict[str, bytes]]] = OrderedDict()

    def settings(self, path: Path) -> Settings:
        """The settings ``gpudoctor lint PATH`` would use for ``path``."""
        from gpudoctor.lint.inputs import build_settings

        plain = argparse.Namespace(target_version=None, platform=None, select=None, extend_select=None,
                                   ignore=None, extend_exclude=None)
        return build_settings(plain, [str(path)])

    def lint(self, paths: Sequence[Path], texts: Mapping[Path, bytes], *, quick: bool = False,
             cancelled: Callable[[], bool] | None = None) -> Linted:
        """Lint ``paths`` (absolute paths of the open documents), each with its text in
        ``texts`` where the editor holds one (else as it is on disk).

        Documents of one project are linted together, with one project's settings; a file
        the project's configuration excludes, as ``gpudoctor lint --force-exclude`` would
        leave it out, gets no findings. ``quick``: a quick run (see the module's text) of
        the documents that had a full run, None for the others. ``cancelled``: asked
        between analyses; the run then stops with ``engine.Cancelled``."""
        from gpudoctor.lint.discovery import in_default_excludes
        from gpudoctor.lint.engine import lint_paths
        from gpudoctor.lint.notebook import read as read_notebook
        from gpudoctor.lint.paths import real_path

        out = Linted(quick=quick)
        groups: dict[tuple[object, ...], tuple[Settings, list[Path]]] = {}
        for path in paths:
            settings = self.settings(path)
            if settings.excluded(path) or in_default_excludes(path, settings.project_root):
                out.findings[path] = []
                continue
            key = (settings.project_root, settings.config_file, settings.cache_root)
            groups.setdefault(key, (settings, []))[1].append(path)
        for project, (settings, group) in groups.items():
            given = {path: texts[path] for path in group if path in texts}
            run_key = (*project, settings.target_minor, settings.platform, tuple(group))
            reuse = None
            if quick:
                before = self._full.get(run_key)
                now = {str(real_path(path)): text for path, text in given.items()}
                if before is None or before[1] == now:
                    continue  # no plan to reuse, or nothing edited since: the full run only
                reuse = _moved(before[0], before[1], now)
            result = lint_paths(group, settings, cache=self._cache(settings), contents=given, reuse=reuse,
                                cancelled=cancelled)
            if not result.reused and result.plan is not None:
                self._full[run_key] = (result.plan, {str(real_path(path)): text for path, text in given.items()})
                self._full.move_to_end(run_key)
                while len(self._full) > MAX_CACHES:
                    self._full.popitem(last=False)
            for path in group:
                out.findings[path] = []
            for finding in result.findings:
                out.findings.setdefault(Path(finding.site.path), []).append(finding)
            out.warnings.extend(result.warnings)
            out.errors.extend(result.internal_errors)
            out.analysed += result.analysed
        # Notebooks are read once per text and remembered for the process: in a server
        # every edit is a new text.
        read_notebook.cache_clear()
        return out

    def _cache(self, settings: Settings) -> Cache | None:
        """The result cache of these settings, kept open between runs."""
        if not self._use_cache:
            return None
        from gpudoctor.lint.execution import cache_for

        key = f"{settings.target_minor}|{settings.platform}|{settings.project_root}|{settings.cache_root}"
        if key not in self._caches:
            self._caches[key] = cache_for(settings, None)
            while len(self._caches) > MAX_CACHES:
                self._caches.popitem(last=False)
        self._caches.move_to_end(key)
        return self._caches[key]


def _moved(plan: Plan, before: dict[str, bytes], now: dict[str, bytes]) -> Plan:
    """``plan`` with its context findings moved to the texts ``now`` (by real path): a
    site on a line that is still there, unchanged, moves with it; a finding with a site on
    a line the edit changed or removed is dropped (the full run says what it is now)."""
    from dataclasses import replace

    rows: dict[str, _Rows | None] = {}

    def table(path: str) -> _Rows | None:
        if path not in rows:
            old, new = before.get(path), now.get(path)
            rows[path] = None if old is None or new is None or old == new else _Rows(old, new)
        return rows[path]

    def site(place: Site) -> Site | None:
        lines = table(place.path)
        if lines is None:
            return place
        row, end = lines.get(place.row), lines.get(place.end_row)
        return None if row is None or end is None else replace(place, row=row, end_row=end)

    def finding(found: Finding) -> Finding | None:
        where = site(found.site)
        related = [replace(r, site=moved) for r in found.related if (moved := site(r.site)) is not None]
        reached = found.reached
        if reached is not None:
            moved = site(reached.site)
            if moved is None:
                return None
            reached = replace(reached, site=moved)
        if where is None or len(related) != len(found.related):
            return None
        fix = found.fix if table(found.site.path) is None else None  # (a fix of the old text: the full run's)
        return replace(found, site=where, related=tuple(related), reached=reached, fix=fix)

    def moved(items: list[Finding]) -> list[Finding]:
        return [f for f in (finding(item) for item in items) if f is not None]

    outcomes = {path: replace(outcome, findings=moved(outcome.findings), extra=moved(outcome.extra))
                for path, outcome in plan.outcomes.items() if path in plan.context}
    return replace(plan, found={path: [*o.findings, *o.extra] for path, o in outcomes.items()}, outcomes=outcomes)


class _Rows:
    """Where each line of an old text is in the new one, if it is there unchanged. An edit
    is mostly a few lines in one place: the lines before and after it are matched first,
    and only the lines between them are compared."""

    def __init__(self, old: bytes, new: bytes) -> None:
        a, b = old.splitlines(), new.splitlines()
        head = 0
        while head < min(len(a), len(b)) and a[head] == b[head]:
            head += 1
        tail = 0
        while tail < min(len(a), len(b)) - head and a[-1 - tail] == b[-1 - tail]:
            tail += 1
        self._head, self._old_end, self._shift = head, len(a) - tail, len(b) - len(a)
        middle = difflib.SequenceMatcher(None, a[head:len(a) - tail], b[head:len(b) - tail], autojunk=False)
        self._middle = {head + x + i + 1: head + y + i + 1
                        for x, y, size in middle.get_matching_blocks() for i in range(size)}

    def get(self, row: int) -> int | None:
        """The row (from 1) in the new text of old row ``row``, or None if it changed."""
        if row <= self._head:
            return row
        if row > self._old_end:
            return row + self._shift
        return self._middle.get(row)
