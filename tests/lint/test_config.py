"""``[tool.gpudoctor]``: keys, precedence (command line > pyproject > defaults), errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpudoctor.cli import main
from tests.lint.test_cli import BAD


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "bad.py").write_text(BAD)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _config(project: Path, body: str) -> None:
    (project / "pyproject.toml").write_text(f'[project]\nname = "x"\n\n[tool.gpudoctor]\n{body}\n')


def test_ignore_in_pyproject(project: Path) -> None:
    _config(project, 'ignore = ["GD101"]')
    assert main(["lint", "bad.py"]) == 0


def test_command_line_select_beats_pyproject_ignore(project: Path) -> None:
    _config(project, 'ignore = ["GD101"]')
    assert main(["lint", "--select", "GD101", "bad.py"]) == 1


def test_select_and_extend_select(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _config(project, 'select = ["GD2"]\nextend-select = ["GD101"]')
    assert main(["lint", "bad.py"]) == 1
    assert "GD101" in capsys.readouterr().out


def test_target_version_and_platform_from_pyproject(project: Path) -> None:
    _config(project, 'platform = "darwin"')
    assert main(["lint", "bad.py"]) == 0
    _config(project, 'target-version = "py314"')
    assert main(["lint", "bad.py"]) == 0
    assert main(["lint", "--target-version", "py312", "bad.py"]) == 1


def test_per_file_ignores(project: Path) -> None:
    (project / "legacy").mkdir()
    (project / "legacy" / "old.py").write_text(BAD)
    _config(project, '[tool.gpudoctor.per-file-ignores]\n"legacy/*.py" = ["GD1"]')
    assert main(["lint", "legacy"]) == 0
    assert main(["lint", "bad.py"]) == 1


def test_exclude_and_force_exclude(project: Path) -> None:
    (project / "gen").mkdir()
    (project / "gen" / "made.py").write_text(BAD)
    (project / "bad.py").write_text("print('fine')\n")
    _config(project, 'exclude = ["gen/"]')
    assert main(["lint", "."]) == 0
    assert main(["lint", "gen/made.py"]) == 1  # named explicitly: linted, as ruff does
    assert main(["lint", "--force-exclude", "gen/made.py"]) == 0


@pytest.mark.parametrize(("body", "message"), [
    ('selct = ["GD1"]', "unknown key 'selct' in "),
    ('target-version = "py27"', "invalid target-version 'py27' in "),
    ('platform = "beos"', "invalid platform 'beos' in "),
    ('ignore = "GD101"', "key 'ignore' of "),
    ('select = ["XX9"]', "unknown rule code or prefix 'XX9' in key 'select' of "),
    ('per-file-ignores = ["a"]', "key 'per-file-ignores' of "),
])
def test_bad_values_name_file_and_key(project: Path, capsys: pytest.CaptureFixture[str],
                                      body: str, message: str) -> None:
    _config(project, body)
    assert main(["lint", "bad.py"]) == 2
    err = capsys.readouterr().err
    assert message in err and "pyproject.toml [tool.gpudoctor]" in err
    assert "Traceback" not in err
