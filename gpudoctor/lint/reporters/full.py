"""Each finding with its code frame, the lines that caused it, and the fix in one line."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from gpudoctor.lint.findings import Finding, Site
from gpudoctor.lint.frontend.reading import split_lines
from gpudoctor.lint.reporters.concise import summary
from gpudoctor.lint.reporters.printable import printable


@lru_cache(maxsize=64)
def _lines(path: str) -> tuple[str, ...]:
    """The file's lines as Python numbers them (its declared encoding; breaks at ``\r\n``,
    ``\r`` and ``\n`` only, where ``str.splitlines`` also breaks at a form feed)."""
    from gpudoctor.lint.frontend.reading import read_text

    text = read_text(Path(path))
    return () if not isinstance(text, str) else tuple(split_lines(text))


@lru_cache(maxsize=64)
def _cell_lines(path: str, cell: int) -> tuple[str, ...]:
    """The lines of a notebook's cell as written (none if it cannot be read now)."""
    from gpudoctor.lint import notebook
    from gpudoctor.lint.frontend.reading import read_bytes

    raw = read_bytes(Path(path))
    try:
        found = notebook.read(raw) if isinstance(raw, bytes) else None
    except notebook.NotANotebook:
        found = None
    for each in found.cells if found is not None else ():
        if each.number == cell:
            return each.lines
    return ()


def _frame(site: Site, label: str, sources: dict[str, str] | None = None) -> list[str]:
    given = (sources or {}).get(site.path)
    if site.cell is not None:
        lines = _cell_lines(site.path, site.cell)
    else:
        lines = tuple(split_lines(given)) if given is not None else _lines(site.path)
    shown = f"{printable(site.path)}:{site.position()}"
    if not 0 < site.row <= len(lines):
        return [f"  --> {shown}"]
    text = lines[site.row - 1].rstrip()
    width = len(str(site.row))
    span = max(1, (site.end_col if site.end_row == site.row else len(text)) - site.col)
    return [
        f"{' ' * width}--> {shown}",
        f"{' ' * width} |",
        f"{site.row} | {text}",
        f"{' ' * width} | {' ' * site.col}{'^' * span} {printable(label)}".rstrip(),
    ]


STYLES = {"error": "1;31", "warning": "1;33", "caret": "31", "related": "36", "help": "32", "dim": "2"}


def _paint(text: str, style: str, color: bool) -> str:
    return f"\x1b[{STYLES[style]}m{text}\x1b[0m" if color else text


def render(findings: list[Finding], color: bool = False, with_summary: bool = True,
           sources: dict[str, str] | None = None) -> str:
    """Render findings; ``color`` adds ANSI colours (the caller decides: a terminal, no
    NO_COLOR); ``sources`` gives the text of a path that is not read from disk (stdin)."""
    out: list[str] = []
    for finding in findings:
        head = _paint(f"{finding.code} [{finding.severity}]", finding.severity, color)
        out.append(f"{head} {printable(finding.message)}")
        frame = _frame(finding.site, finding.name, sources)
        out.extend(frame[:-1] + [_paint(frame[-1], "caret", color)])
        for related in finding.related:
            frame = _frame(related.site, related.message, sources)
            out.extend(frame[:-1] + [_paint(frame[-1], "related", color)])
        if finding.fix_hint:
            out.append(_paint(f"  = help: {finding.fix_hint}", "help", color))
        out.append("")
    if with_summary:
        out.append(summary(findings))
    return "".join(f"{line}\n" for line in out)
