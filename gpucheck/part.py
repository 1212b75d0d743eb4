"""What every check of ``make gpu-check`` receives and returns."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

Status = Literal["passed", "failed", "skipped"]


@dataclass(frozen=True)
class Context:
    """Where a check runs: the report folder, the interpreter, the repository, the time left."""

    out: Path  # the report folder; a check writes its own files under out/<part name>/
    python: str  # the interpreter that holds the GPU frameworks (children are started with it)
    repo: Path  # the clone's root, put on PYTHONPATH of every child
    deadline: float  # time.monotonic() by which the whole run must end

    def seconds_left(self) -> float:
        """Return how long the run may still take."""
        return max(0.0, self.deadline - time.monotonic())

    def folder(self, part: str) -> Path:
        """Return (and create) the folder for ``part``'s own files."""
        path = self.out / part
        path.mkdir(parents=True, exist_ok=True)
        return path


@dataclass
class PartResult:
    """One check's outcome: passed, failed or skipped, in sentences and in data."""

    name: str
    status: Status
    summary: list[str] = field(default_factory=list)  # lines for the report, most important first
    data: dict[str, Any] = field(default_factory=dict)  # JSON-serialisable details
    seconds: float = 0.0
