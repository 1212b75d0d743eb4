"""The hostile-input suite for the lint side: every input or circumstance that once broke
``gpudoctor lint`` (or the code it shares with the other faces), kept as a test. It grows
with every finding.

Each test asserts the same contract: one clear line (or a GD000 finding for a bad source
file), the documented exit code (0 clean, 1 findings, 2 a usage or configuration error, a
signal's 128 + N), nothing changed that the user did not ask to change, nothing left in
the source tree or the process table, and never a traceback. Tests that need a process of
their own (a deleted working folder, a signal) run the command line in one, and wait on
what they observe, never on a fixed time.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from gpudoctor.cli import main
from gpudoctor.errors import GpudoctorError
from tests.lint.cli_run import FINDING, lint_main
from tests.lint.test_cli import BAD
from tests.lint.test_jobs import _gone, _lint_in_background, _workers_seen

BIG_INTEGER = "9" * 5001  # past Python's limit on converting digits to an int (4300)
SCRIPT = Path(sys.executable).with_name("gpudoctor")  # the console script, as a user runs it


def _snapshot(folder: Path) -> dict[str, tuple[bytes, int, int, int]]:
    """Every file under ``folder``: its bytes, mode, owner and group (what "nothing
    changed" compares)."""
    out = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file() and not path.is_symlink():
            info = path.stat()
            out[str(path.relative_to(folder))] = (path.read_bytes(), stat.S_IMODE(info.st_mode), info.st_uid,
                                                  info.st_gid)
    return out


def _temporary_files(folder: Path) -> list[Path]:
    return [path for path in folder.rglob("*.tmp")]


# -- a working folder deleted under gpudoctor -----------------------------------------------

def _in_a_deleted_folder(tmp_path: Path) -> Callable[[], None]:
    """For ``preexec_fn``: the child runs in a folder that no longer exists (as after
    ``mkdir d && cd d && rmdir ../d``)."""
    gone = tmp_path / "gone"

    def enter() -> None:
        os.mkdir(gone)
        os.chdir(gone)
        os.rmdir(gone)

    return enter


def _run_in_a_deleted_folder(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*argv], capture_output=True, text=True, timeout=300,
                          preexec_fn=_in_a_deleted_folder(tmp_path))


def test_version_answers_in_a_deleted_working_folder(tmp_path: Path) -> None:
    done = _run_in_a_deleted_folder(tmp_path, str(SCRIPT), "--version")
    assert (done.returncode, done.stdout, done.stderr) == (0, "gpudoctor 0.1.0\n", "")


def test_absolute_paths_are_linted_in_a_deleted_working_folder(bad_project: Path, tmp_path: Path) -> None:
    done = _run_in_a_deleted_folder(tmp_path, str(SCRIPT), "lint", "--no-cache", str(bad_project))
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"{bad_project / 'bad.py'}{FINDING}" in done.stdout
    assert done.stderr == "" and "Traceback" not in done.stdout


def test_workers_start_in_a_deleted_working_folder(bad_project: Path, tmp_path: Path) -> None:
    """multiprocessing asks for the working folder to start each worker in: they are
    started from one that exists, and analyse the same."""
    for n in range(3):
        (bad_project / f"bad_{n}.py").write_text(BAD)
    code = ("import sys; from gpudoctor.lint import engine; engine.PARALLEL_MIN_BYTES = 0; "
            "from gpudoctor.cli import run; sys.exit(run())")
    done = _run_in_a_deleted_folder(tmp_path, sys.executable, "-c", code, "lint", "--no-cache", "-v", "--jobs", "2",
                                    str(bad_project))
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout.count(FINDING) == 4
    assert "in 2 worker processes" in done.stderr and "Traceback" not in done.stderr


def test_force_exclude_with_absolute_paths_in_a_deleted_working_folder(bad_project: Path, tmp_path: Path) -> None:
    done = _run_in_a_deleted_folder(tmp_path, str(SCRIPT), "lint", "--no-cache", "--force-exclude",
                                    str(bad_project / "bad.py"))
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"{bad_project / 'bad.py'}{FINDING}" in done.stdout and done.stderr == ""


