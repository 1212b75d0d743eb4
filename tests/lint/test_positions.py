"""A node's source range, measured alone, is the one libcst's PositionProvider gives."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from gpudoctor.lint.frontend.positions import every_position, locate

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"

# Code whose rows and columns are easy to get wrong: CRLF and lone CR newlines, tabs, a
# backslash continuation, non-ASCII text before a node, a node that starts a file and
# one that ends it, nested functions and a decorated class.
AWKWARD = (
    'x = "é€"; y = (1,\r\n     2)\r\n'
    "def f(a,\r    b):\r\treturn a + \\\n\t    b\n"
    "@dec(1)\nclass C:\n    def m(self):\n        def inner():\n            return [i for i in g()]\n"
    "        return inner\n"
    "z = f(1, 2)"
)


def _expected(module: cst.Module) -> dict[cst.CSTNode, object]:
    return dict(MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider))


def _all_nodes(module: cst.Module) -> list[cst.CSTNode]:
    found: list[cst.CSTNode] = []

    class Collect(cst.CSTVisitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            found.append(node)
            return True

    module.visit(Collect())
    return found


def test_every_position_is_the_providers() -> None:
    """The direct use of PositionProvider gives what MetadataWrapper gives (a libcst
    upgrade that changes its internals must not shift a single position)."""
    text = (FIXTURES / "projects" / "tf_model_at_import" / "main.py").read_text()
    module = cst.parse_module(text)
    expected = _expected(module)
    assert dict(every_position(module)) == expected and len(expected) > 100


@pytest.mark.parametrize("source", [AWKWARD, "seed"], ids=["awkward", "seed"])
def test_each_node_measured_alone_has_the_providers_range(source: str) -> None:
    if source == "seed":
        source = max((FIXTURES / "seeds").glob("*.py"), key=lambda p: p.stat().st_size).read_text()
    module = cst.parse_module(source)
    expected = _expected(module)
    nodes = [node for node in _all_nodes(module) if node in expected]
    assert len(nodes) > 40
    for node in nodes:
        found = locate(module, node)
        assert found[node] == expected[node], type(node).__name__
        # What is inside it is measured too, with the same ranges.
        assert all(found[inner] == expected[inner] for inner in found)


def test_a_node_of_another_tree_has_no_range() -> None:
    module = cst.parse_module("a = 1\nb = 2\n")
    other = cst.parse_module("a = 1\n").body[0]
    assert locate(module, other) == {}
    assert locate(module, module.body[1])[module.body[1]].start.line == 2


@pytest.mark.parametrize("source", [AWKWARD, "seed"], ids=["awkward", "seed"])
def test_each_node_measured_in_its_statement_has_the_providers_rows_from_there(source: str) -> None:
    """Measured from its top-level statement's code alone, a node's range is the
    provider's, shifted by the rows before the statement's own start (its comment lines
    and decorators are in the statement's code, and counted)."""
    from gpudoctor.lint.frontend.positions import locate_in_statement

    if source == "seed":
        source = max((FIXTURES / "seeds").glob("*.py"), key=lambda p: p.stat().st_size).read_text()
    source = "# a comment line\n\n" + source.replace("@dec(1)", "# above the decorator\n@dec(1)")
    module = cst.parse_module(source)
    expected = _expected(module)
    checked = 0
    for statement in module.body:
        for node in [n for n in _all_nodes(statement) if n in expected]:
            found = locate_in_statement(module, statement, node)
            end, start = expected[node].end, expected[statement].start
            if (end.line, end.column) <= (start.line, start.column):  # its comment lines: not measured so
                assert found is None
                continue
            assert found is not None, type(node).__name__
            head, spans = found
            shift = expected[statement].start.line - head
            for inner, span in spans.items():
                want = expected[inner]
                assert (span.start.line + shift, span.start.column, span.end.line + shift, span.end.column) == \
                    (want.start.line, want.start.column, want.end.line, want.end.column), type(inner).__name__
            checked += 1
    assert checked > 40
    assert locate_in_statement(module, module.body[0], module.body[-1]) is None  # not in that statement
