"""One line per finding, ``path:row:col: CODE message``, then a summary (ruff's layout).

Editors and CI problem matchers parse these lines, so nothing else is interleaved.
"""

from __future__ import annotations

from gpudoctor.lint.findings import Finding


def summary(findings: list[Finding]) -> str:
    if not findings:
        return "All checks passed!"
    noun = "finding" if len(findings) == 1 else "findings"
    return f"Found {len(findings)} {noun}."


def render(findings: list[Finding], with_summary: bool = True) -> str:
    lines = [f"{f.site.path}:{f.site.row}:{f.site.col + 1}: {f.code} {f.message}" for f in findings]
    if with_summary:
        lines.append(summary(findings))
    return "".join(f"{line}\n" for line in lines)
