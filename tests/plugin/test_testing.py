"""``gpudoctor.testing.assert_lint_clean``: the linter as an assertion in a project's own suite."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpudoctor.testing import assert_lint_clean

UNSAFE = """\
import multiprocessing as mp

import cupy as cp


def work(i):
    return float(cp.arange(i).sum())


if __name__ == "__main__":
    cp.arange(10)
    with mp.get_context("fork").Pool(2) as pool:
        pool.map(work, range(4))
"""

SAFE = UNSAFE.replace('get_context("fork")', 'get_context("spawn")')


def test_clean_code_passes(tmp_path: Path) -> None:
    (tmp_path / "safe.py").write_text(SAFE)
    assert_lint_clean(tmp_path / "safe.py")
    assert_lint_clean([tmp_path])


def test_findings_are_listed_in_the_concise_format(tmp_path: Path) -> None:
    (tmp_path / "unsafe.py").write_text(UNSAFE)
    with pytest.raises(AssertionError) as raised:
        assert_lint_clean([str(tmp_path)])
    message = str(raised.value)
    assert message.startswith("gpudoctor lint found problems:\n")
    assert f"{tmp_path / 'unsafe.py'}:12:10: GD101 " in message
    assert message.rstrip().endswith("Found 1 finding.") or "Found" in message.splitlines()[-1]


def test_select_narrows_the_rules(tmp_path: Path) -> None:
    (tmp_path / "unsafe.py").write_text(UNSAFE)
    assert_lint_clean(tmp_path, select=["GD104"])
    with pytest.raises(AssertionError, match="GD101"):
        assert_lint_clean(tmp_path, select=["GD1"])
