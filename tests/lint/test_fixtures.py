"""Every fixture's written expectations match what the linter reports, exactly.

Expectations for rules that are not implemented yet are ignored (see expectations.py).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpudoctor.lint.limits import DEFAULT_LIMITS
from tests.lint.expectations import FIXTURES, Case, all_cases, run_case

CASES = all_cases()


@pytest.mark.parametrize("parsing", ["as-run", "bodies-apart"])
@pytest.mark.parametrize("case", CASES, ids=[str(c.path.relative_to(FIXTURES)) for c in CASES])
def test_fixture_expectations(case: Case, parsing: str) -> None:
    """``bodies-apart``: every file is parsed with its function bodies left out until
    needed, as long files are (most fixtures are short enough to be parsed whole)."""
    limits = replace(DEFAULT_LIMITS, elide_min_chars=0) if parsing == "bodies-apart" else DEFAULT_LIMITS
    expected, actual, findings = run_case(case, limits)
    missing = sorted(expected - actual)
    unexpected = sorted(actual - expected)
    detail = "\n".join(f"{f.site.path}:{f.site.row}: {f.code} {f.message}" for f in findings)
    assert not missing and not unexpected, f"missing {missing}, unexpected {unexpected}\n{detail}"
    found = sorted(case.known_misses() & actual)
    assert not found, f"known misses now reported, change todoruleid to ruleid: {found}"


def test_fixture_corpus_is_substantial() -> None:
    cases = [c for c in CASES if c.path.parent.parent.name == "cases"]
    silent = [c for c in cases if not c.expected()]
    frameworks = {c.path.parent.name for c in cases}
    assert len(cases) >= 40
    assert len(silent) * 3 >= len(cases), "about half the cases must be correct programs"
    assert {"tensorflow", "cupy", "torch", "jax", "numba", "pycuda"} <= frameworks


def test_seed_promises_hold() -> None:
    """The findings the seed documents' own examples must get (their "fixes" included)."""
    promised = {
        "seed000_ex2.py": {"GD101"}, "seed000_ex3.py": {"GD105"},
        "seed001_ex1.py": {"GD101", "GD201"}, "seed001_ex3.py": {"GD101", "GD201"},
    }
    for name, codes in promised.items():
        _, actual, _ = run_case(Case(FIXTURES / "seeds" / name))
        assert codes <= {code for _, _, code in actual}, name
    for name in ("seed002_ex1.py", "seed002_ex2.py", "seed002_ex3.py", "seed003_ex1.py",
                 "seed003_ex2.py"):
        _, actual, _ = run_case(Case(FIXTURES / "seeds" / name))
        assert actual == set(), name
