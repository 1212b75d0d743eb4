"""A long module parsed in pieces is the module parsed whole: the same code, byte for byte,
the same positions, the same findings (see gpudoctor/lint/frontend/chunked.py)."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from gpudoctor.lint.frontend import chunked
from gpudoctor.lint.frontend.prescan import prescan
from tests.lint.expectations import FIXTURES, all_cases, run_case

SOURCES = sorted(p for p in FIXTURES.rglob("*.py"))


def _positions(module: cst.Module) -> list[tuple[str, int, int, int, int]]:
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    found = wrapper.resolve(PositionProvider)
    return [(type(node).__name__, r.start.line, r.start.column, r.end.line, r.end.column)
            for node, r in found.items() if isinstance(node, (cst.BaseStatement, cst.Call, cst.Name))]


@pytest.mark.parametrize("path", SOURCES, ids=[str(p.relative_to(FIXTURES)) for p in SOURCES])
def test_every_statement_a_piece_joins_to_the_module(path: Path) -> None:
    text = path.read_text()
    scan = prescan(text)
    if scan is None or len(scan.cut_rows) < 2:
        pytest.skip("one statement, or not Python")
    joined = chunked.in_pieces(text, scan.cut_rows, 1)
    assert joined is not None, "the pieces did not join to the module"
    whole = cst.parse_module(text)
    assert joined.code == text
    assert sorted(_positions(joined)) == sorted(_positions(whole))


def test_blank_and_comment_lines_at_cuts_decorators_and_a_missing_last_newline() -> None:
    text = ("# head\n\nimport os\n\n\n# before f\n@decorate(1)\n@other\ndef f():\n    return 1\n"
            "\n# between\n\nx = 1; y = 2\nclass C:\n    pass\n# trailing\n\nz = [\n    1,\n]")
    scan = prescan(text)
    assert scan is not None
    joined = chunked.in_pieces(text, scan.cut_rows, 1)
    assert joined is not None and joined.code == text
    assert sorted(_positions(joined)) == sorted(_positions(cst.parse_module(text)))


CASES = all_cases()


@pytest.mark.parametrize("case", CASES, ids=[str(c.path.relative_to(FIXTURES)) for c in CASES])
def test_fixture_findings_are_the_same_parsed_in_pieces(case: object, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(chunked, "PIECE_CHARS", 1)
    monkeypatch.setattr(chunked, "CUT_FROM_CHARS", 0)
    expected, actual, findings = run_case(case)  # type: ignore[arg-type]
    assert not (expected - actual) and not (actual - expected), \
        "\n".join(f"{f.site.path}:{f.site.row}: {f.code} {f.message}" for f in findings)
