"""What a rule reports: frozen values, built once, read by every reporter."""

from __future__ import annotations

from dataclasses import dataclass, field

ERROR = "error"
WARNING = "warning"


@dataclass(frozen=True, order=True)
class Site:
    """A span of source: 1-based rows, 0-based columns (ruff's convention in JSON is 1-based).

    In a Jupyter notebook, once findings are reported (engine._relabel), ``cell`` is the
    cell's number (1-based, every cell counted) and the rows are the cell's lines; while
    the analysis runs, rows are those of the notebook's program (notebook.py) and ``cell``
    is None.
    """

    path: str
    row: int
    col: int
    end_row: int
    end_col: int
    cell: int | None = None

    def position(self) -> str:
        """``row:column`` as text output shows it (column 1-based); ``cell N:row:column``
        in a notebook (ruff's form)."""
        where = f"{self.row}:{self.col + 1}"
        return where if self.cell is None else f"cell {self.cell}:{where}"


@dataclass(frozen=True)
class Related:
    """A second location that explains a finding, e.g. where the GPU was initialized."""

    site: Site
    message: str


@dataclass(frozen=True)
class Edit:
    """Replace the text from ``start`` to ``end`` (row 1-based, column 0-based) by ``content``."""

    content: str
    start: tuple[int, int]
    end: tuple[int, int]


@dataclass(frozen=True)
class Fix:
    """A change that removes the finding; ``unsafe`` ones may change behaviour (ruff's split)."""

    message: str
    applicability: str  # "safe" or "unsafe"
    edits: tuple[Edit, ...]


@dataclass(frozen=True)
class NoFix:
    """Why a rule that can fix a finding offers no fix for this one (``--diff`` says it)."""

    reason: str


@dataclass(frozen=True)
class Finding:
    """One problem at one place, with the places that caused it."""

    code: str
    name: str
    message: str
    severity: str
    site: Site
    related: tuple[Related, ...] = field(default=())
    fix_hint: str | None = None
    fix: Fix | None = None
    # For a finding in a module the linted file's analysis reached: the call or import in
    # the linted file that reaches it (message: "call" or "import"); see rehoming.py.
    reached: Related | None = None
    no_fix: str | None = None  # why no fix is offered, where the rule has one (NoFix)

    @property
    def sort_key(self) -> tuple[str, int, int, int, str]:
        return (self.site.path, self.site.cell or 0, self.site.row, self.site.col, self.code)
