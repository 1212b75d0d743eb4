"""Jupyter notebooks (nbformat 4) read as one Python program, and positions mapped back.

The kernel runs the code cells one after the other in one interpreter, so their sources,
in order, are the program that is analysed: each code cell's lines, then the next cell's,
joined by a line break (a cell's last line is a row of its own, as in ruff). Markdown and
raw cells are not code. A finding's row in that program is shown as (cell, line in the
cell): cells are numbered from 1 among *all* the notebook's cells, markdown included,
which is ruff's convention (``nb.ipynb:cell 3:2:5``) and the position a reader counts in
the notebook.

IPython's own syntax is neutralised line by line so that the program parses and every
other line keeps its row and column: a line magic or shell escape (``%time f()``,
``!pip install x``, ``x = !ls``, ``%env A=1``), a help request (``obj?``, ``?obj``) and an
automagic call (``pip install x``, ``cd ..``) become ``pass`` (or ``x = ...``) at the
indentation of the block they are in, and the lines a backslash joins to them become
empty. Only a line that begins a statement is looked at: a ``%`` inside brackets or a
string is Python. A cell magic (``%%bash``) makes the whole cell some other language, and
its lines are left out (kept as empty rows), except the magics that run their body as
Python (``%%time``, ``%%timeit``, ``%%capture``, ``%%prun``), whose first line alone is
left out. A notebook whose kernel is not Python (``metadata.language_info.name``, or the
kernel spec's ``language``) has no program, as in ruff.

Plain ``json`` reads the file; nothing of it is ever executed.
"""

from __future__ import annotations

import json
import re
from bisect import bisect_right
from dataclasses import dataclass
from functools import cache

from gpudoctor.input_file import too_many_digits

SUFFIX = ".ipynb"

# Cell magics whose body IPython runs as Python in the kernel (the first line is the magic).
PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun"})
# Line magics IPython calls without their ``%`` (automagic, on by default). A line that
# starts with one of these words and is not Python by itself (``pip install x``) is one.
AUTOMAGIC = frozenset({
    "alias", "autoawait", "autocall", "automagic", "bookmark", "cd", "colors", "conda", "config",
    "dhist", "dirs", "doctest_mode", "env", "gui", "history", "load_ext", "lsmagic", "magic", "mamba",
    "matplotlib", "micromamba", "pdb", "pinfo", "pip", "popd", "pprint", "precision", "prun", "pushd",
    "pwd", "pylab", "quickref", "recall", "reload_ext", "rerun", "reset", "reset_selective", "run",
    "save", "set_env", "store", "sx", "system", "tb", "time", "timeit", "unload_ext", "who", "who_ls",
    "whos", "xdel", "xmode",
})
_ASSIGNED_ESCAPE = re.compile(r"\s*([A-Za-z_][\w.]*(?:\s*,\s*[A-Za-z_][\w.]*)*)\s*=\s*[!%]")
_FIRST_WORD = re.compile(r"\s*([A-Za-z_]\w*)[ \t]+\S")
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


class NotANotebook(ValueError):
    """The file is not a notebook this reads: ``message`` says why, ``row``/``col`` (1-based
    row, 0-based column) where in the file's text, when that is known."""

    def __init__(self, message: str, row: int = 1, col: int = 0) -> None:
        super().__init__(message)
        self.message, self.row, self.col = message, row, col


@dataclass(frozen=True)
class Cell:
    number: int  # 1-based, counting every cell of the notebook (markdown and raw too)
    first_row: int  # the program's row of the cell's first line
    lines: tuple[str, ...]  # the cell's source as written, one entry per line


@dataclass(frozen=True)
class Notebook:
    program: str
    cells: tuple[Cell, ...]  # the code cells, in order
    # Code cells that are not Python (a half-written line, LaTeX pasted into a code cell, a
    # bracket left open at the end): IPython rejects each with SyntaxError and runs the
    # others, so they are left out of the program (their rows kept empty). Each is
    # (cell number, why, the program's row and column where the parser stopped).
    skipped: tuple[tuple[int, str, int, int], ...] = ()

    def cell_at(self, row: int) -> Cell | None:
        index = bisect_right([cell.first_row for cell in self.cells], row) - 1
        if index < 0:
            return None
        cell = self.cells[index]
        return cell if row < cell.first_row + len(cell.lines) else None

    def locate(self, row: int) -> tuple[int, int] | None:
        """(cell number, row in that cell) of a program row; None outside every cell."""
        cell = self.cell_at(row)
        return None if cell is None else (cell.number, row - cell.first_row + 1)


def is_notebook(path: object) -> bool:
    return str(path).lower().endswith(SUFFIX)


# Notebooks read in this process, by path: positions in messages (line_of) name cells.
_READ: dict[str, Notebook] = {}