@pytest.mark.parametrize("argv", [["lint"], ["lint", "bad.py"], ["lint", "--cache-dir", "cache", "/x/bad.py"]])
def test_a_relative_path_in_a_deleted_working_folder_is_one_line(tmp_path: Path, argv: list[str]) -> None:
    done = _run_in_a_deleted_folder(tmp_path, str(SCRIPT), *argv)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1
    assert done.stderr.startswith("gpudoctor: error: the working folder no longer exists")


# -- numbers and nesting Python's readers refuse -------------------------------------------

def _notebook(metadata: str) -> str:
    return ('{"nbformat": 4, "nbformat_minor": 5, "metadata": ' + metadata + ', "cells": '
            '[{"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": null, '
            '"source": "import os\\n"}]}')


@pytest.mark.parametrize("named", [["."], ["bad.py", "big.ipynb"], ["bad.py"]])
def test_a_notebook_holding_a_5001_digit_integer_is_gd000_and_the_rest_is_linted(
        bad_project: Path, capsys: pytest.CaptureFixture[str], named: list[str]) -> None:
    """Valid JSON, which Python's json cannot convert: a GD000 for that notebook when it is
    linted, nothing when it is only the project around a named file."""
    (bad_project / "big.ipynb").write_text(_notebook('{"n": ' + BIG_INTEGER + "}"))
    before = _snapshot(bad_project)
    code, out, err = lint_main(capsys, *named)
    assert code == 1 and f"bad.py{FINDING}" in out
    gd000 = ("big.ipynb:1:1: GD000 not read: its JSON holds an integer of more than 4300 digits, "
             "more than Python converts")
    assert (gd000 in out) == (named != ["bad.py"])
    assert err == ""
    assert _snapshot(bad_project) == before


_DIGITS = "it holds an integer of more than 4300 digits, more than Python converts"
_NESTED = "its arrays or tables are nested too deeply"
# Valid TOML that Python's reader cannot hold, and the reason the one line gives.
PYPROJECTS = {
    "integer-in-the-table": (f"[tool.gpudoctor]\nselect = ['GD1']\nx = {BIG_INTEGER}\n", _DIGITS),
    "integer-elsewhere": (f"[project]\nname = 'x'\n\n[tool.other]\nn = {BIG_INTEGER}\n\n[tool.gpudoctor]\n",
                          _DIGITS),
    "arrays-in-the-table": ("[tool.gpudoctor]\nselect = " + "[" * 5000 + "]" * 5000 + "\n", _NESTED),
    "tables-elsewhere": ("[project]\nname = 'x'\nv = " + "{a = " * 5000 + "}" * 5000 + "\n", _NESTED),
}


@pytest.mark.parametrize("case", sorted(PYPROJECTS))
def test_a_pyproject_python_cannot_hold_is_one_line_naming_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str], case: str) -> None:
    text, why = PYPROJECTS[case]
    (tmp_path / "pyproject.toml").write_text(text)
    (tmp_path / "bad.py").write_text(BAD)
    monkeypatch.chdir(tmp_path)
    before = _snapshot(tmp_path)
    code = main(["lint", "bad.py"])  # with the cache: nothing may be written either
    out, err = capsys.readouterr()
    assert (code, out, err) == (2, "", f"gpudoctor: error: cannot read {tmp_path / 'pyproject.toml'}: {why}\n")
    assert _snapshot(tmp_path) == before and not (tmp_path / ".gpudoctor_cache").exists()


