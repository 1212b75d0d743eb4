"""Each rule's VALID and INVALID examples (its docs) are tests."""

from __future__ import annotations

import re

import pytest

from gpudoctor.lint.rules._base import Rule
from gpudoctor.lint.rules._registry import all_rules

HEADINGS = ("## What it does", "## Why is this bad?", "## Example", "## References")
EXAMPLES = [(rule, i, text) for rule in all_rules() for i, text in enumerate(rule.INVALID)]
VALIDS = [(rule, i, text) for rule in all_rules() for i, text in enumerate(rule.VALID)]


def _expected(rule: type[Rule], text: str) -> set[int]:
    lines = text.splitlines()
    return {i + 2 for i, line in enumerate(lines) if re.search(rf"#\s*ruleid:.*{rule.code}", line)}


@pytest.mark.parametrize(("rule", "index", "text"), EXAMPLES,
                         ids=[f"{r.code}-invalid-{i}" for r, i, _ in EXAMPLES])
def test_invalid_example_is_reported(rule, index, text, lint_source) -> None:  # type: ignore[no-untyped-def]
    expected = _expected(rule, text)
    assert expected, "an INVALID example must say where the finding goes"
    rows = {f.site.row for f in lint_source(text) if f.code == rule.code}
    assert rows == expected


@pytest.mark.parametrize(("rule", "index", "text"), VALIDS,
                         ids=[f"{r.code}-valid-{i}" for r, i, _ in VALIDS])
def test_valid_example_is_silent(rule, index, text, lint_source) -> None:  # type: ignore[no-untyped-def]
    assert [f for f in lint_source(text) if f.code == rule.code] == []


@pytest.mark.parametrize("rule", all_rules(), ids=[r.code for r in all_rules()])
def test_rule_documents_itself(rule: type[Rule]) -> None:
    doc = rule.documentation()
    for heading in HEADINGS:
        assert heading in doc, f"{rule.code} lacks {heading}"
    assert rule.INVALID and rule.VALID
    assert re.fullmatch(r"[a-z]+(-[a-z0-9]+)+", rule.name)


def test_docs_rules_md_is_current() -> None:
    from pathlib import Path

    from gpudoctor.lint.docs import render

    page = Path(__file__).resolve().parents[2] / "docs" / "rules.md"
    assert page.read_text(encoding="utf-8") == render(), "run: python -m gpudoctor.lint.docs > docs/rules.md"
