"""Findings in code a linted file reaches, shown in that file when their own is not linted.

A linted file's analysis follows its calls and imports into other modules, and a rule may
report there: the pool a helper module builds forks after this file initialized CUDA.
When the helper is linted too, the finding is shown in the helper. When only this file is
(pre-commit names the changed files), it would be lost, though the change that caused it
is most likely here: it is shown at the call or import in this file that reaches it.
"""

from __future__ import annotations

from collections import deque
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from gpudoctor.lint.findings import Finding, Related, Site
from gpudoctor.lint.paths import real_path

if TYPE_CHECKING:
    from gpudoctor.lint.analysis.flows import Flow
    from gpudoctor.lint.frontend.parsed import LazySite


def attach(findings: list[Finding], flows: list[Flow], linted: str, codes: frozenset[str]) -> list[Finding]:
    """Give each finding of the rules ``codes`` outside the linted file (path ``linted``)
    the call or import in that file that reaches it, when the flows show one."""
    outside = {f.site.path for f in findings if f.site.path != linted and f.code in codes}
    if not outside:
        return findings
    entries = _entries(flows, linted, outside)
    out = []
    for finding in findings:
        if finding.site.path != linted and finding.code in codes:
            found = entries.get((finding.site.path, finding.site.row, finding.site.col))
            if found is not None:
                finding = replace(finding, reached=found)
        out.append(finding)
    return out


def _entries(flows: list[Flow], linted: str, paths: set[str]) -> dict[tuple[str, int, int], Related]:
    """(path, row, column) of each event site in ``paths`` -> the call or import in the
    linted file its flow went through to get there (for a child process's events, the one
    that led to starting it). The first one met, parent flows first."""
    from gpudoctor.lint.analysis.events import site_of
    from gpudoctor.lint.frontend.parsed import concrete
    from gpudoctor.lint.rules._base import what_runs

    out: dict[tuple[str, int, int], Related] = {}
    # Flows share their sites (a child replays its parent's events, a call's summary is met
    # at every call): each is positioned once, and each place's entry is the first met.
    keys: dict[int, tuple[str, int, int]] = {}
    queue: deque[tuple[Flow, LazySite | None]] = deque((flow, None) for flow in flows)
    while queue:
        flow, fallback = queue.popleft()
        for event in flow.events:
            site = site_of(event.effect)
            entry = event.ctx.entry or fallback
            if site is None or entry is None or site.path not in paths or entry.path != linted:
                continue
            key = keys.get(id(site))
            if key is None:
                where = concrete(site)
                key = keys[id(site)] = (where.path, where.row, where.col)
            if key not in out:
                out[key] = Related(concrete(entry), what_runs(entry))
        for child in flow.children:
            start = child.start
            inherited = fallback
            if start is not None:
                start_site = site_of(start.effect)
                inherited = start_site if start_site is not None and start_site.path == linted else (
                    start.ctx.entry or fallback)
            queue.append((child, inherited))
    return out


def _moved(finding: Finding, home: Site) -> str:
    """The message, with the places it names ("line 12", "../train.py:11", written from
    where the finding was) written from its new home instead."""
    import re

    from gpudoctor.lint.rules._base import line_of

    places: dict[str, str] = {}
    for site in (finding.site, home, *(r.site for r in finding.related)):
        places.setdefault(line_of(site, finding.site), line_of(site, home))
    changed = {old: new for old, new in places.items() if old != new}
    if not changed:
        return finding.message
    longest_first = sorted(changed, key=len, reverse=True)
    pattern = re.compile("|".join(rf"(?<![\w./]){re.escape(old)}(?!\d)" for old in longest_first))
    return pattern.sub(lambda match: changed[match.group(0)], finding.message)


def rehome(finding: Finding, shown: dict[Path, str]) -> Finding | None:
    """The finding at the call or import that reaches it, if that is in a file being
    reported on (``shown``: the real paths of those); None if it is not."""
    from gpudoctor.lint.rules._base import line_of

    reached = finding.reached
    if reached is None or real_path(reached.site.path) not in shown:
        return None
    return Finding(
        finding.code, finding.name,
        f"this {reached.message} reaches {line_of(finding.site, reached.site)}: {_moved(finding, reached.site)}",
        finding.severity, reached.site,
        (Related(finding.site, f"where it happens, reached through the {reached.message} at "
                               f"{line_of(reached.site, finding.site)}"),
         *finding.related),
        finding.fix_hint,
        None,  # a fix would edit a file that is not being linted
    )
