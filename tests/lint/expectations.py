"""Read the expectations written in fixture files and compare them with findings.

Format (semgrep style): ``# ruleid: GD101`` (or ``GD101, GD201``) on the line before the
line where the finding is reported; ``# ok: GD101`` documents a look-alike that must stay
silent; ``# todoruleid: GD101`` is a finding the linter should report and does not yet (a
known miss: counted as a false negative, and a test fails once it is found, so that it is
promoted to ``ruleid``); ``# gpudoctor-platform: darwin`` / ``# gpudoctor-target: py314``
set the target. In a Jupyter notebook (``fixtures/notebooks/``), annotations are written in
the code cells and a finding is keyed by its cell.
"""

from __future__ import annotations

import argparse
import json
import re
from dataclasses import dataclass
from pathlib import Path

from gpudoctor.lint.engine import lint_paths
from gpudoctor.lint.findings import Finding
from gpudoctor.lint.limits import DEFAULT_LIMITS, Limits
from gpudoctor.lint.rules._registry import all_rules
from gpudoctor.lint.selection import build_selection
from gpudoctor.lint.settings import Settings, parse_target_version

RULEID = re.compile(r"#\s*ruleid:\s*([A-Z0-9, ]+)")
TODO_RULEID = re.compile(r"#\s*todoruleid:\s*([A-Z0-9, ]+)")
PLATFORM = re.compile(r"#\s*gpudoctor-platform:\s*(\w+)")
TARGET = re.compile(r"#\s*gpudoctor-target:\s*(py3\d+)")
ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures"

Key = tuple[str, int, str]  # (file name relative to the case, row, code)


@dataclass(frozen=True)
class Case:
    """One fixture: a file, or a project directory linted as a whole."""

    path: Path

    @property
    def files(self) -> list[Path]:
        return sorted(self.path.rglob("*.py")) if self.path.is_dir() else [self.path]

    def name_of(self, file: Path) -> str:
        return file.relative_to(self.path).as_posix() if self.path.is_dir() else file.name

    def directives(self) -> tuple[str, str | None]:
        platform, target = "linux", None
        for file in self.files:
            text = file.read_text(encoding="utf-8", errors="replace")
            if m := PLATFORM.search(text):
                platform = m.group(1)
            if m := TARGET.search(text):
                target = m.group(1)
        return platform, target

    def expected(self) -> set[Key]:
        return self._annotated(RULEID)

    def known_misses(self) -> set[Key]:
        return self._annotated(TODO_RULEID)

    def _annotated(self, pattern: re.Pattern[str]) -> set[Key]:
        found: set[Key] = set()
        for file in self.files:
            for name, lines in self._sources(file):
                for index, line in enumerate(lines):
                    match = pattern.search(line)
                    if match:
                        for code in match.group(1).replace(" ", "").split(","):
                            if code:
                                found.add((name, index + 2, code))
        return found

    def _sources(self, file: Path) -> list[tuple[str, list[str]]]:
        """(name, lines) of each piece of source in ``file``: the file itself, or each code
        cell of a notebook, named ``nb.ipynb:cell N`` (N counts every cell, as findings do),
        where an annotation targets the next line of its cell."""
        text = file.read_text(encoding="utf-8", errors="replace")
        if file.suffix != ".ipynb":
            return [(self.name_of(file), text.splitlines())]
        cells = json.loads(text)["cells"]
        return [(f"{self.name_of(file)}:cell {number}", _source(cell).splitlines())
                for number, cell in enumerate(cells, 1) if cell["cell_type"] == "code"]


def implemented_codes() -> set[str]:
    return {rule.code for rule in all_rules()}


def settings_for(case: Case) -> Settings:
    platform, target = case.directives()
    codes = sorted(implemented_codes())
    minor = parse_target_version(target, "fixture") if target else 12
    root = case.path if case.path.is_dir() else case.path.parent
    return Settings(build_selection(codes, codes), minor, platform, root)


def run_case(case: Case, limits: Limits = DEFAULT_LIMITS) -> tuple[set[Key], set[Key], list[Finding]]:
    """Return (expected, actual, findings), restricted to implemented rule codes."""
    result = lint_paths(case.files, settings_for(case), limits=limits)
    assert not result.internal_errors, result.internal_errors
    implemented = implemented_codes()
    expected = {k for k in case.expected() if k[2] in implemented}
    names = {str(f): case.name_of(f) for f in case.files}
    actual = {(_name(names.get(f.site.path, f.site.path), f.site.cell), f.site.row, f.code)
              for f in result.findings}
    return expected, actual, result.findings


def _name(name: str, cell: int | None) -> str:
    return name if cell is None else f"{name}:cell {cell}"


def _source(cell: dict[str, object]) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def all_cases() -> list[Case]:
    cases = [Case(p) for p in sorted((FIXTURES / "seeds").glob("*.py"))]
    cases += [Case(p) for p in sorted((FIXTURES / "notebooks").glob("*.ipynb"))]
    cases += [Case(p) for p in sorted((FIXTURES / "cases").rglob("*.py"))]
    cases += [Case(p) for p in sorted((FIXTURES / "projects").iterdir()) if p.is_dir()]
    return cases


def accuracy() -> None:
    """Print true/false positives and negatives per rule code over all fixtures."""
    stats: dict[str, list[int]] = {}
    misses: list[str] = []
    for case in all_cases():
        expected, actual, _ = run_case(case)
        for key in case.known_misses():  # known false negatives
            stats.setdefault(key[2], [0, 0, 0])[2] += 1
            misses.append(f"FN (known) {case.path.relative_to(ROOT)}:{key[0]}:{key[1]} {key[2]}")
        for key in expected | actual:
            row = stats.setdefault(key[2], [0, 0, 0])
            if key in expected and key in actual:
                row[0] += 1
            elif key in actual:
                row[1] += 1
                misses.append(f"FP {case.path.relative_to(ROOT)}:{key[0]}:{key[1]} {key[2]}")
            else:
                row[2] += 1
                misses.append(f"FN {case.path.relative_to(ROOT)}:{key[0]}:{key[1]} {key[2]}")
    print(f"{'code':6} {'TP':>4} {'FP':>4} {'FN':>4} {'precision':>10} {'recall':>7}")
    for code in sorted(stats):
        tp, fp, fn = stats[code]
        precision = tp / (tp + fp) if tp + fp else 1.0
        recall = tp / (tp + fn) if tp + fn else 1.0
        print(f"{code:6} {tp:4} {fp:4} {fn:4} {precision:10.2f} {recall:7.2f}")
    print("\n".join(misses))


if __name__ == "__main__":
    argparse.ArgumentParser(description=accuracy.__doc__).parse_args()
    accuracy()