@pytest.mark.parametrize("case", ["integer-elsewhere", "tables-elsewhere"])
def test_the_notebook_extension_reads_the_same_pyproject_and_says_it_in_one_line(tmp_path: Path, case: str) -> None:
    """``%gpudoctor`` and its cell hooks read the configuration through the same reader:
    a GpudoctorError, which they print as one line."""
    from gpudoctor.ipython import executed_cells

    (tmp_path / "pyproject.toml").write_text(PYPROJECTS[case][0])
    with pytest.raises(GpudoctorError, match=f"cannot read {tmp_path / 'pyproject.toml'}: "):
        executed_cells.settings(tmp_path / "kernel-1-executed-cells.ipynb")


# -- the workers, when gpudoctor is killed ---------------------------------------------------

@pytest.mark.parametrize("moment", ["as-workers-start", "while-analysing"])
def test_workers_say_nothing_when_gpudoctor_is_killed(tmp_path: Path, moment: str) -> None:
    """SIGKILL of ``gpudoctor lint -j2``: a worker being started reads half its start-up
    data, one at work finds its queues closed, and the resource tracker warns of leaked
    semaphores as it removes them. None of it may reach the terminal once the shell shows
    its prompt again; and every process of the run ends."""
    process = _lint_in_background(tmp_path, 200)
    _, tree = _workers_seen(process, started=moment == "while-analysing")
    os.kill(process.pid, signal.SIGKILL)
    # Read to the end: the end comes when no process of the run holds the output any more.
    out, err = process.communicate(timeout=120)
    assert process.returncode == -signal.SIGKILL
    assert not _gone(tree)  # the workers, the fork server and the resource tracker
    assert (out, err) == ("", "")


# -- what --fix writes ------------------------------------------------------------------------

