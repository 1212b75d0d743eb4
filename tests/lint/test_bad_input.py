"""Bad input to ``gpudoctor lint``: one clear line, nothing lost, never a hang or a traceback.

Named pipes, devices, huge files, file names that are not UTF-8 or hold a newline,
.gitignore lines git accepts and pathspec does not, bad exclude patterns, folders that
cannot be read, and symbolic links out of the project.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpudoctor.cli import main
from tests.lint.cli_run import FINDING, lint_main
from tests.lint.test_cli import BAD

# -- named pipes, devices, huge files -----------------------------------------------------

@pytest.mark.timeout(60)
def test_a_named_pipe_in_a_walked_folder_is_passed_over(bad_project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    os.mkfifo(bad_project / "pipe.py")
    code, out, err = lint_main(capsys, ".")
    assert code == 1 and f"bad.py{FINDING}" in out
    assert "pipe.py" not in out + err  # as git, which never tracks one


@pytest.mark.timeout(60)
def test_a_named_pipe_named_on_the_command_line_is_an_error_and_the_rest_is_linted(
        bad_project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    os.mkfifo(bad_project / "pipe.py")
    code, out, err = lint_main(capsys, "pipe.py", "bad.py")
    assert code == 2 and f"bad.py{FINDING}" in out
    assert err.count("\n") == 1 and "gpudoctor: error: pipe.py: a named pipe, not a regular file\n" in err


@pytest.mark.timeout(60)
def test_a_named_pipe_in_place_of_pyproject_is_an_error_naming_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    os.mkfifo(tmp_path / "pyproject.toml")
    (tmp_path / "bad.py").write_text(BAD)
    monkeypatch.chdir(tmp_path)
    code, _, err = lint_main(capsys, "bad.py")
    assert code == 2 and f"cannot read {tmp_path / 'pyproject.toml'}: a named pipe, not a regular file" in err


def _lint_with_bounded_memory(folder: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """Run the command line in a process that cannot take more than 2 GiB: reading
    /dev/zero must end in a failure of this test, not in the machine running out of memory."""
    import resource

    def bound() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))

    return subprocess.run([sys.executable, "-m", "gpudoctor", "lint", "--no-cache", "--jobs", "1", *argv],
                          cwd=folder, capture_output=True, text=True, timeout=60, preexec_fn=bound)


@pytest.mark.timeout(90)
def test_a_link_to_dev_zero_is_not_read(bad_project: Path) -> None:
    if not os.path.exists("/dev/zero"):
        pytest.skip("no /dev/zero here")
    (bad_project / "zero.py").symlink_to("/dev/zero")
    walked = _lint_with_bounded_memory(bad_project, ".")
    assert walked.returncode == 1 and f"bad.py{FINDING}" in walked.stdout
    assert "zero.py" not in walked.stdout + walked.stderr and "Traceback" not in walked.stderr
    named = _lint_with_bounded_memory(bad_project, "zero.py", "bad.py")
    assert named.returncode == 2 and f"bad.py{FINDING}" in named.stdout
    assert "gpudoctor: error: zero.py: a device, not a regular file" in named.stderr
    assert "Traceback" not in named.stderr


def test_a_file_larger_than_the_limit_is_reported_not_read(bad_project: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    with open(bad_project / "huge.py", "wb") as stream:  # sparse: costs no disk
        stream.write(b"import multiprocessing\n")
        stream.truncate(17 * 1024 * 1024)
    code, out, _ = lint_main(capsys, ".")
    assert code == 1 and "huge.py:1:1: GD000 cannot read file: larger than 16 MiB (17 MiB)" in out


@pytest.mark.timeout(60)
def test_a_file_swapped_for_a_pipe_after_it_was_found_is_a_finding(tmp_path: Path) -> None:
    # What discovery found can change before it is read: the reading itself never blocks.
    from gpudoctor.lint.frontend.reading import ParseFailure, read_bytes

    os.mkfifo(tmp_path / "late.py")
    failure = read_bytes(tmp_path / "late.py")
    assert isinstance(failure, ParseFailure) and failure.message == "cannot read file: a named pipe, not a regular file"


# -- file names ----------------------------------------------------------------------------

def _create(folder: Path, name: bytes, text: str) -> None:
    fd = os.open(os.fsencode(folder) + b"/" + name, os.O_CREAT | os.O_WRONLY, 0o644)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def test_a_file_name_that_is_not_utf8_is_linted_and_shown_escaped(bad_project: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    _create(bad_project, b"caf\xe9.py", BAD)
    code, out, _ = lint_main(capsys, ".")
    assert code == 1 and f"caf\\xe9.py{FINDING}" in out and f"bad.py{FINDING}" in out
    code, out, _ = lint_main(capsys, "--output-format", "json", ".")
    assert code == 1 and os.fsdecode(b"caf\xe9.py") in {f["filename"] for f in json.loads(out)}  # the exact name
    for fmt in ("full", "github", "sarif"):
        assert lint_main(capsys, "--output-format", fmt, ".")[0] == 1
    assert main(["lint", "--cache-dir", str(bad_project / "cache"), "."]) == 1  # the cache keeps it too
    assert main(["lint", "--cache-dir", str(bad_project / "cache"), "."]) == 1
    assert f"caf\\xe9.py{FINDING}" in capsys.readouterr().out


@pytest.mark.parametrize("fmt", ["concise", "full", "github"])
def test_a_newline_in_a_file_name_does_not_break_the_lines(bad_project: Path, capsys: pytest.CaptureFixture[str],
                                                           fmt: str) -> None:
    (bad_project / "evil\nbad.py:1:1: GD999 forged.py").write_text(BAD)
    code, out, _ = lint_main(capsys, "--output-format", fmt, ".")
    assert code == 1 and not any(line.startswith("bad.py:1:1") for line in out.splitlines())  # nothing forged
    if fmt == "concise":
        lines = out.splitlines()
        assert lines[:3] == [f"bad.py{FINDING}" + lines[0].split(" GD101 ", 1)[1],
                             f"evil\\nbad.py:1:1: GD999 forged.py{FINDING}" + lines[0].split(" GD101 ", 1)[1],
                             "Found 2 findings."]
    elif fmt == "github":
        assert out.count("\n") == 2 and "file=evil%0Abad.py%3A1%3A1%3A GD999 forged.py," in out
    else:
        assert "  --> evil\\nbad.py:1:1: GD999 forged.py:10:10\n" in out


def test_show_files_lists_one_file_a_line(bad_project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (bad_project / "two\nlines.py").write_text("x = 1\n")
    assert main(["lint", "--show-files", "."]) == 0
    assert capsys.readouterr().out.splitlines() == ["bad.py", "two\\nlines.py"]


# -- .gitignore and exclude patterns ---------------------------------------------------------

@pytest.mark.parametrize("line", ["!", "\\", "**/\\"])
def test_a_gitignore_line_git_accepts_is_accepted(bad_project: Path, capsys: pytest.CaptureFixture[str],
                                                  line: str) -> None:
    (bad_project / "skipped.py").write_text(BAD)
    (bad_project / "sub").mkdir()
    (bad_project / "sub" / "deeper.py").write_text(BAD)
    (bad_project / "sub" / ".gitignore").write_text(f"{line}\n")
    (bad_project / ".gitignore").write_text(f"{line}\nskipped.py\n")  # the other lines still count, as in git
    assert main(["lint", "--show-files", "."]) == 0
    captured = capsys.readouterr()
    assert captured.out.splitlines() == ["bad.py", "sub/deeper.py"] and "Traceback" not in captured.err
    assert main(["lint", "--show-files", "sub"]) == 0  # read as a folder above a named one too
    assert capsys.readouterr().out.splitlines() == ["sub/deeper.py"]


@pytest.mark.parametrize("pattern", ["!", "\\", "**/\\"])
@pytest.mark.parametrize("key", ["exclude", "extend-exclude"])
def test_a_bad_exclude_pattern_in_the_configuration_names_the_file_and_key(
        bad_project: Path, capsys: pytest.CaptureFixture[str], pattern: str, key: str) -> None:
    (bad_project / "pyproject.toml").write_text(f"[tool.gpudoctor]\n{key} = ['{pattern}']\n")  # a TOML literal string
    code, out, err = lint_main(capsys, ".")
    assert code == 2 and out == ""
    assert f"gpudoctor: error: invalid pattern '{pattern}' in key '{key}' of {bad_project / 'pyproject.toml'}" in err


def test_a_bad_per_file_ignores_pattern_names_the_file_and_key(bad_project: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    (bad_project / "pyproject.toml").write_text("[tool.gpudoctor.per-file-ignores]\n'gen\\' = ['GD101']\n")
    code, _, err = lint_main(capsys, ".")
    assert code == 2 and "invalid pattern 'gen\\' in key 'per-file-ignores' of" in err
    assert "ends in a backslash that escapes nothing" in err


@pytest.mark.parametrize("pattern", ["!", "\\", "**/\\"])
def test_a_bad_extend_exclude_option_is_a_usage_error(bad_project: Path, capsys: pytest.CaptureFixture[str],
                                                      pattern: str) -> None:
    code, out, err = lint_main(capsys, "--extend-exclude", pattern, ".")
    assert code == 2 and out == ""
    assert err == f"gpudoctor: error: invalid pattern '{pattern}' in --extend-exclude: " + err.split(": ", 3)[3]


# -- folders that cannot be read ---------------------------------------------------------------

@pytest.fixture
def locked(bad_project: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder ``locked`` that cannot be listed. The tests run as root, who can list a
    folder of mode 000, so the refusal is made where the listing is asked for."""
    folder = bad_project / "locked"
    folder.mkdir()
    (folder / "hidden.py").write_text(BAD)
    scandir = os.scandir

    def refusing(path: str | os.PathLike[str] = ".") -> object:
        if Path(os.path.abspath(path)) == folder:
            raise PermissionError(errno.EACCES, "Permission denied", os.fspath(path))
        return scandir(path)

    monkeypatch.setattr(os, "scandir", refusing)
    return folder


