"""The evaluated arguments of one call, as the models of what a call does read them."""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from gpudoctor.lint.analysis.values import UNKNOWN, Value


@dataclass
class Args:
    """Evaluated call arguments, with the keyword nodes kept for literal checks."""

    positional: list[Value] = field(default_factory=list)
    keywords: dict[str, Value] = field(default_factory=dict)
    keyword_nodes: dict[str, cst.BaseExpression] = field(default_factory=dict)
    rest: Value = UNKNOWN  # what *args / **kwargs may hold

    def get(self, index: int, name: str) -> Value | None:
        if name in self.keywords:
            return self.keywords[name]
        if index >= 0 and index < len(self.positional):
            return self.positional[index]
        return None

    def is_true(self, name: str) -> bool:
        node = self.keyword_nodes.get(name)
        return isinstance(node, cst.Name) and node.value == "True"
