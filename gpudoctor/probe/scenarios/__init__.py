"""The scenario library: one small script per failure mode, each with an unsafe and a safe variant.

Every other ``.py`` file in this directory is a self-contained program a person can
run (``python SCRIPT unsafe|safe``). It declares a literal ``SCENARIO`` dict — its
stable name, the lint rule it demonstrates, the frameworks it needs, whether it
needs a GPU, what each variant does and which outcomes each should have. The
catalogue reads that dict with ``ast`` and never imports a script: the scripts
import GPU frameworks at the top, and the probe's own process must not.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from gpudoctor.errors import GpudoctorError

VARIANTS = ("unsafe", "safe")
STATUSES = ("ok", "hung", "crashed", "oom", "skipped", "error")

# The lint rules the scenarios demonstrate, by code (names as `gpudoctor rule` shows them).
RULE_NAMES = {
    "GD101": "fork-after-gpu-init",
    "GD102": "fork-after-thread-start",
    "GD105": "process-in-daemonic-worker",
    "GD201": "gpu-object-sent-to-process",
    "GD301": "gpu-env-set-after-init",
    "GD302": "tf-device-config-after-init",
    "GD401": "unbounded-gpu-memory-per-worker",
}

_KEYS = {"name", "rule", "needs", "gpu", "unsafe", "safe", "expect"}
HERE = Path(__file__).parent


@dataclass(frozen=True)
class Scenario:
    """One scenario script and what it declares about itself."""

    name: str
    rule: str
    needs: tuple[str, ...]  # frameworks, by import name
    gpu: bool
    unsafe: str  # what the unsafe variant does
    safe: str  # what the safe variant does
    expect_unsafe: tuple[str, ...]  # the statuses that demonstrate the failure
    expect_safe: tuple[str, ...]
    summary: str  # the first line of the script's docstring
    path: Path

    @property
    def rule_name(self) -> str:
        """Return the rule's name ("fork-after-gpu-init")."""
        return RULE_NAMES.get(self.rule, "")

    def describe(self, variant: str) -> str:
        """Say what ``variant`` does."""
        return self.unsafe if variant == "unsafe" else self.safe

    def expected(self, variant: str) -> tuple[str, ...]:
        """Return the statuses ``variant`` should end with on a machine that can run it."""
        return self.expect_unsafe if variant == "unsafe" else self.expect_safe

    def code(self, variant: str) -> str:
        """Return the source of ``variant``'s function, read as text (never imported), with
        the script's functions it alone calls (``unsafe`` and ``safe`` often differ only
        in the worker they hand to the pool): what the report shows beside its verdict."""
        return variant_code(self.path.read_text(), variant)


def _calls(function: ast.FunctionDef) -> set[str]:
    return {node.id for node in ast.walk(function) if isinstance(node, ast.Name)}


def variant_code(source: str, variant: str) -> str:
    """Return the source of the top-level function ``variant`` of a scenario script and of
    the top-level functions only it names (not the other variant); "" when it has none."""
    functions = {node.name: node for node in ast.parse(source).body if isinstance(node, ast.FunctionDef)}
    found = functions.get(variant)
    if found is None:
        return ""
    other = next((functions[v] for v in VARIANTS if v != variant and v in functions), None)
    own = _calls(found) - (_calls(other) if other is not None else set())
    helpers = [functions[name] for name in functions if name in own and name not in VARIANTS]
    return "\n\n".join(ast.get_source_segment(source, node) or "" for node in [*helpers, found])


def _declaration(path: Path) -> Scenario:
    """Read the ``SCENARIO`` dict and the docstring of one script without running it."""
    tree = ast.parse(path.read_text(), str(path))
    found = [node.value for node in tree.body if isinstance(node, ast.Assign)
             and any(isinstance(t, ast.Name) and t.id == "SCENARIO" for t in node.targets)]
    if len(found) != 1:
        raise ValueError(f"{path.name}: needs exactly one literal SCENARIO = {{...}}")
    data = ast.literal_eval(found[0])
    if not isinstance(data, dict) or set(data) != _KEYS:
        raise ValueError(f"{path.name}: SCENARIO must have the keys {sorted(_KEYS)}")
    expect = data["expect"]
    for variant in VARIANTS:
        if not set(expect.get(variant, ())) <= set(STATUSES) or not expect.get(variant):
            raise ValueError(f"{path.name}: expect[{variant!r}] must list statuses of {STATUSES}")
    summary = (ast.get_docstring(tree) or "").strip().splitlines()
    return Scenario(
        name=data["name"],
        rule=data["rule"],
        needs=tuple(data["needs"]),
        gpu=bool(data["gpu"]),
        unsafe=data["unsafe"],
        safe=data["safe"],
        expect_unsafe=tuple(expect["unsafe"]),
        expect_safe=tuple(expect["safe"]),
        summary=summary[0] if summary else "",
        path=path,
    )


@functools.lru_cache(maxsize=1)
def catalogue() -> tuple[Scenario, ...]:
    """Return every scenario, ordered by rule and then name."""
    found = [_declaration(path) for path in sorted(HERE.glob("*.py")) if path.name != "__init__.py"]
    return tuple(sorted(found, key=lambda s: (s.rule, s.name)))


def names() -> list[str]:
    """Return the scenario names in catalogue order."""
    return [s.name for s in catalogue()]


def select(wanted: Iterable[str] | None) -> list[Scenario]:
    """Return the scenarios named in ``wanted`` (all when None), in catalogue order.

    An unknown name is the user's to fix: raise GpudoctorError listing the known ones.
    """
    if wanted is None:
        return list(catalogue())
    wanted = list(wanted)
    unknown = [name for name in wanted if name not in names()]
    if unknown:
        listed = ", ".join(repr(name) for name in unknown)
        raise GpudoctorError(f"unknown scenario {listed} (--scenario); known scenarios: "
                             + ", ".join(names()))
    return [s for s in catalogue() if s.name in wanted]
