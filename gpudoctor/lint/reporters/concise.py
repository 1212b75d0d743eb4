"""One line per finding, ``path:row:col: CODE message``, then a summary (ruff's layout).
In a Jupyter notebook, ``path:cell N:row:col: CODE message`` (ruff's form: N counts every
cell, markdown too; row is the line in that cell).

Editors and CI problem matchers parse these lines, so nothing else is interleaved, and a
file name that holds a newline (or bytes that are not UTF-8) is escaped, never printed raw.
"""

from __future__ import annotations

from gpudoctor.lint.findings import Finding
from gpudoctor.lint.reporters.printable import printable


def summary(findings: list[Finding]) -> str:
    if not findings:
        return "All checks passed!"
    noun = "finding" if len(findings) == 1 else "findings"
    return f"Found {len(findings)} {noun}."


def render(findings: list[Finding], with_summary: bool = True, color: bool = False) -> str:
    """``color``: the path in bold and the code in red, as ruff prints them (the caller
    decides: a terminal, no NO_COLOR); the characters are the same."""
    if color:
        lines = [f"\x1b[1m{printable(f.site.path)}\x1b[0m:{f.site.position()}: "
                 f"\x1b[1;31m{f.code}\x1b[0m {printable(f.message)}" for f in findings]
    else:
        lines = [f"{printable(f.site.path)}:{f.site.position()}: {f.code} {printable(f.message)}"
                 for f in findings]
    if with_summary:
        lines.append(summary(findings))
    return "".join(f"{line}\n" for line in lines)
