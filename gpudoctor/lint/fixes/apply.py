"""Apply the fixes of a set of findings to their files: edits, overlap check, re-parse."""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path

from gpudoctor.lint.findings import Edit, Finding


@dataclass
class FixPlan:
    """What fixing would change: new text per file, and which findings it removes."""

    texts: dict[Path, tuple[str, str]] = field(default_factory=dict)  # path -> (old, new)
    fixed: list[Finding] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)  # files whose fixed text did not parse


def eligible(finding: Finding, unsafe: bool) -> bool:
    fix = finding.fix
    return fix is not None and (fix.applicability == "safe" or unsafe)


def _offsets(text: str) -> list[int]:
    starts = [0]
    for line in text.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    return starts


def _apply(text: str, edits: list[Edit]) -> str:
    starts = _offsets(text)

    def offset(row: int, col: int) -> int:
        return starts[min(row - 1, len(starts) - 1)] + col

    for edit in sorted(edits, key=lambda e: (e.start, e.end), reverse=True):
        text = text[: offset(*edit.start)] + edit.content + text[offset(*edit.end):]
    return text


def plan(findings: list[Finding], unsafe: bool) -> FixPlan:
    """Group the eligible fixes per file; a fix overlapping one already taken waits for a rerun."""
    import libcst as cst

    result = FixPlan()
    by_file: dict[Path, list[Finding]] = {}
    for finding in findings:
        if eligible(finding, unsafe):
            by_file.setdefault(Path(finding.site.path), []).append(finding)
    for path, items in by_file.items():
        taken: list[Edit] = []
        fixed: list[Finding] = []
        for finding in items:
            assert finding.fix is not None
            new = [e for e in finding.fix.edits if e not in taken]
            if any(_overlaps(e, t) for e in new for t in taken if e.start != e.end):
                continue
            taken.extend(new)
            fixed.append(finding)
        old = path.read_text(encoding="utf-8")
        text = _apply(old, taken)
        try:
            cst.parse_module(text)
        except cst.ParserSyntaxError:
            result.refused.append(str(path))
            continue
        if text != old:
            result.texts[path] = (old, text)
            result.fixed.extend(fixed)
    return result


def _overlaps(a: Edit, b: Edit) -> bool:
    return a.start < b.end and b.start < a.end


def diff(fix_plan: FixPlan) -> str:
    out = []
    for path, (old, new) in fix_plan.texts.items():
        out.extend(difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                        fromfile=f"a/{path.as_posix()}", tofile=f"b/{path.as_posix()}"))
    return "".join(out)


def write(fix_plan: FixPlan) -> None:
    """Write each fixed file whole (a symlinked file keeps its link, a script its mode)."""
    from gpudoctor.output_file import write_text_file

    for path, (_, new) in fix_plan.texts.items():
        write_text_file(path, new)
