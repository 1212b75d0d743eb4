"""Fixtures shared by the lint tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.lint.test_cli import BAD


@pytest.fixture
def bad_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project for Python 3.10 and later holding ``bad.py`` (BAD: one GD101, at
    cli_run.FINDING), made the current folder."""
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\nrequires-python = ">=3.10"\n')
    (tmp_path / "bad.py").write_text(BAD)
    monkeypatch.chdir(tmp_path)
    return tmp_path
