"""``[tool.gpudoctor]``: keys, precedence (command line > pyproject > defaults), errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpudoctor.cli import main
from tests.lint.test_cli import BAD, GUARDED


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
    (project / "guarded.py").write_text(GUARDED)
    _config(project, 'platform = "darwin"')
    assert main(["lint", "bad.py"]) == 0
    _config(project, 'target-version = "py314"')
    assert main(["lint", "guarded.py"]) == 0
    assert main(["lint", "--target-version", "py312", "guarded.py"]) == 1


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


def test_a_pyproject_that_is_not_utf8_is_named_not_a_traceback(project: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    (project / "pyproject.toml").write_bytes(b'[project]\nname = "x"\nauthors = [{name = "Ren\xe9"}]\n')
    assert main(["lint", "bad.py"]) == 2
    err = capsys.readouterr().err
    assert "pyproject.toml: it is not UTF-8 text" in err and "Traceback" not in err


def test_a_byte_order_mark_before_the_first_key_is_accepted(project: Path) -> None:
    (project / "pyproject.toml").write_bytes(b'\xef\xbb\xbf[tool.gpudoctor]\nignore = ["GD101"]\n')
    assert main(["lint", "bad.py"]) == 0


def test_a_pyproject_without_a_gpudoctor_table_is_skipped(project: Path) -> None:
    """As ruff does: a nested package's pyproject.toml that does not configure gpudoctor does
    not hide the repository's configuration."""
    _config(project, 'ignore = ["GD101"]')
    nested = project / "services" / "api"
    nested.mkdir(parents=True)
    (nested / "pyproject.toml").write_text('[project]\nname = "api"\n')
    (nested / "worker.py").write_text(BAD)
    assert main(["lint", "services/api/worker.py"]) == 0
    assert main(["lint", "services/api/worker.py", "bad.py"]) == 0


def test_the_configuration_does_not_depend_on_the_order_of_the_paths(project: Path) -> None:
    _config(project, 'ignore = ["GD101"]')
    (project / "src").mkdir()
    (project / "src" / "pyproject.toml").write_text('[project]\nname = "inner"\n\n[tool.gpudoctor]\n')
    (project / "src" / "a.py").write_text(BAD)
    # The folder holding both paths is the project's: its configuration applies to both.
    assert main(["lint", "bad.py", "src/a.py"]) == main(["lint", "src/a.py", "bad.py"]) == 0
    assert main(["lint", "src/a.py"]) == 1  # alone, the nearest configuration is src's own


def test_a_monorepo_package_keeps_its_root_and_python_under_the_repository_configuration(
        project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The configuration is the repository's; the package's own pyproject.toml (no table)
    still says where its imports resolve from (a src layout) and which Python it targets."""
    _config(project, 'per-file-ignores = { "packages/foo/src/foo/legacy.py" = ["GD1"] }')
    package = project / "packages" / "foo"
    (package / "src" / "foo").mkdir(parents=True)
    (package / "pyproject.toml").write_text('[project]\nname = "foo"\nrequires-python = ">=3.12"\n')
    (package / "src" / "foo" / "__init__.py").write_text("")
    (package / "src" / "foo" / "gpu.py").write_text("import cupy as cp\n\ndef init():\n    cp.cuda.Device(0).use()\n")
    train = ("import multiprocessing as mp\nimport cupy as cp\nfrom foo import gpu\n\n\n"
             "def work(i):\n    return float(cp.sum(cp.arange(i)))\n\n\n"
             "if __name__ == '__main__':\n    gpu.init()\n    with mp.Pool(2) as pool:\n"
             "        pool.map(work, range(3))\n")
    (package / "src" / "foo" / "train.py").write_text(train)
    (package / "src" / "foo" / "legacy.py").write_text(train)
    monkeypatch.chdir(package)
    assert main(["lint", "--show-settings", "."]) == 0
    out = capsys.readouterr().out
    assert f"configuration: {project.resolve() / 'pyproject.toml'}" in out
    assert f"project root: {package.resolve()}" in out and "Python 3.12" in out
    assert main(["lint", "--no-cache", "."]) == 1
    out = capsys.readouterr().out
    assert "train.py:12:10: GD101" in out and "(cupy.cuda.Device.use, gpu.py:4)" in out
    assert "legacy.py" not in out  # the repository's per-file-ignores, relative to its pyproject.toml
