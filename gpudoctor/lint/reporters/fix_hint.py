"""The lines the human formats end with: how many findings ``--fix`` would fix, and the
unsafe fixes it leaves out unless asked (ruff's hint, with gpudoctor's preview advice)."""

from __future__ import annotations

from gpudoctor.lint.findings import Finding


def fix_hint(findings: list[Finding], fixing: bool, unsafe_fixes: bool) -> str:
    """Return the hint (empty when there is nothing to fix); ``fixing``: --fix was given,
    so only what it left is spoken of; ``unsafe_fixes``: --unsafe-fixes was given."""
    from gpudoctor.lint.fixes.apply import eligible

    findings = [f for f in findings if f.site.cell is None]  # a notebook's are not applied
    safe = sum(1 for f in findings if eligible(f, unsafe=False))
    hidden = sum(1 for f in findings if eligible(f, unsafe=True)) - safe
    lines = []
    if safe and not fixing:
        lines.append(f"{safe} fixable with `--fix`.")
    if hidden and not unsafe_fixes:
        lines.append(f"No safe fix; {hidden} unsafe fix{'es' if hidden != 1 else ''} hidden: "
                     "preview with `--diff --unsafe-fixes`, apply with `--fix --unsafe-fixes` "
                     "(may change behaviour)." if not safe else
                     f"{hidden} more fixable with `--fix --unsafe-fixes` (may change behaviour; "
                     "preview with `--diff --unsafe-fixes`).")
    elif hidden and not fixing:
        lines.append(f"{hidden} fixable with `--fix --unsafe-fixes`.")
    return "".join(line + "\n" for line in lines)
