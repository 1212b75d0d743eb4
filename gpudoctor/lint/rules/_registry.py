"""Discover the rules: every ``Rule`` subclass in a module of this package."""

from __future__ import annotations

import importlib
import pkgutil
from functools import lru_cache

from gpudoctor.lint import rules as package
from gpudoctor.lint.rules._base import Rule


@lru_cache(maxsize=1)
def all_rules() -> tuple[type[Rule], ...]:
    """Return every rule class, ordered by code."""
    found: dict[str, type[Rule]] = {}
    for info in pkgutil.iter_modules(package.__path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, Rule) and value is not Rule \
                    and getattr(value, "code", None):
                found[value.code] = value
    return tuple(found[code] for code in sorted(found))


def rule_by_code(code: str) -> type[Rule] | None:
    for rule in all_rules():
        if rule.code == code.upper():
            return rule
    return None
