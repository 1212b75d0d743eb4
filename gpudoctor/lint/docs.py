"""Render the rules' own documentation as one Markdown page (docs/rules.md)."""

from __future__ import annotations

from gpudoctor.lint.rules._registry import all_rules

HEADER = """# gpudoctor lint rules

Generated from the rules' docstrings by `python -m gpudoctor.lint.docs > docs/rules.md`;
a test fails when this file is stale.

| code | name | severity | summary |
|---|---|---|---|
"""


def render() -> str:
    rules = all_rules()
    rows = "".join(f"| [{r.code}](#{r.code.lower()}) | {r.name} | {r.severity} | {r.summary} |\n" for r in rules)
    sections = "".join(
        f"\n## {r.code}\n\n**{r.name}** ({r.severity}). {r.summary}.\n\n"
        + r.documentation().replace("\n## ", "\n### ") + "\n"
        for r in rules
    )
    return HEADER + rows + sections


if __name__ == "__main__":
    print(render(), end="")
