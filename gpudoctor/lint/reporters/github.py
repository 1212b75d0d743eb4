"""GitHub Actions workflow commands: one ``::error``/``::warning`` annotation per finding."""

from __future__ import annotations

from gpudoctor.lint.findings import Finding
from gpudoctor.lint.reporters.printable import printable


def _escape_data(text: str) -> str:
    # GitHub's own escapes carry a line break exactly; any other control character, or a
    # byte of a file name that is not UTF-8, is shown escaped (the runner reads UTF-8).
    return printable(text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A"))


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def render(findings: list[Finding]) -> str:
    """In a Jupyter notebook, a line number of the file would point into its JSON: the
    annotation names the file only, and its text says the cell and the line in it."""
    lines = []
    for f in findings:
        level = "error" if f.severity == "error" else "warning"
        where = () if f.site.cell is not None else (
            f"line={f.site.row}",
            f"col={f.site.col + 1}",
            f"endLine={f.site.end_row}",
            f"endColumn={f.site.end_col + 1}",
        )
        props = ",".join((
            f"file={_escape_property(f.site.path)}",
            *where,
            f"title={_escape_property(f'{f.code} {f.name}')}",
        ))
        text = f"{f.code} {f.message}" if f.site.cell is None else f"{f.site.position()}: {f.code} {f.message}"
        lines.append(f"::{level} {props}::{_escape_data(text)}")
    return "".join(line + "\n" for line in lines)
