"""``# noqa`` comments: which codes each line suppresses, and which suppressions were used.

Compatible with ruff and flake8: ``# noqa`` alone suppresses everything on its line,
``# noqa: GD101, GD201`` only those codes; ``# gpudoctor: noqa`` anywhere in a file
suppresses the whole file. Comments are found with the tokenizer, so a "# noqa" inside a
string does not count.

What counts as a code list after ``# noqa:``: codes as flake8 and ruff read them, letters
then digits (``GD101``, ``E501``, ``gd101``; any case), separated by commas or spaces; the
list ends at the first word that is not one, so a reason may follow (``# noqa: GD101
kept for X``). Codes of other tools are theirs, never judged here. A ``# noqa:`` whose
colon is followed by no code at all (``# noqa: XYZ``, ``# noqa: fork``, a bare ``# noqa:``)
is malformed: ruff warns of it and suppresses nothing with it, and so does gpudoctor
(GD001 reports it). Read as a bare ``# noqa``, as it once was, it hid every finding of
its line without a word. (A well-formed code gpudoctor has no rule for, such as a
truncated ``GD10``, suppresses nothing either, and GD001 calls it unknown.)
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from gpudoctor.lint.findings import Edit, Fix
from gpudoctor.lint.frontend.reading import split_lines

_CODE = r"[A-Za-z]+[0-9]+"
# ``codes``: the code list; ``bad``: what follows a colon that no code follows ('' if nothing).
NOQA = re.compile(rf"#\s*noqa(?::\s*(?:(?P<codes>{_CODE}(?:[\s,]+{_CODE})*)|(?P<bad>[^\s#]*)))?", re.I)
FILE_NOQA = re.compile(r"#\s*gpudoctor:\s*noqa\b", re.I)
_MENTION = re.compile("noqa", re.I)


@dataclass(frozen=True)
class Directive:
    """One ``# noqa`` comment: its position and codes (None for a bare ``# noqa``, none at
    all for a malformed ``# noqa: XYZ``, which suppresses nothing)."""

    row: int
    col: int
    end_col: int
    codes: frozenset[str] | None

    @property
    def malformed(self) -> bool:
        """A ``# noqa:`` that names no code (see the module's docstring)."""
        return self.codes is not None and not self.codes


@dataclass(frozen=True)
class FileDirectives:
    whole_file: bool
    lines: dict[int, Directive]

    def suppresses(self, row: int, code: str) -> bool:
        if self.whole_file:
            return True
        directive = self.lines.get(row)
        return directive is not None and (directive.codes is None or code in directive.codes)

    def to_json(self) -> list[object]:
        return [self.whole_file, [[d.row, d.col, d.end_col, None if d.codes is None else sorted(d.codes)]
                                  for d in self.lines.values()]]

    @classmethod
    def from_json(cls, data: list[Any]) -> FileDirectives:  # as to_json wrote it, read back from JSON
        whole, lines = data
        return cls(bool(whole), {int(row): Directive(int(row), int(col), int(end),
                                                     None if codes is None else frozenset(str(c) for c in codes))
                                 for row, col, end, codes in lines})


def parse(text: str) -> FileDirectives:
    """Collect the noqa directives of a source text (an unreadable text has none)."""
    import io
    import tokenize  # (a warm run reads the directives from the cache: it needs no tokenizer)

    lines: dict[int, Directive] = {}
    whole = False
    if _MENTION.search(text) is None:
        return FileDirectives(False, lines)  # tokenizing is the expensive part; skip it
    try:
        # newline=None: lines break where Python breaks them (a lone \r too), columns stay.
        for token in tokenize.generate_tokens(io.StringIO(text, newline=None).readline):
            if token.type != tokenize.COMMENT:
                continue
            if FILE_NOQA.search(token.string):
                whole = True
                continue
            match = NOQA.search(token.string)
            if match is None:
                continue
            raw = match.group("codes")
            if raw:
                codes: frozenset[str] | None = frozenset(c.upper() for c in re.split(r"[\s,]+", raw) if c)
            else:  # a bare ``# noqa``; or a colon no code follows: malformed, the empty set
                codes = None if match.group("bad") is None else frozenset()
            row, col = token.start
            lines[row] = Directive(row, col + match.start(), col + match.end(), codes)
    except (tokenize.TokenError, SyntaxError, IndentationError):
        pass
    return FileDirectives(whole, lines)


def _lines(text: str) -> list[str]:
    """``split_lines(text)``, kept for the last text asked for: every unused directive of a
    file asks for its lines (20,000 of them took 25 s, once per directive)."""
    global _last_lines
    if _last_lines is None or _last_lines[0] is not text:
        _last_lines = (text, split_lines(text))
    return _last_lines[1]


_last_lines: tuple[str, list[str]] | None = None


def fix_unused(text: str, directive: Directive, stale: list[str]) -> Fix | None:
    """Take the stale codes out of the comment; the whole ``# noqa`` (and the spaces before
    it, or its line if it is alone there) when none is left.

    Unsafe, unlike ruff's RUF100: a finding can exist only when a file that imports this
    one is linted too (its pool runs this file's code), so a suppression this run calls
    unused may be needed by a run over the whole project."""
    lines = _lines(text)
    if not 0 < directive.row <= len(lines):
        return None
    line = lines[directive.row - 1]
    kept = sorted(set(directive.codes or ()) - set(stale))
    start, end = directive.col, directive.end_col
    rest = line[end:]
    row, end_row = directive.row, directive.row
    if kept:
        content = f"# noqa: {', '.join(kept)}"
    elif rest.lstrip().startswith("#"):  # another comment follows: it stays, from its "#"
        content, end = "", end + len(rest) - len(rest.lstrip())
    elif rest.strip():  # the comment goes on after it: keep it a comment
        content = "#"
    elif line[:start].strip():  # code before it: the spaces between go too
        content, start = "", len(line[:start].rstrip())
    elif directive.row < len(lines):  # alone on its line: the line goes
        content, start, end, end_row = "", 0, 0, directive.row + 1
    else:
        content, start = "", 0
    return Fix("Remove the unused code from the noqa comment", "unsafe",
               (Edit(content, (row, start), (end_row, end)),))