def remember(path: str, notebook: Notebook) -> None:
    _READ[path] = notebook


def read_already(path: str) -> Notebook | None:
    """The notebook read in this process for ``path``, if it was."""
    return _READ.get(path)


def describe(path: str, row: int) -> str | None:
    """"cell 3, line 2" for a program row of a notebook read here; None otherwise."""
    notebook = _READ.get(path)
    where = notebook.locate(row) if notebook is not None else None
    return None if where is None else f"cell {where[0]}, line {where[1]}"


@cache
def read(raw: bytes) -> Notebook:
    """The program of a notebook's bytes; NotANotebook when they are not an nbformat 4
    notebook (with the reason, fit to show a user).

    Remembered for the process, without a bound: a run reads each notebook twice, for its
    analysis and again to put its findings at their cells, and with a bound smaller than
    the notebooks of a run every second read missed (each notebook's JSON and cells read
    twice). The run's project holds every file's bytes anyway; this adds their programs."""
    try:
        text = raw.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        row = raw[: exc.start].count(b"\n") + 1
        raise NotANotebook(f"not a Jupyter notebook: the file is not valid UTF-8 ({exc.reason})", row) from None
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise NotANotebook(f"not a Jupyter notebook: invalid JSON ({exc.msg} at line {exc.lineno} "
                           f"column {exc.colno})", exc.lineno, exc.colno - 1) from None
    except RecursionError:
        raise NotANotebook("not a Jupyter notebook: JSON nested too deeply") from None
    except ValueError as exc:  # valid JSON, perhaps: a number Python will not convert
        digits = too_many_digits(exc)
        raise NotANotebook(f"not read: its JSON holds {digits}" if digits
                           else f"not a Jupyter notebook: invalid JSON ({exc})") from None
    if not isinstance(document, dict):
        raise NotANotebook("not a Jupyter notebook: the JSON document is not an object")
    version = document.get("nbformat")
    if version != 4:
        shown = f"nbformat {version}" if isinstance(version, int) else "no nbformat number"
        raise NotANotebook(f"not read: {shown} notebook (only nbformat 4 is read; open and save it "
                           "in a current Jupyter to convert it)")
    cells = document.get("cells")
    if not isinstance(cells, list):
        raise NotANotebook("not a Jupyter notebook: no list of cells")
    if not _python(document.get("metadata")):
        return Notebook("", ())
    out: list[Cell] = []
    codes: list[list[str]] = []
    skipped: list[tuple[int, str, int, int]] = []
    rows_so_far = 0  # the program's rows the cells before this one hold (summed again per cell: quadratic)
    for number, cell in enumerate(cells, 1):
        if not isinstance(cell, dict):
            raise NotANotebook(f"cell {number} cannot be read: not a JSON object")
        if cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        if isinstance(source, list) and all(isinstance(part, str) for part in source):
            source = "".join(source)
        if not isinstance(source, str):
            raise NotANotebook(f"cell {number} cannot be read: its source is not text")
        lines = tuple(_LINE_BREAK.split(source))
        first_row = rows_so_far + 1
        code, left_open = _neutralise(list(lines))
        if left_open is not None:
            code = [""] * len(code)
            skipped.append((number, f"{left_open} at the end of the cell", first_row + len(lines) - 1,
                            len(lines[-1])))
        out.append(Cell(number, first_row, lines))
        codes.append(code)
        rows_so_far += len(code)
    rows = [row for code in codes for row in code]
    program = "\n".join(rows) + "\n" if rows else ""
    if _syntax_error(program) is not None:  # (checked cell by cell only when the whole fails)
        for index, code in enumerate(codes):
            error = _syntax_error("\n".join(code)) if any(code) else None
            if error is not None:
                codes[index] = [""] * len(code)
                message, row, col = error
                skipped.append((out[index].number, message, out[index].first_row + row - 1, col))
        rows = [row for code in codes for row in code]
        program = "\n".join(rows) + "\n" if rows else ""
    return Notebook(program, tuple(out), tuple(sorted(skipped)))


def _python(metadata: object) -> bool:
    """Is the kernel Python (or not said)?"""
    if not isinstance(metadata, dict):
        return True
    for key, field in (("language_info", "name"), ("kernelspec", "language")):
        entry = metadata.get(key)
        name = entry.get(field) if isinstance(entry, dict) else None
        if isinstance(name, str):
            return name.lower() == "python"
    return True


_SPECIAL = re.compile(r"[][(){}\"'#]")


