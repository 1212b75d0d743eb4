"""Output formats for findings: ``render(findings, options)`` is the one way in.

Each format lives in its own module and knows nothing of the others; this module picks
the format and adds what the human formats end with (the summary line, the fix hint).
The options say everything the text depends on, so the same findings and options give
the same bytes, whoever calls it (the command line, ``gpudoctor.testing``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from gpudoctor.lint.findings import Finding

# The formats people read (a summary line, colour, the fix hint); the others are for tools.
HUMAN_FORMATS = ("concise", "full")


@dataclass(frozen=True)
class ReportOptions:
    """How findings are shown: the format and what the human formats add."""

    output_format: str = "concise"
    # The counts per rule code instead of the findings (ruff's --statistics).
    statistics: bool = False
    # Concise and full: end with "Found N findings." (or "All checks passed!").
    summary: bool = True
    # Concise and full: ANSI colours (the caller decides: a terminal, no NO_COLOR).
    color: bool = False
    # Full: the text of a path that is not read from disk (stdin), for its code frames.
    sources: Mapping[str, str] = field(default_factory=dict)
    # Concise and full: end with what --fix (or --fix --unsafe-fixes) would fix.
    fix_hint: bool = False
    fixing: bool = False  # --fix was given: the hint speaks of what is left
    unsafe_fixes: bool = False  # --unsafe-fixes was given


def render(findings: list[Finding], options: ReportOptions) -> str:
    """Return the whole report of ``findings`` in the format ``options`` names."""
    text = _body(findings, options)
    if options.fix_hint and options.output_format in HUMAN_FORMATS and not options.statistics:
        from gpudoctor.lint.reporters.fix_hint import fix_hint

        text += fix_hint(findings, fixing=options.fixing, unsafe_fixes=options.unsafe_fixes)
    return text


def _body(findings: list[Finding], options: ReportOptions) -> str:
    if options.statistics:
        return statistics_json(findings) if options.output_format == "json" else statistics(findings)
    if options.output_format == "full":
        from gpudoctor.lint.reporters import full

        return full.render(findings, color=options.color, with_summary=options.summary,
                           sources=dict(options.sources))
    if options.output_format == "concise":
        from gpudoctor.lint.reporters import concise

        return concise.render(findings, with_summary=options.summary, color=options.color)
    if options.output_format == "sarif":
        from gpudoctor.lint.reporters import sarif

        return sarif.render(findings)
    if options.output_format == "github":
        from gpudoctor.lint.reporters import github

        return github.render(findings)
    if options.output_format == "json":
        from gpudoctor.lint.reporters import json_format

        return json_format.render(findings)
    raise ValueError(f"unknown output format {options.output_format!r}")


def statistics(findings: list[Finding]) -> str:
    """Count findings per code, most frequent first (ruff's --statistics layout)."""
    counts: dict[tuple[str, str], int] = {}
    for finding in findings:
        key = (finding.code, finding.name)
        counts[key] = counts.get(key, 0) + 1
    rows = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return "".join(f"{count:5d}\t{code}\t{name}\n" for (code, name), count in rows)


def statistics_json(findings: list[Finding]) -> str:
    """The same counts as a JSON list (ruff's ``--statistics --output-format json``)."""
    import json

    counts: dict[tuple[str, str], list[int]] = {}
    for finding in findings:
        entry = counts.setdefault((finding.code, finding.name), [0, 0])
        entry[0] += 1
        entry[1] += finding.fix is not None
    rows = sorted(counts.items(), key=lambda item: (-item[1][0], item[0]))
    return json.dumps([{"code": code, "name": name, "count": count, "fixable": fixable == count}
                       for (code, name), (count, fixable) in rows], indent=2) + "\n"
