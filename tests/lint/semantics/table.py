"""The conformance table of docs/lint.md, made from the matrix (cells.py).

``python -m tests.lint.semantics.table`` prints it; ``--write`` puts it in docs/lint.md,
between its markers. test_table.py fails when the page holds another table.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tests.lint.semantics.cells import CONSTRUCTS, FAMILIES, cells

DOC = Path(__file__).resolve().parents[3] / "docs" / "lint.md"
START = "<!-- conformance table: made by python -m tests.lint.semantics.table --write -->"
END = "<!-- end of the conformance table -->"


def render() -> str:
    by_cell = {(c.construct.key, c.family.key): c for c in cells()}
    header = "| construct | " + " | ".join(f"{f.title} ({f.code})" for f in FAMILIES) + " |"
    lines = [header, "|---|" + "---|" * len(FAMILIES)]
    notes: list[str] = []
    group = None
    for construct in CONSTRUCTS:
        if construct.group != group:
            group = construct.group
            lines.append(f"| **{group}** |" + " |" * len(FAMILIES))
        row = [construct.title]
        for family in FAMILIES:
            cell = by_cell.get((construct.key, family.key))
            if cell is None:
                row.append("—")
            elif cell.unsupported:
                if cell.unsupported not in notes:
                    notes.append(cell.unsupported)
                row.append(f"not followed ({notes.index(cell.unsupported) + 1})")
            else:
                row.append("yes")
        lines.append("| " + " | ".join(row) + " |")
    total = len(by_cell)
    held = sum(1 for c in by_cell.values() if not c.unsupported)
    lines.append("")
    lines.append(f"{held} of {total} cells hold; each has a positive and a negative project in "
                 "`tests/lint/semantics/cells.py`. — : the construct does not apply to that family.")
    for number, note in enumerate(notes, 1):
        lines.append(f"({number}) {note[0].upper()}{note[1:]}.")
    return "\n".join(lines) + "\n"


def replaced(text: str) -> str:
    before, _, rest = text.partition(START)
    _, _, after = rest.partition(END)
    return f"{before}{START}\n{render()}{END}{after}"


def main(argv: list[str]) -> int:
    if "--write" in argv:
        DOC.write_text(replaced(DOC.read_text(encoding="utf-8")), encoding="utf-8")
    else:
        sys.stdout.write(render())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
