"""``gpudoctor lint --add-noqa``: a ``# noqa: CODE`` on the line of each finding a line
comment can suppress, so that the next run over the same paths, with the same settings,
is clean: the way a team adopts gpudoctor on code that already exists (ruff's
``--add-noqa``), then takes the comments out one by one as the code is fixed (GD001's fix
removes a code that no longer suppresses anything).

The comment goes on the row the engine's suppression reads (``FileDirectives.suppresses``
at the finding's own row), never on a row guessed near it. Whether a comment may end that
row is the tokenizer's answer, not a pattern's: a row whose end it marks as the end of a
line (a NEWLINE or NL token) can take one; a row that ends inside a multi-line string, or
is continued with a backslash, cannot, and its findings are listed instead. So are those
no line comment should silence: GD000 says a file could not be analysed (it cannot be
parsed, or an analysis bound cut it short), GD001 speaks of a noqa comment itself.

The line keeps what it holds: a ``# noqa: GD101`` or another tool's ``# noqa: E501``
gets the new codes in its list (sorted, each once, as written; a reason after the list
stays), a ``# noqa:`` that named no code gets them after its colon, and a line without
one gets ``  # noqa: CODES`` at its end (after any other comment, two spaces before it,
as ruff writes it). Its line ending stays. Each new text is checked with the parser the
engine uses (``noqa.parse``): a line whose comment would not be read as wanted is left
as it was, and listed.

Files are written as ``--fix`` writes them (``fixes.apply.write``): whole or not at all,
in their encoding, mode, owner and group; a read-only file, or one that is a symbolic link
out of the project, is not written. Notebooks are not written either, as ``--fix`` does
not write them: their findings are listed, to be given a ``# noqa`` in the cell by hand.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from gpudoctor.lint import noqa
from gpudoctor.lint.findings import Finding
from gpudoctor.lint.fixes import apply
from gpudoctor.lint.notebook import is_notebook

# Codes about the file or about a noqa comment: no line comment is added for them.
FILE_LEVEL = "GD000"
UNUSED_NOQA = "GD001"

NOTEBOOK = ("noqa comments are not added to Jupyter notebooks (gpudoctor does not write them); "
            "add it to the cell's line by hand")
_REASONS = {
    FILE_LEVEL: "it says a file could not be analysed, or not wholly: never given a noqa (fix the file, or "
                "exclude it)",
    UNUSED_NOQA: "it concerns a noqa comment, never given a noqa of its own: correct the comment, or take the "
                 "unused code out (`--fix --unsafe-fixes`)",
}
_IN_STRING = "its line ends inside a multi-line string, where no comment can go"
_BACKSLASH = "its line ends with a backslash continuation, where no comment can go"


@dataclass(frozen=True)
class Left:
    """A finding no noqa was added for, and why (the next run still reports it)."""

    finding: Finding
    reason: str


@dataclass
class NoqaPlan:
    """The new texts (``edits.fixed``: the findings their comments suppress), the rows
    given a comment in each file, and the findings left without one."""

    edits: apply.FixPlan = field(default_factory=apply.FixPlan)
    rows: dict[Path, set[int]] = field(default_factory=dict)
    left: list[Left] = field(default_factory=list)

    def added(self) -> int:
        """Lines given or extended a noqa comment, in the files still to be (or that were) written."""
        return sum(len(rows) for path, rows in self.rows.items() if path in self.edits.texts)

    def write(self) -> None:
        """Write the new texts (``apply.write``); the findings of a file it refused are
        left, with why, not counted as suppressed."""
        planned = self.edits.fixed
        apply.write(self.edits)
        self.left.extend(Left(f, "its file was not written") for f in planned
                         if Path(f.site.path) not in self.edits.texts)
        self.left.sort(key=lambda item: item.finding.sort_key)


def plan(findings: list[Finding], named: list[Path], root: Path | None) -> NoqaPlan:
    """Plan a ``# noqa`` for each finding of the files ``named`` (the files linted, as the
    findings name them); ``root``: the project's folder (a file that is a link out of it is
    not written)."""
    result = NoqaPlan()
    files = {str(path): path for path in named}
    wanted: dict[Path, dict[int, list[Finding]]] = {}
    for finding in findings:
        path = files.get(finding.site.path)
        reason = _never(finding, path)
        if reason is not None or path is None:
            result.left.append(Left(finding, reason or ""))
            continue
        wanted.setdefault(path, {}).setdefault(finding.site.row, []).append(finding)
    for path, rows in wanted.items():
        _plan_file(result, path, rows, root)
    result.left.sort(key=lambda item: item.finding.sort_key)
    return result


def _never(finding: Finding, path: Path | None) -> str | None:
    """Why no noqa is added for ``finding`` wherever it is, if so."""
    if finding.code in _REASONS:
        return _REASONS[finding.code]
    if is_notebook(finding.site.path):
        return NOTEBOOK
    if path is None:  # (every finding is in a linted file: this is only a guard)
        return "it is not in a file named to lint"
    return None


def _plan_file(result: NoqaPlan, path: Path, rows: dict[int, list[Finding]], root: Path | None) -> None:
    outside = apply.leads_out(path, root) if root is not None else None
    read = outside or apply.read_source(path)
    if isinstance(read, str):
        result.edits.refused.append((str(path), read))
        result.left.extend(Left(f, "its file was not written") for found in rows.values() for f in found)
        return
    old, encoding = read
    done = annotate(old, {row: {f.code for f in found} for row, found in rows.items()})
    for row, found in rows.items():
        if row in done.refused:
            result.left.extend(Left(f, done.refused[row]) for f in found)
        elif row in done.rows:
            result.edits.fixed.extend(found)
    if done.rows:
        result.edits.texts[path] = (old, done.text)
        result.edits.encodings[path] = encoding
        result.rows[path] = set(done.rows)


@dataclass(frozen=True)
class Annotated:
    """A text given noqa comments: the new text, the rows changed, and the rows that could
    not be given one, with why."""

    text: str
    rows: frozenset[int]
    refused: dict[int, str]


def annotate(text: str, wanted: dict[int, set[str]]) -> Annotated:
    """``text`` with each row of ``wanted`` given a noqa for its codes (a row a noqa
    covers already is left as it is)."""
    lines = apply.NEWLINE_KEPT.findall(text)
    ends, why_not = _line_ends(text, len(lines))
    directives = noqa.parse(text)
    refused: dict[int, str] = {}
    changed: dict[int, str] = {}
    for row, codes in sorted(wanted.items()):
        if not 0 < row <= len(lines):
            refused[row] = "its line is not in the file (was the file changed during the run?)"
            continue
        if row not in ends:
            refused[row] = why_not.get(row) or (_BACKSLASH if lines[row - 1].rstrip("\r\n").endswith("\\")
                                                else "no comment can end its line")
            continue
        directive = directives.lines.get(row)
        missing = {c for c in codes if not directives.suppresses(row, c)}
        if not missing or directive is not None and directive.codes is None:
            continue  # covered already (by a bare noqa)
        new = _with_codes(lines[row - 1], directive, missing)
        if new is None:
            refused[row] = "its noqa comment could not be read again"
            continue
        changed[row], lines[row - 1] = lines[row - 1], new
    if not changed:
        return Annotated(text, frozenset(), refused)
    check = noqa.parse("".join(lines))
    for row, old in changed.items():
        if not all(check.suppresses(row, code) for code in wanted[row]):
            lines[row - 1] = old
            refused[row] = "a noqa written there would not be read as one"
    return Annotated("".join(lines), frozenset(changed) - set(refused), refused)


def _line_ends(text: str, count: int) -> tuple[set[int], dict[int, str]]:
    """The rows whose end the tokenizer marks as the end of a line (a comment may go
    there), and why some others cannot take one (a string spans their end; the tokenizer
    stopped before it). Rows as the engine numbers them (universal newlines)."""
    import io
    import tokenize

    ends: set[int] = set()
    why_not: dict[int, str] = {}
    try:
        for token in tokenize.generate_tokens(io.StringIO(text, newline=None).readline):
            if token.type in (tokenize.NEWLINE, tokenize.NL):
                ends.add(token.start[0])
            elif token.start[0] < token.end[0]:
                why_not.update((row, _IN_STRING) for row in range(token.start[0], token.end[0]))
    except (tokenize.TokenError, SyntaxError) as exc:  # the rows past the last end it marked
        reason = f"Python's tokenizer stops before its end ({exc.args[0]})"
        last = max(ends, default=0)
        why_not.update((row, reason) for row in range(last + 1, count + 1) if row not in why_not)
    return ends, why_not


def _with_codes(line: str, directive: noqa.Directive | None, codes: set[str]) -> str | None:
    """``line`` (with its ending) whose noqa also names ``codes``; a new ``  # noqa:``
    comment at its end when it has none. None when the directive found there cannot be
    matched again (it always can: the same pattern found it)."""
    body = line.rstrip("\r\n")
    ending = line[len(body):]
    if directive is None:
        code = body.rstrip(" \t\f")  # (trailing blanks before a comment: ruff drops them too)
        return f"{code}  # noqa: {', '.join(sorted(codes))}{ending}"
    text = body[directive.col:directive.end_col]
    match = noqa.NOQA.match(text)
    if match is None:
        return None
    if match.group("codes"):
        written = [c for c in re.split(r"[\s,]+", match.group("codes")) if c]
        start, end = match.span("codes")
        head, tail = text[:start], text[end:]
    else:  # a noqa with a colon and no code after it: the codes go there, what followed stays
        written = []
        head = text[:text.index(":") + 1] + " "
        tail = f" {match.group('bad')}" if match.group("bad") else ""
        if body[directive.end_col:directive.end_col + 1].strip():  # another comment right after: a space between
            tail += " "
    merged: dict[str, str] = {}
    for code in [*written, *sorted(codes)]:
        merged.setdefault(code.upper(), code)  # each once, as first written
    listed = ", ".join(merged[key] for key in sorted(merged))
    return f"{body[:directive.col]}{head}{listed}{tail}{body[directive.end_col:]}{ending}"
