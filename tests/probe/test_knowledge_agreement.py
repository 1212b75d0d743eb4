"""The probe's bootstrap runs inside the user's processes with the standard library only,
so it keeps its own list of GPU modules; it must agree with the knowledge records."""

from __future__ import annotations

import ast
from pathlib import Path

from gpudoctor.knowledge.registry import RECORDS

BOOTSTRAP = Path(__file__).resolve().parents[2] / "gpudoctor" / "probe" / "bootstrap" / "sitecustomize.py"


def _tuple_named(path: Path, name: str) -> set[str]:
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return set(ast.literal_eval(node.value))
    raise AssertionError(f"{name} not found in {path}")


def test_the_bootstrap_watches_every_framework_the_records_know() -> None:
    roots = {module.split(".", 1)[0] for record in RECORDS for module in record.modules}
    roots |= {alias.split(".", 1)[0] for record in RECORDS for alias, _ in record.aliases}
    assert roots <= _tuple_named(BOOTSTRAP, "_GPU_MODULES")
