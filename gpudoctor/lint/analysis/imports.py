"""Import statements: bind names, run project modules' top levels, note GPU frameworks."""

from __future__ import annotations

import libcst as cst

from gpudoctor.lint.analysis.calls import CallEvaluator
from gpudoctor.lint.analysis.events import Imported, Init
from gpudoctor.lint.analysis.values import ModRef, one
from gpudoctor.lint.knowledge.registry import IMPORT_READERS, framework_of_module, initializing_import
from gpudoctor.lint.knowledge.table import InitLevel

IMPORT_READ_MODULES = frozenset(IMPORT_READERS.values())


class ImportWalker(CallEvaluator):
    """``import`` and ``from ... import`` in the order they run."""

    def do_import(self, node: cst.Import) -> None:
        for alias in node.names:
            dotted = cst.helpers.get_full_name_for_node(alias.name) or ""
            self.note_framework(dotted, node)
            self.initializing_import(dotted, node)
            bound = self.analyzer.import_module(self, dotted, 0, node)
            if alias.asname is not None:
                self.bind(alias.asname.name, bound)
            else:
                head = dotted.split(".")[0]
                self.assign(head, self.analyzer.import_module(self, head, 0, None))

    def do_import_from(self, node: cst.ImportFrom) -> None:
        level = len(node.relative)
        base = cst.helpers.get_full_name_for_node(node.module) if node.module else ""
        base = base or ""
        self.note_framework(base, None if level else node)
        module_value = self.analyzer.import_module(self, base, level, node)
        if isinstance(node.names, cst.ImportStar):
            self.analyzer.import_star(self, module_value)
            return
        for alias in node.names:
            name = cst.helpers.get_full_name_for_node(alias.name) or ""
            full = f"{base}.{name}" if base else name
            if not level:
                self.note_framework(full, None)
            self.initializing_import(full, node)
            value = self.analyzer.import_submodule(self, module_value, full, level, node)
            if not value and module_value:
                value = self.attribute(module_value, name, node)
            if not value and not level:
                value = one(ModRef(full))
            target = alias.asname.name if alias.asname is not None else alias.name
            self.bind(target, value)

    def note_framework(self, dotted: str, node: cst.CSTNode | None) -> None:
        """Note a GPU framework the module imports (``node``: the statement importing the
        module ``dotted`` itself, whose import may read configuration)."""
        framework = framework_of_module(dotted)
        if framework is not None:
            self.module.frameworks.add(framework)
        if node is not None and (framework is not None or dotted.split(".", 1)[0] in IMPORT_READ_MODULES):
            self.emit(Imported(dotted, self.site(node)))

    def initializing_import(self, dotted: str, node: cst.CSTNode) -> None:
        api = initializing_import(dotted)
        if api is not None:
            self.emit(Init(api.framework, InitLevel.RUNTIME, f"import {dotted}", self.site(node)))
