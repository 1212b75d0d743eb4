"""One line per finding, ``path:row:col: CODE message``, then a summary (ruff's layout).
In a Jupyter notebook, ``path:cell N:row:col: CODE message`` (ruff's form: N counts every
cell, markdown too; row is the line in that cell).

A warning reads ``path:row:col: CODE [warning] message``: the code stays where matchers
that read ruff's lines find it, and the word tells a reader at a glance that the finding is
advice (it still makes the exit code 1, as an error does). The summary counts the
warnings when there are any.

Editors and CI problem matchers parse these lines, so nothing else is interleaved, and a
file name that holds a newline (or bytes that are not UTF-8) is escaped, never printed raw.
"""

from __future__ import annotations

from gpudoctor.lint.findings import WARNING, Finding
from gpudoctor.lint.reporters.printable import printable


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def summary(findings: list[Finding]) -> str:
    if not findings:
        return "All checks passed!"
    warnings = sum(1 for f in findings if f.severity == WARNING)
    total = _count(len(findings), "finding")
    if not warnings:
        return f"Found {total}."
    if warnings == len(findings):
        kinds = "all warnings" if warnings > 1 else "a warning"
        return f"Found {total} ({kinds})."
    return f"Found {total} ({_count(len(findings) - warnings, 'error')}, {_count(warnings, 'warning')})."


def _line(finding: Finding, color: bool) -> str:
    path = printable(finding.site.path)
    warning = finding.severity == WARNING
    code = finding.code + (" [warning]" if warning else "")
    if color:
        path = f"\x1b[1m{path}\x1b[0m"
        code = f"\x1b[1;{33 if warning else 31}m{code}\x1b[0m"
    return f"{path}:{finding.site.position()}: {code} {printable(finding.message)}"


def render(findings: list[Finding], with_summary: bool = True, color: bool = False) -> str:
    """``color``: the path in bold, the code in red (yellow for a warning), as ruff prints
    them (the caller decides: a terminal, no NO_COLOR); the characters are the same."""
    lines = [_line(f, color) for f in findings]
    if with_summary:
        lines.append(summary(findings))
    return "".join(f"{line}\n" for line in lines)
