"""Apply the fixes of a set of findings to their files: edits, overlap check, re-parse."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from pathlib import Path

from gpudoctor.lint.analysis.reading import NEWLINE
from gpudoctor.lint.findings import Edit, Finding

NEWLINE_KEPT = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")


@dataclass
class FixPlan:
    """What fixing would change: new text per file, and which findings it removes."""

    texts: dict[Path, tuple[str, str]] = field(default_factory=dict)  # path -> (old, new)
    encodings: dict[Path, str] = field(default_factory=dict)  # path -> its source encoding
    fixed: list[Finding] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)  # files whose fixed text did not parse


def eligible(finding: Finding, unsafe: bool) -> bool:
    fix = finding.fix
    return fix is not None and (fix.applicability == "safe" or unsafe)


def _lines(text: str) -> list[str]:
    """The lines of ``text`` with their endings, broken where Python (and libcst, whose
    rows the edits use) breaks them: at ``\r\n``, ``\r`` and ``\n`` only."""
    return NEWLINE_KEPT.findall(text) if text else []


def _offsets(text: str) -> list[int]:
    starts = [0]
    for line in _lines(text):
        starts.append(starts[-1] + len(line))
    return starts


def _apply(text: str, edits: list[Edit]) -> str:
    """``text`` with ``edits`` made; a line an edit adds ends as the file's lines do."""
    starts = _offsets(text)
    ending = NEWLINE.search(text)
    newline = ending.group(0) if ending else "\n"

    def offset(row: int, col: int) -> int:
        return starts[min(row - 1, len(starts) - 1)] + col

    for edit in sorted(edits, key=lambda e: (e.start, e.end), reverse=True):
        content = edit.content.replace("\n", newline) if newline != "\n" else edit.content
        text = text[: offset(*edit.start)] + content + text[offset(*edit.end):]
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
        read = _read(path)
        if read is None:
            result.refused.append(str(path))
            continue
        old, encoding = read
        text = _apply(old, taken)
        try:
            cst.parse_module(text)
        except cst.ParserSyntaxError:
            result.refused.append(str(path))
            continue
        if text != old:
            result.texts[path] = (old, text)
            result.encodings[path] = encoding
            result.fixed.extend(fixed)
    return result


def _read(path: Path) -> tuple[str, str] | None:
    """The file's text as the analysis read it (its declared encoding, its own line
    endings, a byte order mark set aside), and that encoding; None if it cannot be read."""
    import io
    import tokenize

    try:
        raw = path.read_bytes()
        encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
        return raw.decode(encoding), encoding
    except (OSError, SyntaxError, UnicodeDecodeError, LookupError):
        return None


def _overlaps(a: Edit, b: Edit) -> bool:
    return a.start < b.end and b.start < a.end


def diff(fix_plan: FixPlan) -> str:
    out = []
    for path, (old, new) in fix_plan.texts.items():
        out.extend(difflib.unified_diff(_lines(old), _lines(new),
                                        fromfile=f"a/{path.as_posix()}", tofile=f"b/{path.as_posix()}"))
    return "".join(out)


def write(fix_plan: FixPlan) -> None:
    """Write each fixed file whole, in its own encoding and line endings (a symlinked file
    keeps its link, a script its mode)."""
    from gpudoctor.output_file import write_text_file

    for path, (_, new) in fix_plan.texts.items():
        write_text_file(path, new, fix_plan.encodings.get(path, "utf-8"))