def _scan(line: str, depth: int, quote: str | None) -> tuple[int, str | None, int, bool]:
    """Read one line of Python: the bracket depth and the string left open after it, where
    its comment starts (or its length), and whether a backslash joins the next line."""
    i, n = 0, len(line)
    comment = n
    while i < n:
        if quote is not None:
            close = line.find(quote, i)
            escape = line.find("\\", i, close if close >= 0 else n)
            if escape >= 0:
                i = escape + 2
            elif close >= 0:
                i = close + len(quote)
                quote = None
            else:
                i = n
            continue
        found = _SPECIAL.search(line, i)
        if found is None:
            break
        i = found.start()
        char = line[i]
        if char == "#":
            comment = i
            break
        if char in "\"'":
            quote = line[i:i + 3] if line[i:i + 3] in ('"""', "'''") else char
            i += len(quote)
            continue
        if char in "([{":
            depth += 1
        else:
            depth = max(0, depth - 1)
        i += 1
    joined = line.endswith("\\") and comment == n
    if quote in ("'", '"') and not joined:
        quote = None  # a one-line string does not go on (Python reports the error)
    return depth, quote, comment, joined and quote is None


def _escape(line: str) -> str | None:
    """What replaces ``line``, a line that begins a statement, if it is IPython syntax:
    ``pass`` (indentation added by the caller) or ``x = ...``; None for Python."""
    stripped = line.strip()
    if not stripped or stripped.startswith("#"):
        return None
    if stripped[0] in "%!?":
        return "pass"
    assigned = _ASSIGNED_ESCAPE.match(line)
    if assigned is not None:
        return f"{assigned.group(1)} = ..."
    if "?" in stripped:
        _, quote, comment, _ = _scan(line, 0, None)
        if quote is None and line[:comment].rstrip().endswith("?"):
            return "pass"
    word = _FIRST_WORD.match(line)
    if word is not None and word.group(1) in AUTOMAGIC:
        depth, quote, _, _ = _scan(line, 0, None)
        if depth == 0 and quote is None and not _parses(stripped):
            return "pass"
    return None


def _parses(text: str) -> bool:
    return _syntax_error(text) is None


def _syntax_error(text: str) -> tuple[str, int, int] | None:
    """Why CPython's parser rejects ``text``, and where (1-based row, 0-based column);
    None when it parses."""
    import ast
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(text)
    except SyntaxError as exc:
        return exc.msg or "invalid syntax", exc.lineno or 1, max((exc.offset or 1) - 1, 0)
    except ValueError as exc:  # a null byte
        return str(exc), 1, 0
    return None


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def _neutralise(lines: list[str]) -> tuple[list[str], str | None]:
    """The cell's lines with IPython syntax replaced (same number of lines), and what is
    left open at its end (a bracket, a string), if anything."""
    # IPython removes the indentation of a cell's first line from every line of the cell
    # (its leading_indent transformer): an indented cell runs.
    head = next((line for line in lines if line.strip()), "")
    indent = head[: len(head) - len(head.lstrip())]
    if indent:
        lines = [line[len(indent):] if line.startswith(indent) else line for line in lines]
    # The cell magic, after any blank or comment line: Colab puts its form markers
    # (``#@title Install``) above ``%%bash`` and runs the cell as the magic says.
    index = next((i for i, line in enumerate(lines) if line.strip() and not line.lstrip().startswith("#")), None)
    first = lines[index].strip() if index is not None else ""
    if first.startswith("%%") and index is not None:
        name = first[2:].split(None, 1)[0] if first[2:].strip() else ""
        if name not in PYTHON_CELL_MAGICS:
            return [""] * len(lines), None  # another language: not Python
        lines = [*lines[:index], "", *lines[index + 1:]]
    out: list[str] = []
    depth, quote, joined, escape_joined = 0, None, False, False
    block_indent, opens = "", False  # the last statement's indentation; did it open a block?
    statement_indent = ""
    for line in lines:
        if escape_joined:
            out.append("")
            escape_joined = line.endswith("\\")
            continue
        starts = depth == 0 and quote is None and not joined
        if starts:
            replaced = _escape(line)
            if replaced is not None:
                own = _indent(line)
                indent = own if opens or len(own) <= len(block_indent) else block_indent
                out.append(indent + replaced)
                escape_joined = line.endswith("\\")
                if not opens:
                    block_indent = indent
                opens = False
                continue
            if line.strip() and not line.lstrip().startswith("#"):
                statement_indent = _indent(line)
        depth, quote, comment, joined = _scan(line, depth, quote)
        out.append(line)
        if depth == 0 and quote is None and not joined and line[:comment].strip():
            block_indent = statement_indent
            opens = line[:comment].rstrip().endswith(":")
    # A magic or shell escape continued by a backslash on the cell's last line is not left
    # open: IPython passes the backslash on with the command, and the cell runs.
    left_open = ("a string left open" if quote is not None else "a bracket left open" if depth
                 else "a line continued by a backslash" if joined else None)
    return out, left_open
