"""docs/lint.md holds the conformance table the matrix makes."""

from __future__ import annotations

from tests.lint.semantics.table import DOC, END, START, replaced


def test_docs_lint_md_holds_the_current_table() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert START in text and END in text
    assert replaced(text) == text, "run: python -m tests.lint.semantics.table --write"
