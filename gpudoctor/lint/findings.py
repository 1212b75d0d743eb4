"""What a rule reports: frozen values, built once, read by every reporter."""

from __future__ import annotations

from dataclasses import dataclass, field

ERROR = "error"
WARNING = "warning"


@dataclass(frozen=True, order=True)
class Site:
    """A span of source: 1-based rows, 0-based columns (ruff's convention in JSON is 1-based)."""

    path: str
    row: int
    col: int
    end_row: int
    end_col: int


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
    # the linted file that reaches it (message: "call" or "import"); see reached.py.
    reached: Related | None = None

    @property
    def sort_key(self) -> tuple[str, int, int, str]:
        return (self.site.path, self.site.row, self.site.col, self.code)
