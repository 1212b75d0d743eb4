"""From findings to what an editor shows: diagnostics, their related places, code actions.

Positions: gpudoctor counts rows from 1 and columns in characters from 0; the protocol
counts lines from 0 and columns in the units the client and server agreed on (UTF-16 by
default). The conversion needs the text of each line, which ``Places`` finds: the
editor's text of an open document (a notebook cell's, for a finding in a notebook), else
the file on disk.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from lsprotocol import types as lsp

if TYPE_CHECKING:
    from collections.abc import Callable

    from gpudoctor.lint.findings import Edit, Finding, Site

SOURCE = "gpudoctor"
SHOW_RULE = "gpudoctor.showRule"  # the command that opens a rule's documentation
# The command that answers what the server is and holds, once the lint in progress is done.
DEBUG_INFORMATION = "gpudoctor.printDebugInformation"


class Codec(Protocol):
    def position_to_client_units(self, lines: list[str], position: lsp.Position) -> lsp.Position: ...


@dataclass(frozen=True)
class Place:
    """A document as the editor knows it: its URI, its lines, and its version (None: a
    file on disk the editor does not hold)."""

    uri: str
    lines: list[str]
    version: int | None = None


class Places:
    """Where a site is in the editor: ``find(path, cell)`` gives the place, or None for a
    site the editor cannot show (a cell that is gone, a file that cannot be read)."""

    def __init__(self, find: Callable[[Path, int | None], Place | None], codec: Codec) -> None:
        self._find = find
        self._codec = codec
        self._found: dict[tuple[Path, int | None], Place | None] = {}

    def place(self, site: Site) -> Place | None:
        key = (Path(site.path).absolute(), site.cell)
        if key not in self._found:
            self._found[key] = self._find(*key)
        return self._found[key]

    def position(self, place: Place, row: int, col: int) -> lsp.Position:
        """The protocol's position of gpudoctor's (row from 1, column in characters)."""
        line = max(row - 1, 0)
        return self._codec.position_to_client_units(place.lines, lsp.Position(line, max(col, 0))) \
            if line < len(place.lines) else lsp.Position(line, max(col, 0))

    def range(self, place: Place, start: tuple[int, int], end: tuple[int, int]) -> lsp.Range:
        return lsp.Range(self.position(place, *start), self.position(place, *end))

    def location(self, site: Site) -> lsp.Location | None:
        place = self.place(site)
        if place is None:
            return None
        return lsp.Location(place.uri, self.range(place, (site.row, site.col), (site.end_row, site.end_col)))


def diagnostic(finding: Finding, places: Places, rule_page: Callable[[str], str | None]) -> lsp.Diagnostic | None:
    """The diagnostic of ``finding`` (None when its place is not in the editor's reach).

    The message is the finding's, as ``--output-format json`` gives it; the places that
    explain it (where the GPU was initialized, the child's use) are related information;
    the code links to the rule's page (``rule_page``: a URI, or None)."""
    location = places.location(finding.site)
    if location is None:
        return None
    related = [lsp.DiagnosticRelatedInformation(where, r.message)
               for r in finding.related if (where := places.location(r.site)) is not None]
    page = rule_page(finding.code)
    return lsp.Diagnostic(
        range=location.range, message=finding.message,
        severity=lsp.DiagnosticSeverity.Error if finding.severity == "error" else lsp.DiagnosticSeverity.Warning,
        code=finding.code, code_description=lsp.CodeDescription(page) if page else None, source=SOURCE,
        related_information=related or None)


def _edits(edits: tuple[Edit, ...], place: Place, places: Places) -> list[lsp.TextEdit]:
    newline = next((line[len(line.rstrip("\r\n")):] for line in place.lines if line.endswith(("\n", "\r"))), "\n")
    return [lsp.TextEdit(places.range(place, edit.start, edit.end),
                         edit.content.replace("\n", newline) if newline != "\n" else edit.content)
            for edit in edits]


def _workspace_edit(place: Place, edits: list[lsp.TextEdit]) -> lsp.WorkspaceEdit:
    """Edits of one document, valid only for the version they were made for."""
    return lsp.WorkspaceEdit(document_changes=[lsp.TextDocumentEdit(
        lsp.OptionalVersionedTextDocumentIdentifier(place.uri, place.version), list(edits))])


def fix_action(finding: Finding, shown: lsp.Diagnostic, places: Places) -> lsp.CodeAction | None:
    """The finding's fix as a quick fix (an unsafe one says it may change behaviour)."""
    fix = finding.fix
    place = places.place(finding.site)
    if fix is None or place is None or not fix.edits:
        return None
    title = f"{fix.message} ({finding.code})" if fix.applicability == "safe" else \
        f"{fix.message} ({finding.code}; unsafe: may change behaviour)"
    return lsp.CodeAction(title, kind=lsp.CodeActionKind.QuickFix, diagnostics=[shown],
                          is_preferred=fix.applicability == "safe",
                          edit=_workspace_edit(place, _edits(fix.edits, place, places)))


def noqa_action(finding: Finding, shown: lsp.Diagnostic, places: Places) -> lsp.CodeAction | None:
    """``# noqa: CODE`` at the end of the finding's line (merged with a noqa already
    there), as ``gpudoctor lint --add-noqa`` writes it; None where no comment can end that
    line (inside a string, after a backslash)."""
    from gpudoctor.lint.fixes.add_noqa import annotate

    place = places.place(finding.site)
    if place is None or finding.code in ("GD000", "GD001") or finding.site.cell is not None:
        return None
    row = finding.site.row
    annotated = annotate("".join(place.lines), {row: {finding.code}})
    if row not in annotated.rows:
        return None
    old = place.lines[row - 1].rstrip("\r\n")
    new = annotated.text.splitlines()[row - 1]
    edit = lsp.TextEdit(places.range(place, (row, 0), (row, len(old))), new)
    return lsp.CodeAction(f"Disable {finding.code} for this line", kind=lsp.CodeActionKind.QuickFix,
                          diagnostics=[shown], edit=_workspace_edit(place, [edit]))


def rule_action(code: str, shown: lsp.Diagnostic) -> lsp.CodeAction:
    """Open the rule's documentation (the ``gpudoctor rule CODE`` text)."""
    return lsp.CodeAction(f"Show the documentation of {code}", kind=lsp.CodeActionKind.QuickFix,
                          diagnostics=[shown], command=lsp.Command(f"Show {code}", SHOW_RULE, arguments=[code]))


def hover_text(finding: Finding) -> str:
    """Markdown for a finding under the pointer: the finding, its help, then the rule."""
    from gpudoctor.lint.rules._registry import rule_by_code

    rule = rule_by_code(finding.code)
    parts = [f"**{finding.code}** `{finding.name}` ({finding.severity})", _plain(finding.message)]
    if finding.related:  # (for editors that do not show a diagnostic's related information)
        parts.append("\n".join(f"- `{_where(r.site)}`: {_plain(r.message)}" for r in finding.related))
    if finding.fix_hint:
        parts.append(f"Help: {_plain(finding.fix_hint)}")
    if rule is not None:
        parts += ["---", rule_text(finding.code)]
    return "\n\n".join(parts)


def _plain(text: str) -> str:
    """Text shown as written in Markdown: outside its `code` spans, the characters
    Markdown would read as emphasis or markup are escaped (``is_available`` is no
    emphasis)."""
    parts = text.split("`")
    for index in range(0, len(parts), 2):  # (the even parts are outside code spans)
        parts[index] = re.sub(r"([\\_*\[\]<>#])", r"\\\1", parts[index])
    return "`".join(parts)


def _where(site: Site) -> str:
    cell = f" cell {site.cell}" if site.cell is not None else ""
    return f"{Path(site.path).name}{cell}:{site.row}:{site.col + 1}"


def rule_text(code: str) -> str:
    """The rule's documentation as ``gpudoctor rule CODE`` prints it (Markdown)."""
    from gpudoctor.lint.rules._registry import rule_by_code

    rule = rule_by_code(code)
    if rule is None:
        return f"No rule {code}."
    return f"# {rule.code} {rule.name}\n\n{rule.summary}.\n\n{rule.documentation()}\n"


def overlaps(a: lsp.Range, b: lsp.Range) -> bool:
    """Do the ranges share a position (an empty range touching the other counts)?"""
    return (a.start.line, a.start.character) <= (b.end.line, b.end.character) and \
        (b.start.line, b.start.character) <= (a.end.line, a.end.character)


def contains(outer: lsp.Range, position: lsp.Position) -> bool:
    return (outer.start.line, outer.start.character) <= (position.line, position.character) <= \
        (outer.end.line, outer.end.character)
