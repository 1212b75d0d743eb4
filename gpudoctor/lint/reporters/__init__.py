"""Output formats for findings; each returns text and knows nothing of the others."""

from __future__ import annotations

from collections.abc import Callable

from gpudoctor.lint.findings import Finding


def get_reporter(name: str) -> Callable[[list[Finding]], str]:
    if name == "json":
        from gpudoctor.lint.reporters.json_format import render
    elif name == "full":
        from gpudoctor.lint.reporters.full import render
    else:
        from gpudoctor.lint.reporters.concise import render
    return render