def test_a_folder_that_cannot_be_read_met_in_a_walk_is_said_and_the_rest_linted(
        locked: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = lint_main(capsys, ".")
    assert code == 1 and f"bad.py{FINDING}" in out
    assert "gpudoctor: warning: cannot read folder locked: Permission denied\n" in err


def test_a_folder_that_cannot_be_read_named_is_an_error_and_the_rest_linted(
        locked: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = lint_main(capsys, "locked", "bad.py")
    assert code == 2 and f"bad.py{FINDING}" in out
    assert "gpudoctor: error: cannot read folder locked: Permission denied\n" in err


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0,
                    reason="root reads a folder of mode 000 (the test above fakes the refusal instead)")
def test_a_folder_of_mode_000(bad_project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = bad_project / "locked"
    folder.mkdir()
    (folder / "hidden.py").write_text(BAD)
    folder.chmod(0)
    try:
        code, out, err = lint_main(capsys, ".")
        assert code == 1 and "gpudoctor: warning: cannot read folder locked: Permission denied" in err
        code, out, err = lint_main(capsys, "locked", "bad.py")
        assert code == 2 and "gpudoctor: error: cannot read folder locked: Permission denied" in err
        assert f"bad.py{FINDING}" in out
    finally:
        folder.chmod(0o755)


# -- symbolic links out of the project -----------------------------------------------------------

@pytest.fixture
def linked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project with ``outside.py``, a link to a file of another folder, and ``alias.py``,
    a link to one of its own files."""
    project = tmp_path / "project"
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "theirs.py").write_text(BAD)
    project.mkdir()
    (project / "pyproject.toml").write_text('[project]\nname = "x"\n')
    (project / "ours.py").write_text(BAD)
    (project / "outside.py").symlink_to(tmp_path / "elsewhere" / "theirs.py")
    (project / "alias.py").symlink_to("ours.py")
    monkeypatch.chdir(project)
    return project


def test_a_walk_does_not_follow_a_link_out_of_the_project(linked: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lint", "--show-files", "."]) == 0
    assert capsys.readouterr().out.splitlines() == ["alias.py", "ours.py"]


def test_fix_does_not_write_through_a_link_out_of_the_project(linked: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    theirs = linked.parent / "elsewhere" / "theirs.py"
    code, out, err = lint_main(capsys, "--fix", "--unsafe-fixes", "outside.py")
    assert code == 1 and f"outside.py{FINDING}" in out  # linted, as it was named: not fixed
    assert "gpudoctor: not fixing outside.py: it is a symbolic link to a file outside the project\n" in err
    assert theirs.read_text() == BAD and (linked / "outside.py").is_symlink()
    code, out, err = lint_main(capsys, "--diff", "--unsafe-fixes", "outside.py")
    assert code == 0 and out == "" and "not fixing outside.py" in err


def test_fix_writes_through_a_link_inside_the_project_keeping_the_link(linked: Path) -> None:
    assert main(["lint", "--no-cache", "--fix", "--unsafe-fixes", "alias.py"]) == 0  # fixed: nothing left
    assert (linked / "alias.py").is_symlink() and 'get_context("spawn")' in (linked / "ours.py").read_text()


def test_a_file_that_cannot_be_written_is_said_not_fixed(bad_project: Path, monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    import tempfile

    def refuse(*args: object, **kwargs: object) -> tuple[int, str]:
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(tempfile, "mkstemp", refuse)
    code, out, err = lint_main(capsys, "--fix", "--unsafe-fixes", "bad.py")
    assert code == 1 and f"bad.py{FINDING}" in out and (bad_project / "bad.py").read_text() == BAD
    assert "gpudoctor: not fixing bad.py: cannot write it: Permission denied\n" in err and "Fixed" not in err