def test_fix_leaves_a_read_only_file_as_it_is_and_says_so(bad_project: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    (bad_project / "bad.py").chmod(0o444)
    before = _snapshot(bad_project)
    code, out, err = lint_main(capsys, "--fix", "--unsafe-fixes", "bad.py")
    assert code == 1 and f"bad.py{FINDING}" in out  # the finding is still reported
    assert err == "gpudoctor: not fixing bad.py: it is read-only\n"
    assert _snapshot(bad_project) == before and not _temporary_files(bad_project)


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user takes root")
def test_fix_run_as_root_keeps_the_owner_group_and_mode(bad_project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = bad_project / "bad.py"
    os.chown(target, 12345, 12345)
    target.chmod(0o640)
    code, _, err = lint_main(capsys, "--fix", "--unsafe-fixes", "bad.py")
    assert code == 0 and err == "Fixed 1 finding in 1 file.\n"
    info = target.stat()
    assert (info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode)) == (12345, 12345, 0o640)
    assert 'get_context("spawn")' in target.read_text() and not _temporary_files(bad_project)


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user takes root")
def test_fix_writes_in_place_a_file_whose_owner_a_new_file_cannot_have(bad_project: Path,
                                                                       monkeypatch: pytest.MonkeyPatch,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """A user who is not root fixes another user's file (in a folder both can write): a
    new file renamed over it would be theirs, so the file itself is written. (Run as root,
    with the refusal a user meets.)"""
    target = bad_project / "bad.py"
    os.chown(target, 12345, 12345)
    target.chmod(0o664)
    before = target.stat()

    def refuse(fd: int, uid: int, gid: int) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "fchown", refuse)
    code, _, err = lint_main(capsys, "--fix", "--unsafe-fixes", "bad.py")
    assert code == 0 and err == "Fixed 1 finding in 1 file.\n"
    after = target.stat()
    assert (after.st_ino, after.st_uid, after.st_gid, after.st_mode) == (before.st_ino, 12345, 12345,
                                                                         before.st_mode)
    assert 'get_context("spawn")' in target.read_text() and not _temporary_files(bad_project)


# A run whose file replacement is interrupted at the worst moment: the signal arrives after
# the temporary file is written, before it is renamed over the file (a SIGTERM there once
# left ``.bad.py.<random>.tmp`` in the user's folder).
_SIGNAL_WHILE_WRITING = """
import os, signal, sys
real = os.replace
def replace(source, target, *args, **kwargs):
    if os.path.basename(target) == sys.argv[2]:
        os.kill(os.getpid(), getattr(signal, sys.argv[1]))
    return real(source, target, *args, **kwargs)
os.replace = replace
from gpudoctor.cli import main
sys.exit(main(sys.argv[3:]))
"""


@pytest.mark.parametrize(("signame", "status"), [("SIGTERM", -signal.SIGTERM), ("SIGINT", 130)])
@pytest.mark.parametrize("written", ["fixed file", "report"])
def test_a_signal_while_a_file_is_replaced_leaves_it_whole_and_no_temporary_file(
        bad_project: Path, signame: str, status: int, written: str) -> None:
    old = (bad_project / "bad.py").read_bytes()
    (bad_project / "report.txt").write_text("the last report\n")
    name, argv = (("bad.py", ["--fix", "--unsafe-fixes", "bad.py"]) if written == "fixed file"
                  else ("report.txt", ["-o", "report.txt", "bad.py"]))
    done = subprocess.run([sys.executable, "-c", _SIGNAL_WHILE_WRITING, signame, name, "lint", "--no-cache", *argv],
                          capture_output=True, text=True, timeout=300, cwd=bad_project)
    assert done.returncode == status, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert not _temporary_files(bad_project)
    # Held until the file was whole: the new text, never half of it.
    if written == "fixed file":
        assert (bad_project / "bad.py").read_bytes() != old
        assert 'get_context("spawn")' in (bad_project / "bad.py").read_text()
    else:
        assert f"bad.py{FINDING}" in (bad_project / "report.txt").read_text()
    if signame == "SIGINT":
        assert done.stderr.endswith("gpudoctor: interrupted\n")


# -- the cache's folder ---------------------------------------------------------------------------

@pytest.mark.parametrize("given", ["/", "/tmp/.."])
def test_the_root_of_the_file_system_is_refused_as_cache_folder(bad_project: Path, capsys: pytest.CaptureFixture[str],
                                                                given: str) -> None:
    existed = os.path.lexists("/.gpudoctor_cache")
    before = _snapshot(bad_project)
    try:
        code = main(["lint", "--cache-dir", given, "bad.py"])
    finally:  # a regression must not leave its folder in the root for the next run
        if not existed and (Path("/.gpudoctor_cache") / "CACHEDIR.TAG").is_file():
            shutil.rmtree("/.gpudoctor_cache")
            pytest.fail("--cache-dir / made /.gpudoctor_cache")
    out, err = capsys.readouterr()
    assert (code, out) == (2, "")
    assert err == (f"gpudoctor: error: --cache-dir {given}: the root of the file system is no place for a cache "
                   "(name a folder of its own, e.g. ~/.cache/gpudoctor)\n")
    assert os.path.lexists("/.gpudoctor_cache") == existed
    assert _snapshot(bad_project) == before


def test_json_output_of_a_hostile_notebook_names_it(bad_project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (bad_project / "big.ipynb").write_text(_notebook('{"n": ' + BIG_INTEGER + "}"))
    code, out, _ = lint_main(capsys, "--output-format", "json", "big.ipynb")
    assert code == 1
    [finding] = json.loads(out)
    assert (finding["code"], finding["filename"].endswith("big.ipynb")) == ("GD000", True)


# -- a second round: codecs, deep paths, endless stdin, unusable output, empty codes, bidi ---

@pytest.mark.parametrize("codec", ["undefined", "punycode"])
def test_a_coding_cookie_naming_no_text_codec_is_gd000(bad_project: Path, capsys: pytest.CaptureFixture[str],
                                                       codec: str) -> None:
    (bad_project / "junk.py").write_text(f"# coding: {codec}\nx = 1\n")
    code = main(["lint", "--no-cache", "--output-format", "concise", "."])
    out, err = capsys.readouterr()
    assert code == 1 and "Traceback" not in out + err
    assert f"junk.py:1:1: GD000 cannot read file as '{codec}'" in out and f"bad.py{FINDING}" in out


def test_a_path_hundreds_of_folders_deep_is_linted(bad_project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    deep = bad_project.joinpath(*["a"] * 500)
    deep.mkdir(parents=True)
    (deep / "m.py").write_text(BAD)
    code = main(["lint", "--no-cache", "--output-format", "concise", str(deep / "m.py")])
    out, err = capsys.readouterr()
    assert code == 1 and f"m.py{FINDING}" in out and "Traceback" not in out + err


def test_endless_standard_input_is_refused_at_the_size_a_file_may_have(bad_project: Path) -> None:
    endless = subprocess.Popen(["yes"], stdout=subprocess.PIPE)
    try:
        done = subprocess.run([str(SCRIPT), "lint", "-"], stdin=endless.stdout, capture_output=True, text=True,
                              timeout=300, cwd=bad_project)
    finally:
        endless.kill()
        endless.wait()
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == "gpudoctor: error: standard input holds more than 16 MiB, the most a file to lint may hold\n"


@pytest.mark.parametrize("argv", [["lint", "bad.py"], ["rule", "--all"], ["probe", "--no-scenarios", "--json"]])
def test_a_full_or_closed_standard_output_is_one_line_or_silence(bad_project: Path, argv: list[str]) -> None:
    with open("/dev/full", "w") as full:
        done = subprocess.run([str(SCRIPT), *argv], stdout=full, stderr=subprocess.PIPE, text=True, timeout=300,
                              cwd=bad_project)
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1] == "gpudoctor: error: cannot write the output: No space left on device"
    assert "Traceback" not in done.stderr
    closed = subprocess.run(f"{SCRIPT} {' '.join(argv)} >&-", shell=True, stderr=subprocess.PIPE, text=True,
                            timeout=300, cwd=bad_project)
    assert "Traceback" not in closed.stderr and closed.returncode in (0, 1)


def test_an_output_encoding_that_cannot_show_the_text_escapes_it(bad_project: Path) -> None:
    (bad_project / "café.py").write_text(BAD)
    done = subprocess.run([str(SCRIPT), "lint", "--no-cache", "--output-format", "full", "."], capture_output=True,
                          timeout=300, cwd=bad_project, env={**os.environ, "PYTHONIOENCODING": "ascii"})
    assert done.returncode == 1 and b"Traceback" not in done.stderr
    assert b"caf\\xe9.py" in done.stdout


@pytest.mark.parametrize("key", ["ignore", "select"])
def test_an_empty_rule_code_in_the_configuration_names_the_file_and_key(
        bad_project: Path, capsys: pytest.CaptureFixture[str], key: str) -> None:
    (bad_project / "pyproject.toml").write_text(f'[project]\nname = "x"\n[tool.gpudoctor]\n{key} = [""]\n')
    code = main(["lint", "--no-cache", "bad.py"])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err == (f"gpudoctor: error: unknown rule code or prefix '' in key '{key}' of "
                   f"{bad_project / 'pyproject.toml'} [tool.gpudoctor]\n")


def test_bidirectional_controls_in_a_file_name_are_escaped(bad_project: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    (bad_project / "evil\u202etxt.py").write_text(BAD)
    main(["lint", "--no-cache", "--output-format", "concise", "."])
    out, _ = capsys.readouterr()
    assert "evil\\u202etxt.py" in out and "\u202e" not in out


def test_an_and_chain_libcst_cannot_take_is_gd000_and_the_run_goes_on(bad_project: Path) -> None:
    """20,000 terms: valid Python that crashed libcst's parser (a segfault: no output, no
    findings for any file of the run)."""
    (bad_project / "chain.py").write_text("import multiprocessing as mp\nx = 1" + " and 1" * 20_000 + "\nmp.Pool(2)\n")
    done = subprocess.run([str(SCRIPT), "lint", "--no-cache", "--output-format", "concise", "."],
                          capture_output=True, text=True, timeout=300, cwd=bad_project)
    assert done.returncode == 1, done.stderr
    assert "chain.py:2:5: GD000 cannot parse: an 'and' chain of 20,001 terms" in done.stdout
    assert f"bad.py{FINDING}" in done.stdout


# -- a third round: SARIF URIs, --statistics in a machine format, malformed noqa, --jobs, -o ---

def _sarif_uris(document: str) -> list[str]:
    runs = json.loads(document)["runs"]
    return [location["physicalLocation"]["artifactLocation"]["uri"]
            for result in runs[0]["results"] for location in result["locations"]]


def test_sarif_writes_file_names_as_uri_references(bad_project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Written raw, ``my file#1%.py`` is no URI (a space, a fragment, a broken escape)."""
    (bad_project / "bad.py").rename(bad_project / "my file#1%.py")
    (bad_project / "café?.py").write_text(BAD)
    code, out, err = lint_main(capsys, "--output-format", "sarif", ".")
    assert (code, err) == (1, "")
    assert sorted(_sarif_uris(out)) == ["caf%C3%A9%3F.py", "my%20file%231%25.py"]
    code, out, _ = lint_main(capsys, "--output-format", "sarif", str(bad_project / "my file#1%.py"))
    assert code == 1
    assert _sarif_uris(out) == [(bad_project / "my file#1%.py").as_uri()]
    assert _sarif_uris(out)[0].endswith("/my%20file%231%25.py")


def test_sarif_with_statistics_is_one_line_and_json_statistics_parse(
        bad_project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The counts as text would leave no SARIF document to parse: the combination is
    refused before anything is linted. With json they are JSON; with the text formats
    (and github's, whose log shows plain lines as they are) text."""
    code, out, err = lint_main(capsys, "--output-format", "sarif", "--statistics", "bad.py")
    assert (code, out) == (2, "")
    assert err == ("gpudoctor: error: --statistics cannot be combined with --output-format sarif (a SARIF "
                   "document has no place for counts; use --output-format json to get them as JSON)\n")
    code, out, err = lint_main(capsys, "--output-format", "json", "--statistics", "bad.py")
    assert (code, err) == (1, "")
    assert json.loads(out) == [{"code": "GD101", "name": "fork-after-gpu-init", "count": 1, "fixable": True}]
    for fmt in ("concise", "full", "github"):
        assert lint_main(capsys, "--output-format", fmt, "--statistics", "bad.py")[1:] == (
            "    1\tGD101\tfork-after-gpu-init\n", "")


_MALFORMED = ("GD001 [warning] invalid noqa directive: expected a comma-separated list of rule codes after `# noqa:` "
              "(e.g. `# noqa: GD101`), so it suppresses nothing")


@pytest.mark.parametrize("comment", ["# noqa: XYZ", "# noqa: fork", "# NOQA:xyz", "# noqa:", "# noqa: # why"])
def test_a_noqa_naming_no_code_suppresses_nothing_and_is_reported(
        bad_project: Path, capsys: pytest.CaptureFixture[str], comment: str) -> None:
    """Read as a bare ``# noqa``, it once hid every finding of its line without a word."""
    source = BAD.replace("as pool:", f"as pool:  {comment}")
    (bad_project / "bad.py").write_text(source)
    code, out, err = lint_main(capsys, "--output-format", "concise", "-q", "bad.py")
    assert (code, err) == (1, "")
    gd101, gd001 = out.splitlines()
    assert gd101.startswith(f"bad.py{FINDING}") and gd001 == f"bad.py:10:31: {_MALFORMED}"


@pytest.mark.parametrize(("comment", "reported"), [
    ("# noqa", []),
    ("# noqa: GD101", []),
    ("# noqa:GD101", []),
    ("# noqa: gd101 kept for a reason", []),
    ("# noqa: GD101, GD102", ["GD001 [warning] unused noqa directive for GD102"]),
    ("# noqa: E501", ["GD101 "]),  # another tool's code: its own, not malformed, suppresses no GD101
    ("# noqa: E501, W291", ["GD101 "]),
    # Well formed, but no rule of gpudoctor's: called unknown, and it suppresses nothing either.
    ("# noqa:GD10", ["GD101 ", "GD001 [warning] unknown rule code GD10 in noqa directive"]),
])
def test_valid_noqa_forms_keep_working(bad_project: Path, capsys: pytest.CaptureFixture[str], comment: str,
                                       reported: list[str]) -> None:
    (bad_project / "bad.py").write_text(BAD.replace("as pool:", f"as pool:  {comment}"))
    code, out, err = lint_main(capsys, "--output-format", "concise", "-q", "bad.py")
    assert (code, err) == (1 if reported else 0, "")
    lines = out.splitlines()
    assert len(lines) == len(reported) and all(text in line for text, line in zip(reported, lines, strict=True))


def test_jobs_beyond_the_files_and_cpus_starts_no_more_workers_than_either(
        bad_project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """``--jobs 10000`` started hundreds of worker processes. Recorded where they are
    started (the stand-in hands every file back unanalysed, as a lost worker does, so they
    are analysed in this process and no process is started)."""
    from gpudoctor.lint import engine, execution, workers

    for n in range(2):
        (bad_project / f"bad_{n}.py").write_text(BAD)
    alone = lint_main(capsys, "--jobs", "1", ".")
    assert alone[0] == 1 and alone[1].count(FINDING) == 3
    started: list[int] = []

    def run_files(root: str, paths: list[str], processes: int, *args: object,
                  **kwargs: object) -> tuple[list[object], list[str], None]:
        started.append(processes)
        return [], paths, None

    monkeypatch.setattr(engine, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(workers, "run_files", run_files)
    for cpus, expected in ((64, 3), (2, 2)):  # capped by the files, then by the CPUs
        monkeypatch.setattr(execution, "_cpus", lambda cpus=cpus: cpus)
        code, out, err = lint_main(capsys, "-v", "--jobs", "10000", ".")
        assert (code, out) == alone[:2]
        assert started.pop() == expected and not started
        assert f"3 analysed in {expected} worker processes" in err


def test_an_output_file_that_is_a_linted_file_is_refused_and_left_whole(
        bad_project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``-o m.py m.py`` wrote the report over the source it was about."""
    (bad_project / "m.py").write_text(BAD)
    (bad_project / "other.py").write_text("x = 1\n")
    (bad_project / "report.txt").symlink_to("m.py")
    before = _snapshot(bad_project)
    linted = "gpudoctor: error: --output-file {}: refusing to write the report over a file being linted\n"
    source = ("gpudoctor: error: --output-file {}: refusing to write the report over an existing Python source "
              "file (.py, .pyi, .ipynb)\n")
    for argv, said in [(["-o", "m.py", "m.py"], linted.format("m.py")),
                       (["--output-file", "./new/../m.py", "--fix", "--unsafe-fixes", "m.py"],
                        linted.format("./new/../m.py")),
                       (["-o", "report.txt", "m.py"], linted.format("report.txt")),  # a link to it
                       (["-o", str(bad_project / "m.py"), "."], linted.format(bad_project / "m.py")),
                       (["-o", "m.py", "--show-files", "m.py"], linted.format("m.py")),
                       (["-o", "other.py", "m.py"], source.format("other.py"))]:
        code, out, err = lint_main(capsys, *argv)
        assert (code, out, err) == (2, "", said), argv
    assert _snapshot(bad_project) == before and not (bad_project / "new").exists()
    assert main(["lint", "--no-cache", "-o", "fresh.py", "m.py"]) == 1  # a new file is the report's
    assert f"m.py{FINDING}" in (bad_project / "fresh.py").read_text()


def test_lambdas_nested_past_what_libcst_takes_are_gd000_and_the_run_goes_on(
        bad_project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """2,900 nested lambdas (valid Python, 23 kB): libcst's tree of them took 1.6 GB."""
    (bad_project / "lambdas.py").write_text("import multiprocessing as mp\nf = " + "lambda: " * 2_900
                                           + "1\nmp.Pool(2)\n")
    code, out, _ = lint_main(capsys, "--output-format", "concise", ".")
    assert code == 1 and "lambdas.py:2:" in out and "GD000 cannot parse: lambdas nested more than 500 deep" in out
    assert f"bad.py{FINDING}" in out


@pytest.mark.parametrize("options", [["--fix", "--unsafe-fixes"], ["--add-noqa"], []])
def test_an_empty_path_is_refused_not_read_as_the_current_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str],
                                                                 options: list[str]) -> None:
    # ``gpudoctor lint --fix "$FILE"`` with FILE unset rewrote every file of the folder.
    source = "import multiprocessing as mp\nimport cupy as cp\n\ncp.ones(1)\nwith mp.Pool(2) as pool:\n    pass\n"
    (tmp_path / "one.py").write_text(source)
    monkeypatch.chdir(tmp_path)
    assert main(["lint", "--no-cache", *options, "one.py", ""]) == 2
    assert "a path given is empty" in capsys.readouterr().err
    assert (tmp_path / "one.py").read_text() == source


@pytest.mark.parametrize("name", ["/", "", "sub", "sub/"])
def test_stdin_filename_naming_a_folder_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str], name: str) -> None:
    # ``--stdin-filename /`` made / the project and read every .py file of the machine.
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "stdin", open(os.devnull))  # noqa: SIM115 - closed by pytest's teardown of sys
    assert main(["lint", "--stdin-filename", name, "-"]) == 2
    assert "is not a file name" in capsys.readouterr().err


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (Linux)")
@pytest.mark.parametrize("argv", [["lint", "a.py"], ["lint", "--bogus", "a.py"], ["lint", "missing.py"]])
def test_a_usage_error_exits_2_when_standard_error_cannot_be_written(tmp_path: Path, argv: list[str]) -> None:
    # CI reads 1 as "findings": a configuration error must still be 2 with stderr on a full disk.
    (tmp_path / "pyproject.toml").write_text("[tool.gpudoctor]\nselect = 5\n")
    (tmp_path / "a.py").write_text("x = 1\n")
    with open("/dev/full", "w") as full:
        done = subprocess.run([sys.executable, "-m", "gpudoctor", *argv], cwd=tmp_path, stdout=subprocess.DEVNULL,
                              stderr=full, timeout=120, check=False)
    assert done.returncode == 2


def test_a_file_of_more_lines_than_gpudoctor_analyses_is_a_warning_not_minutes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # A generated 15 MB file of 1.5 M lines took 114 s and 3.9 GB (red team): past
    # reading.MAX_LINES (200,000: some 15 s) a file is reported, not analysed. The cap is
    # lowered here to keep the test small.
    from gpudoctor.lint.frontend import reading

    monkeypatch.setattr(reading, "MAX_LINES", 50)
    head = "import multiprocessing\nimport cupy as cp\n\ncp.ones(1)\n"
    (tmp_path / "big.py").write_text(head + "".join(f"s{i} = 1\n" for i in range(60)) +
                                     "with multiprocessing.Pool(2) as pool:\n    pass\n")
    (tmp_path / "small.py").write_text(head + "with multiprocessing.Pool(2) as pool:\n    pass\n")
    monkeypatch.chdir(tmp_path)
    assert main(["lint", "--no-cache", "--output-format", "json", "big.py", "small.py"]) == 1
    found = {(f["filename"], f["code"], f["severity"]) for f in json.loads(capsys.readouterr().out)}
    assert ("big.py", "GD000", "warning") in found and ("small.py", "GD104", "warning") in found
    assert not any(name == "big.py" and code != "GD000" for name, code, _ in found)
