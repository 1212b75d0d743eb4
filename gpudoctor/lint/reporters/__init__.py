"""Output formats for findings; each returns text and knows nothing of the others."""

from __future__ import annotations

from collections.abc import Callable

from gpudoctor.lint.findings import Finding


def get_reporter(name: str) -> Callable[[list[Finding]], str]:
    if name == "sarif":
        from gpudoctor.lint.reporters.sarif import render
    elif name == "github":
        from gpudoctor.lint.reporters.github import render
    elif name == "json":
        from gpudoctor.lint.reporters.json_format import render
    elif name == "full":
        from gpudoctor.lint.reporters.full import render
    else:
        from gpudoctor.lint.reporters.concise import render
    return render


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
