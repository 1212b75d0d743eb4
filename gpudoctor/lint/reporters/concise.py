"""``path:row:col: CODE message`` per finding, then a one-line summary (ruff's layout)."""

from __future__ import annotations

from gpudoctor.lint.findings import Finding


def render(findings: list[Finding]) -> str:
    lines = [
        f"{f.site.path}:{f.site.row}:{f.site.col + 1}: {f.code} {f.message}"
        + "".join(f"\n    {r.site.path}:{r.site.row}:{r.site.col + 1}: {r.message}" for r in f.related)
        for f in findings
    ]
    if findings:
        noun = "finding" if len(findings) == 1 else "findings"
        lines.append(f"Found {len(findings)} {noun}.")
    else:
        lines.append("All checks passed!")
    return "\n".join(lines) + "\n"
