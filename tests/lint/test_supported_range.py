"""The Pythons a project supports, not only the oldest: a start that leaves its method to
the default is judged where a later supported Python changes that default (forkserver on
Linux from 3.14), as a warning that names it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpudoctor.cli import main
from gpudoctor.knowledge.processes import Target
from gpudoctor.lint.settings import newest_from_requires_python

AT_IMPORT = """\
import multiprocessing as mp


def work(x):
    return x


pool = mp.Pool(2)
print(pool.map(work, [1, 2]))
"""

NESTED_INITIALIZER = """\
import multiprocessing as mp


def work(x):
    return x


def main():
    def init():
        pass

    with mp.Pool(2, initializer=init) as pool:
        pool.map(work, [1])


if __name__ == "__main__":
    main()
"""


@pytest.mark.parametrize(("spec", "newest"), [
    (">=3.10", None), ("~=3.10", None), (">=3.9,<4", None), ("<3.14", 13), ("<3.14.0", 13), ("<3.13.5", 13),
    ("<=3.12", 12), ("==3.12.*", 12), ("~=3.12.1", 12), (">=3.10, <3.13", 12), (">= 3.11 , <= 3.12", 12),
    ("<3.12,<3.13", 11), ("", None), ("not a specifier", None),
])
def test_the_newest_python_a_requires_python_admits(spec: str, newest: int | None) -> None:
    assert newest_from_requires_python(spec) == newest


def test_a_later_default_is_the_first_supported_minor_that_changes_it() -> None:
    assert (Target(11, "linux", 14).later_minor, Target(11, "linux", 14).later_method) == (14, "forkserver")
    assert Target(11, "linux", 14).later_preloads_main
    assert Target(11, "linux", 13).later_minor is None  # (fork up to 3.13)
    assert Target(14, "linux", 14).later_minor is None  # (the oldest is 3.14 itself)
    assert Target(11, "linux").later_minor is None  # (one Python)
    assert Target(11, "darwin", 14).later_minor is None  # (spawn on every one)


def _lint(root: Path, source: str, requires: str | None, capsys: pytest.CaptureFixture[str],
          *options: str) -> list[tuple[str, str, str]]:
    (root / "prog.py").write_text(source)
    if requires is not None:
        (root / "pyproject.toml").write_text(f'[project]\nname = "x"\nrequires-python = "{requires}"\n')
    main(["lint", "--no-cache", "--output-format", "json", *options, str(root / "prog.py")])
    return [(f["code"], f["severity"], f["message"]) for f in json.loads(capsys.readouterr().out)]


@pytest.mark.parametrize(("source", "code"), [(AT_IMPORT, "GD104"), (NESTED_INITIALIZER, "GD108")])
def test_a_default_that_becomes_forkserver_on_314_is_a_warning_naming_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], source: str, code: str) -> None:
    [(found, severity, message)] = _lint(tmp_path, source, ">=3.10", capsys)
    assert (found, severity) == (code, "warning")
    assert "the default start method" in message and "forkserver on Linux from Python 3.14 (fork up to 3.13)" in message


@pytest.mark.parametrize("source", [AT_IMPORT, NESTED_INITIALIZER])
def test_a_project_that_stops_before_314_or_a_chosen_method_gets_none(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], source: str) -> None:
    assert _lint(tmp_path, source, ">=3.10,<3.14", capsys) == []
    chosen = source.replace("mp.Pool(", 'mp.get_context("fork").Pool(')
    assert _lint(tmp_path, chosen, ">=3.10", capsys) == []


@pytest.mark.parametrize(("source", "code"), [(AT_IMPORT, "GD104"), (NESTED_INITIALIZER, "GD108")])
def test_where_the_oldest_already_has_that_default_it_stays_an_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], source: str, code: str) -> None:
    [(found, severity, message)] = _lint(tmp_path, source, ">=3.14", capsys)
    assert (found, severity) == (code, "error") and "Python 3.14 (fork" not in message
    [(found, severity, _)] = _lint(tmp_path, source, ">=3.10", capsys, "--platform", "darwin")
    assert (found, severity) == (code, "error")


def test_show_settings_names_the_later_python(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\nrequires-python = ">=3.11"\n')
    monkeypatch.chdir(tmp_path)
    assert main(["lint", "--show-settings", "."]) == 0
    assert ("target: Python 3.11 on linux (default start method: fork); also Python 3.14 (default start "
            "method: forkserver), supported up to 3.14") in capsys.readouterr().out


@pytest.mark.parametrize(("value", "said"), [
    ("3.10", "3.1 is a float, not a version specifier string"), ('[">=3.10"]', "is a list"),
    ('">=banana"', "names no Python 3 version gpudoctor can read"), ('">=3.13,<3.11"', "admits no Python"),
])
def test_a_requires_python_that_cannot_be_read_is_said_not_ignored(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str, said: str) -> None:
    # It decides the Pythons judged: a value gpudoctor cannot read changes the findings.
    (tmp_path / "pyproject.toml").write_text(f'[project]\nname = "x"\nrequires-python = {value}\n')
    (tmp_path / "prog.py").write_text("x = 1\n")
    assert main(["lint", "--no-cache", str(tmp_path / "prog.py")]) == 0
    err = capsys.readouterr().err
    assert err.startswith("gpudoctor: warning: requires-python of ") and said in err and "judging Python 3." in err
    assert main(["lint", "--no-cache", "--silent", str(tmp_path / "prog.py")]) == 0
    assert capsys.readouterr().err == ""
