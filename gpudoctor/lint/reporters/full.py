"""Each finding with its code frame, the lines that caused it, and the fix in one line."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from gpudoctor.lint.findings import Finding, Site
from gpudoctor.lint.reporters.concise import summary


@lru_cache(maxsize=64)
def _lines(path: str) -> tuple[str, ...]:
    try:
        return tuple(Path(path).read_text(encoding="utf-8", errors="replace").splitlines())
    except OSError:
        return ()


def _frame(site: Site, label: str) -> list[str]:
    lines = _lines(site.path)
    if not 0 < site.row <= len(lines):
        return [f"  --> {site.path}:{site.row}:{site.col + 1}"]
    text = lines[site.row - 1].rstrip()
    width = len(str(site.row))
    span = max(1, (site.end_col if site.end_row == site.row else len(text)) - site.col)
    return [
        f"{' ' * width}--> {site.path}:{site.row}:{site.col + 1}",
        f"{' ' * width} |",
        f"{site.row} | {text}",
        f"{' ' * width} | {' ' * site.col}{'^' * span} {label}".rstrip(),
    ]


def render(findings: list[Finding]) -> str:
    out: list[str] = []
    for finding in findings:
        out.append(f"{finding.code} [{finding.severity}] {finding.message}")
        out.extend(_frame(finding.site, finding.name))
        for related in finding.related:
            out.extend(_frame(related.site, related.message))
        if finding.fix_hint:
            out.append(f"  = help: {finding.fix_hint}")
        out.append("")
    out.append(summary(findings))
    return "\n".join(out) + "\n"
