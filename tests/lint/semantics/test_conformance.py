"""Each cell of the conformance matrix (cells.py): the positive project gets the family's
finding where its lines say, the negative project gets none."""

from __future__ import annotations

import pytest

from tests.lint.semantics.cells import Cell, cells, expected_lines, render

CELLS = cells()


def _params() -> list[object]:
    out = []
    for cell in CELLS:
        for positive in (True, False):
            marks = []
            if cell.unsupported and positive:
                marks.append(pytest.mark.xfail(reason=cell.unsupported, strict=True))
            out.append(pytest.param(cell, positive, id=f"{cell.id}-{'pos' if positive else 'neg'}", marks=marks))
    return out


@pytest.mark.parametrize(("cell", "positive"), _params())
def test_cell(lint_source, cell: Cell, positive: bool) -> None:  # type: ignore[no-untyped-def]
    files = render(cell.construct, cell.family, positive)
    findings = lint_source(files)
    code = cell.family.code
    found = {(f.site.path.rsplit("/", 1)[-1], f.site.row): f for f in findings if f.code == code}
    if not positive:
        assert not found, [f.render() if hasattr(f, "render") else f.message for f in found.values()]
        return
    expected = {(name.rsplit("/", 1)[-1], row) for name, row in expected_lines(files, cell.tag)}
    assert expected, "the positive project marks no line for this family"
    assert found, f"no {code} reported; expected at {sorted(expected)}"
    assert set(found) <= expected, f"{code} at {sorted(found)}; expected at {sorted(expected)}"
    if cell.construct.condition:
        assert any(cell.construct.condition in f.message for f in found.values()), \
            [f.message for f in found.values()]
