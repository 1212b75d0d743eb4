"""The ``gpudoctor lint`` and ``gpudoctor rule`` commands, through ``main(argv)``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpudoctor.cli import main

BAD = """\
import multiprocessing as mp
import cupy as cp

x = cp.arange(4)

def work(i):
    return float(cp.sum(cp.arange(i)))

if __name__ == "__main__":
    with mp.Pool(2) as pool:
        pool.map(work, range(3))
"""
# BAD with the GPU initialized under the main guard: a forked worker inherits it (fork is the
# Linux default up to 3.13), a worker of the forkserver (the default from 3.14) does not.
GUARDED = BAD.replace("x = cp.arange(4)\n", "").replace(
    'if __name__ == "__main__":\n', 'if __name__ == "__main__":\n    x = cp.arange(4)\n')


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\nrequires-python = ">=3.10"\n')
    (tmp_path / "bad.py").write_text(BAD)
    (tmp_path / "good.py").write_text("import os\nprint(os.getpid())\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_findings_exit_1_with_concise_lines(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lint"]) == 1
    out = capsys.readouterr().out
    assert "bad.py:10:10: GD101 the Pool forks its worker processes after CuPy initialized CUDA" in out
    assert "(cupy.arange, line 4)" in out
    # One finding and no safe fix: the hint must not read as if there were a second one.
    assert ("\nFound 1 finding.\nNo safe fix; 1 unsafe fix hidden: preview with "
            "`--diff --unsafe-fixes`, apply with `--fix --unsafe-fixes`") in out
    assert "more fixable" not in out


def test_diff_without_unsafe_fixes_says_they_are_hidden(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    main(["lint", "--diff"])
    captured = capsys.readouterr()
    assert "No fix to show: 1 unsafe fix hidden, add `--unsafe-fixes` to see them." in captured.err
    assert "Would fix 0" not in captured.err


def test_clean_file_exits_0(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lint", "good.py"]) == 0
    assert "All checks passed!" in capsys.readouterr().out


@pytest.mark.parametrize("output_format", ["concise", "full"])
def test_quiet_prints_the_findings_and_nothing_else(project: Path, capsys: pytest.CaptureFixture[str],
                                                    output_format: str) -> None:
    assert main(["lint", "-q", "--output-format", output_format]) == 1
    out = capsys.readouterr().out
    assert "GD101" in out and "bad.py" in out
    assert "Found" not in out and "unsafe fix" not in out
    assert main(["lint", "--quiet", "good.py"]) == 0
    assert capsys.readouterr().out == ""  # no "All checks passed!"


def test_silent_prints_nothing_and_keeps_the_exit_code(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lint", "-s"]) == 1
    assert capsys.readouterr().out == ""
    assert main(["lint", "--silent", "-o", "report.json", "--output-format", "json"]) == 1
    assert capsys.readouterr().out == ""
    assert json.loads((project / "report.json").read_text())[0]["code"] == "GD101"  # asked for: written


def test_quiet_fix_does_not_count_what_it_fixed(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    main(["lint", "--fix", "--unsafe-fixes", "-q"])
    captured = capsys.readouterr()
    assert "Fixed" not in captured.err and "Found" not in captured.out
    assert main(["lint", "--no-cache", "--fix", "--unsafe-fixes", "--quiet", "--silent"]) == 2  # one or the other


def test_an_unknown_option_is_reported_with_the_commands_usage(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lint", "--bogus", "x.py"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: gpudoctor lint ") and "gpudoctor lint: error: unrecognized arguments: --bogus" in err


def test_exit_zero(project: Path) -> None:
    assert main(["lint", "--exit-zero"]) == 0


def test_json_contract(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lint", "--output-format", "json", "bad.py"]) == 1
    (item,) = json.loads(capsys.readouterr().out)
    # "cell": the notebook cell (ruff's key; null in a Python file), added with notebooks.
    assert set(item) == {"code", "name", "message", "severity", "filename", "cell", "location",
                         "end_location", "related", "fix", "url"}
    assert item["code"] == "GD101" and item["name"] == "fork-after-gpu-init"
    assert item["severity"] == "error" and item["filename"] == "bad.py"
    assert item["location"] == {"row": 10, "column": 10}
    assert item["end_location"]["row"] == 10
    assert item["related"][0] == {"filename": "bad.py", "cell": None, "location": {"row": 4, "column": 5},
                                  "end_location": {"row": 4, "column": 17},
                                  "message": "CuPy initialized here (cupy.arange)"}
    assert item["fix"]["applicability"] == "unsafe"
    assert item["fix"]["edits"][0]["content"] == 'mp.get_context("spawn").Pool(2)'


@pytest.mark.parametrize(("argv", "expected"), [
    (["--select", "GD2"], 0), (["--ignore", "GD101"], 0), (["--select", "ALL"], 1),
    (["--select", "GD201", "--extend-select", "GD1"], 1), (["--select", "GD101", "--ignore", "GD1"], 0),
])
def test_selection(project: Path, argv: list[str], expected: int) -> None:
    assert main(["lint", *argv, "bad.py"]) == expected


def test_unknown_code_is_a_usage_error(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lint", "--select", "GD999"]) == 2
    assert "unknown rule code or prefix 'GD999'" in capsys.readouterr().err


def test_missing_path_is_a_usage_error(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lint", "nope.py"]) == 2
    assert "nope.py: no such file or directory" in capsys.readouterr().err


def test_missing_path_does_not_stop_the_others(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lint", "nope_dir/", "bad.py"]) == 2
    captured = capsys.readouterr()
    assert "nope_dir/: no such file or directory" in captured.err
    assert "bad.py:10:10: GD101" in captured.out


def test_bad_target_version_is_argparse_error(project: Path) -> None:
    assert main(["lint", "--target-version", "py27"]) == 2


def test_platform_darwin_makes_spawn_the_default(project: Path) -> None:
    assert main(["lint", "--platform", "darwin", "bad.py"]) == 0


def test_target_py314_linux_is_forkserver(project: Path) -> None:
    (project / "guarded.py").write_text(GUARDED)
    assert main(["lint", "--target-version", "py314", "guarded.py"]) == 0
    assert main(["lint", "--target-version", "py313", "guarded.py"]) == 1
    # The forkserver of 3.14 runs the script's top level itself: bad.py's init poisons it.
    assert main(["lint", "--target-version", "py314", "bad.py"]) == 1


def test_requires_python_picks_the_target(project: Path) -> None:
    (project / "guarded.py").write_text(GUARDED)
    assert main(["lint", "guarded.py"]) == 1
    (project / "pyproject.toml").write_text('[project]\nname = "x"\nrequires-python = ">=3.14"\n')
    assert main(["lint", "guarded.py"]) == 0


def test_broken_pyproject_names_the_file(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / "pyproject.toml").write_text("[project\n")
    assert main(["lint", "bad.py"]) == 2
    assert "pyproject.toml" in capsys.readouterr().err


def test_unparseable_file_is_gd000_not_a_crash(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / "broken.py").write_text("import multiprocessing\ndef f(:\n    pass\n")
    (project / "nul.py").write_bytes(b"import torch\x00\n")
    (project / "latin.py").write_bytes(b"import torch\nx = '\xe9'\n")
    assert main(["lint", "broken.py", "nul.py", "latin.py"]) == 1
    out = capsys.readouterr().out
    assert "broken.py:2:7: GD000 cannot parse: " in out
    assert "nul.py:1:1: GD000 file contains a null byte" in out
    assert "latin.py:2:1: GD000 file is not valid UTF-8" in out


def test_rule_docs(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rule", "GD101"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# GD101 fork-after-gpu-init") and "## Why is this bad?" in out
    assert main(["rule", "--all"]) == 0
    assert "GD201 gpu-object-sent-to-process" in capsys.readouterr().out
    assert main(["rule", "GD999"]) == 2


def test_python_dash_m_and_help_do_not_import_libcst(project: Path) -> None:
    code = ("import sys; from gpudoctor.cli import main; rc = main(['lint', '--help']);"
            "print('LIBCST' if 'libcst' in sys.modules else 'LIGHT')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().endswith("LIGHT")
    run = subprocess.run([sys.executable, "-m", "gpudoctor", "lint", "bad.py"], capture_output=True, text=True)
    assert run.returncode == 1 and "GD101" in run.stdout


def test_directories_skip_gitignored_and_venv(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for folder in (".venv/lib", "dist", "ignored"):
        (project / folder).mkdir(parents=True)
        (project / folder / "copy.py").write_text(BAD)
    (project / ".gitignore").write_text("ignored/\n")
    assert main(["lint", "."]) == 1
    out = capsys.readouterr().out
    assert "copy.py" not in out and "bad.py" in out


def test_folders_ruff_checks_are_checked(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """ruff's default exclusions, no more: ``build`` and ``env`` hold code people write."""
    for folder in ("build", "env"):
        (project / folder).mkdir()
        (project / folder / "copy.py").write_text(BAD)
    assert main(["lint", "."]) == 1
    out = capsys.readouterr().out
    assert "build/copy.py" in out and "env/copy.py" in out


def test_a_folder_named_on_the_command_line_is_checked_even_if_gitignored(
        project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / "experiments" / "skip").mkdir(parents=True)
    (project / "experiments" / "run.py").write_text(BAD)
    (project / "experiments" / "skip" / "old.py").write_text(BAD)
    (project / ".gitignore").write_text("experiments/\nskip/\n")
    assert main(["lint", "experiments"]) == 1
    out = capsys.readouterr().out
    assert "experiments/run.py" in out and "old.py" not in out  # what it says of the contents holds
    assert main(["lint", "."]) == 1
    assert "experiments" not in capsys.readouterr().out


def test_force_exclude_drops_a_named_file_in_a_default_excluded_folder(project: Path) -> None:
    (project / ".venv" / "lib").mkdir(parents=True)
    (project / ".venv" / "lib" / "vendored.py").write_text(BAD)
    assert main(["lint", ".venv/lib/vendored.py"]) == 1
    assert main(["lint", "--force-exclude", ".venv/lib/vendored.py"]) == 0


def test_a_named_empty_notebook_is_checked(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / "explore.ipynb").write_text('{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}')
    assert main(["lint", "explore.ipynb"]) == 0
    captured = capsys.readouterr()
    assert "skipped" not in captured.err and "no Python files found" not in captured.err
    assert "All checks passed" in captured.out


def test_nothing_checked_is_not_all_checks_passed(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lint", "trian.py"]) == 2
    captured = capsys.readouterr()
    assert "trian.py: no such file or directory" in captured.err and "All checks passed" not in captured.out
    (project / "empty").mkdir()
    assert main(["lint", "empty"]) == 0
    captured = capsys.readouterr()
    assert "no Python files found" in captured.err and "All checks passed" not in captured.out
    assert main(["lint", "good.py", "trian.py"]) == 2  # one was checked, one was missing
    assert "All checks passed" not in capsys.readouterr().out


def test_statistics_as_json(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lint", "--statistics", "--output-format", "json"]) == 1
    (row,) = json.loads(capsys.readouterr().out)
    assert row == {"code": "GD101", "name": "fork-after-gpu-init", "count": 1, "fixable": True}


def test_full_format_shows_frames_related_lines_and_help(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lint", "--output-format", "full", "bad.py"]) == 1
    out = capsys.readouterr().out
    assert "GD101 [error] the Pool forks its worker processes after CuPy initialized CUDA" in out
    assert "10 |     with mp.Pool(2) as pool:" in out
    assert "4 | x = cp.arange(4)" in out and "CuPy initialized here (cupy.arange)" in out
    assert '= help: Use the spawn start method: multiprocessing.get_context("spawn")' in out


def test_full_format_colour_only_on_request_or_terminal(project: Path, capsys: pytest.CaptureFixture[str],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    assert main(["lint", "--output-format", "full", "bad.py"]) == 1
    assert "\x1b[" not in capsys.readouterr().out  # piped: plain
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert main(["lint", "--output-format", "full", "bad.py"]) == 1
    assert "\x1b[1;31mGD101 [error]\x1b[0m" in capsys.readouterr().out
    monkeypatch.setenv("NO_COLOR", "1")
    assert main(["lint", "--output-format", "full", "bad.py"]) == 1
    assert "\x1b[" not in capsys.readouterr().out


def test_concise_format_colour_only_on_request_or_terminal(project: Path, capsys: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    assert main(["lint", "bad.py"]) == 1
    assert "\x1b[" not in capsys.readouterr().out  # piped: what editors and CI parse
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert main(["lint", "bad.py"]) == 1
    assert capsys.readouterr().out.startswith("\x1b[1mbad.py\x1b[0m:10:10: \x1b[1;31mGD101\x1b[0m the Pool")
    monkeypatch.setenv("NO_COLOR", "1")
    assert main(["lint", "bad.py"]) == 1
    assert "\x1b[" not in capsys.readouterr().out


def test_declared_source_encoding_is_honoured(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / "latin1.py").write_bytes(b"# -*- coding: latin-1 -*-\nimport torch\nname = '\xe9'\n")
    assert main(["lint", "latin1.py"]) == 0
    assert "All checks passed!" in capsys.readouterr().out


def test_output_file_keeps_pipes_and_replaces_a_link(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # `-o /dev/null` once replaced the device with a plain file (a rename over it). A link
    # planted at the destination is replaced, never written through (it could point at
    # any file of the user's).
    import stat
    import threading

    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.py").write_text(BAD)
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    received: list[str] = []
    reader = threading.Thread(target=lambda: received.append(pipe.read_text()))
    reader.start()
    assert main(["lint", "--no-cache", "-o", str(pipe), "bad.py"]) == 1
    reader.join(timeout=30)
    assert stat.S_ISFIFO(pipe.lstat().st_mode) and "GD101" in received[0]
    real = tmp_path / "report.txt"
    real.write_text("old\n")
    (tmp_path / "link.txt").symlink_to(real)
    assert main(["lint", "--no-cache", "-o", "link.txt", "bad.py"]) == 1
    assert not (tmp_path / "link.txt").is_symlink() and "GD101" in (tmp_path / "link.txt").read_text()
    assert real.read_text() == "old\n"


def test_an_init_at_import_is_shown_through_the_import(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "model.py").write_text('import tensorflow as tf\n\ngpus = tf.config.list_physical_devices("GPU")\n\n\n'
                                       "def predict(batch):\n    return tf.constant(batch).numpy()\n")
    (tmp_path / "train.py").write_text(
        "from concurrent.futures import ProcessPoolExecutor\n\nfrom model import predict\n\n"
        "if __name__ == '__main__':\n    with ProcessPoolExecutor(4) as pool:\n"
        "        print(list(pool.map(predict, [[1.0], [2.0]])))\n")
    assert main(["lint", "--no-cache", "--output-format", "full", "train.py"]) == 1
    out = capsys.readouterr().out
    assert "(tensorflow.config.list_physical_devices, model.py:3)" in out
    assert "through this import" in out and "through this call" not in out


def test_unparseable_import_is_reported_at_the_import_when_only_the_importer_is_linted(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    project = Path(__file__).resolve().parents[2] / "fixtures" / "projects" / "broken_helper"
    monkeypatch.chdir(project)
    assert main(["lint", "--no-cache", "main.py"]) == 1
    out = capsys.readouterr().out
    assert "main.py:8:1: GD000 helpers.py cannot be parsed, so gpudoctor cannot follow this import" in out
    # Linting both, it is reported once, where the parser stops.
    assert main(["lint", "--no-cache", "main.py", "helpers.py"]) == 1
    out = capsys.readouterr().out
    assert "helpers.py:10:5: GD000" in out and "main.py:8:1" not in out


def test_options_are_not_abbreviated(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """As ruff: ``--sel`` is an unknown option, not ``--select``."""
    assert main(["lint", "--sel", "GD1", "bad.py"]) == 2
    assert "unrecognized arguments: --sel" in capsys.readouterr().err


def test_the_way_out_fits_the_kind_of_start(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """os.fork() takes no start method; a ProcessPoolExecutor takes it as mp_context."""
    (tmp_path / "f.py").write_text(
        "import os\nimport cupy as cp\nfrom concurrent.futures import ProcessPoolExecutor\n\n\n"
        "def work(i):\n    return float(cp.sum(cp.arange(i)))\n\n\n"
        "if __name__ == '__main__':\n    cp.zeros(1)\n    if os.fork() == 0:\n        work(3)\n"
        "        os._exit(0)\n    with ProcessPoolExecutor(max_workers=2) as ex:\n"
        "        list(ex.map(work, range(3)))\n")
    monkeypatch.chdir(tmp_path)
    assert main(["lint", "--no-cache", "--output-format", "full", "f.py"]) == 1
    out = capsys.readouterr().out
    fork, executor = out.split("GD101 [error] ")[1:]
    assert fork.startswith("os.fork() is called") and executor.startswith("the ProcessPoolExecutor")
    assert "= help: os.fork() always forks: start the child with multiprocessing" in fork
    assert ('= help: Use the spawn start method: '
            'ProcessPoolExecutor(..., mp_context=multiprocessing.get_context("spawn"))') in executor


def test_show_files_lists_what_would_be_checked(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / "dist").mkdir()
    (project / "dist" / "copy.py").write_text(BAD)
    assert main(["lint", "--show-files"]) == 0
    assert capsys.readouterr().out.split() == ["bad.py", "good.py"]
    assert main(["lint", "--show-files", "--extend-exclude", "good.py,other/"]) == 0
    assert capsys.readouterr().out.split() == ["bad.py"]


def test_show_settings_says_where_they_come_from(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / "pyproject.toml").write_text('[project]\nrequires-python = ">=3.11"\n\n'
                                            '[tool.gpudoctor]\nignore = ["GD1"]\nextend-exclude = ["gen/"]\n')
    assert main(["lint", "--show-settings", "--platform", "darwin"]) == 0
    out = capsys.readouterr().out
    assert f"configuration: {project.resolve() / 'pyproject.toml'}" in out
    assert "target: Python 3.11 on darwin (default start method: spawn)" in out
    assert "rules: GD000, GD001, GD201" in out and "exclude: gen/" in out


def test_diff_is_quiet_or_silent_on_request(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lint", "--diff", "--unsafe-fixes", "-q", "bad.py"]) == 1
    captured = capsys.readouterr()
    assert captured.out.startswith("--- a/bad.py") and captured.err == ""
    assert main(["lint", "--diff", "--unsafe-fixes", "-s", "bad.py"]) == 1
    assert capsys.readouterr() == ("", "")


def test_an_unknown_option_before_the_command_is_gpudoctors(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--bogus", "lint", "x.py"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: gpudoctor [") and "gpudoctor: error: unrecognized arguments: --bogus" in err


def _stdin(monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    import io

    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(text.encode())))


def test_source_from_stdin(project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """As an editor sends an unsaved buffer: ``-`` and ``--stdin-filename``."""
    (project / "bad.py").write_text("print('the file on disk is not what is linted')\n")
    _stdin(monkeypatch, BAD)
    assert main(["lint", "-"]) == 1
    assert "stdin.py:10:10: GD101" in capsys.readouterr().out
    _stdin(monkeypatch, BAD)
    assert main(["lint", "--stdin-filename", "bad.py"]) == 1
    out = capsys.readouterr().out
    assert out.startswith("bad.py:10:10: GD101") and "--fix" not in out
    _stdin(monkeypatch, "x = 1\n")
    assert main(["lint", "-", "--stdin-filename", "bad.py"]) == 0
    assert not (project / ".gpudoctor_cache").exists()  # nothing cached for a text not on disk


def test_stdin_is_linted_alone(project: Path, monkeypatch: pytest.MonkeyPatch,
                               capsys: pytest.CaptureFixture[str]) -> None:
    _stdin(monkeypatch, BAD)
    assert main(["lint", "-", "good.py"]) == 2
    assert "- (stdin) is linted alone" in capsys.readouterr().err


def test_diff_goes_to_the_output_file(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lint", "--diff", "--unsafe-fixes", "-o", "fix.diff", "bad.py"]) == 1
    assert capsys.readouterr().out == ""
    assert (project / "fix.diff").read_text().startswith("--- a/bad.py")


def test_an_empty_selection_is_a_usage_error(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lint", "--select=", "bad.py"]) == 2
    assert "expected one or more rule codes" in capsys.readouterr().err


def test_an_unknown_probe_option_is_the_probes(capsys: pytest.CaptureFixture[str]) -> None:
    """probe's own positional is also called ``command``: it must not hide the subcommand."""
    assert main(["probe", "--bogus"]) == 2
    assert "gpudoctor probe: error: unrecognized arguments: --bogus" in capsys.readouterr().err


def test_a_named_folder_is_exempt_but_its_namesakes_inside_are_not(project: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    for folder in ("build/lib/build", "gen/sub"):
        (project / folder).mkdir(parents=True)
    (project / "build" / "lib" / "build" / "b.py").write_text(BAD)
    (project / "build" / "lib" / "a.py").write_text(BAD)
    (project / "gen" / "generated.py").write_text(BAD)
    (project / "gen" / "sub" / "x.py").write_text(BAD)
    (project / ".gitignore").write_text("build\ngen*\n")
    assert main(["lint", "--show-files", "build"]) == 0
    assert capsys.readouterr().out.split() == ["build/lib/a.py"]
    assert main(["lint", "--show-files", "gen"]) == 0
    assert capsys.readouterr().out.split() == ["gen/sub/x.py"]


def test_gitignore_files_as_git_reads_them(project: Path, capsys: pytest.CaptureFixture[str],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A deeper .gitignore's ``!`` brings a file back; one above a relative path is read;
    ``..`` does not get the working folder's .gitignore."""
    (project / "sub" / "inner").mkdir(parents=True)
    for name in ("gen_a.py", "sub/gen_keep.py", "sub/gen_b.py", "sub/local_x.py", "sub/inner/x_pb2.py"):
        (project / name).write_text("x = 1\n")
    (project / ".gitignore").write_text("gen_*.py\n*_pb2.py\n")
    (project / "sub" / ".gitignore").write_text("!gen_keep.py\nlocal_*.py\n")
    monkeypatch.chdir(project / "sub")
    assert main(["lint", "--show-files", "."]) == 0
    assert capsys.readouterr().out.split() == ["gen_keep.py"]
    assert main(["lint", "--show-files", ".."]) == 0
    assert capsys.readouterr().out.split() == ["../bad.py", "../good.py", "../sub/gen_keep.py"]


def test_force_exclude_counts_folders_inside_the_project_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    project = tmp_path / "dist" / "proj"  # the project itself lives under a folder named dist
    (project / "venv" / "lib").mkdir(parents=True)
    (project / "pyproject.toml").write_text("[tool.gpudoctor]\n")
    (project / "a.py").write_text(BAD)
    (project / "venv" / "lib" / "v.py").write_text(BAD)
    monkeypatch.chdir(tmp_path)
    assert main(["lint", "--force-exclude", "--show-files", str(project / "a.py"), str(project / "venv")]) == 0
    assert capsys.readouterr().out.split() == [str(project / "a.py")]


def test_stdin_with_force_exclude_full_frames_and_paths(project: Path, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    (project / "pyproject.toml").write_text('[tool.gpudoctor]\nexclude = ["gen/"]\n')
    _stdin(monkeypatch, BAD)
    assert main(["lint", "--force-exclude", "--stdin-filename", "gen/a.py"]) == 0
    assert "GD101" not in capsys.readouterr().out
    (project / "bad.py").write_text("# the file on disk\n" * 20)
    _stdin(monkeypatch, BAD)
    assert main(["lint", "--output-format", "full", "--stdin-filename", "bad.py"]) == 1
    assert "10 |     with mp.Pool(2) as pool:" in capsys.readouterr().out  # the buffer's line, not the disk's
    _stdin(monkeypatch, BAD)
    assert main(["lint", "--stdin-filename", "bad.py", "good.py"]) == 1  # as ruff: stdin wins
    captured = capsys.readouterr()
    assert "ignoring good.py in favour of standard input" in captured.err and "bad.py:10:10" in captured.out


def test_output_to_a_reader_that_left_exits_quietly(project: Path) -> None:
    """``gpudoctor lint | head`` when head has gone: no traceback, exit 0 (as other tools)."""
    read, write = os.pipe()
    os.close(read)
    try:
        done = subprocess.run([sys.executable, "-m", "gpudoctor", "lint", "--no-cache", str(project)],
                              stdout=write, stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write)
    assert (done.returncode, done.stderr) == (0, "")


def test_a_broken_pipe_of_its_own_is_not_taken_for_that(monkeypatch: pytest.MonkeyPatch,
                                                        capfd: pytest.CaptureFixture[str]) -> None:
    """Only a closed standard output means the reader left. A pipe to a worker that broke
    once made a run exit 0 with nothing printed."""
    from gpudoctor.lint import runner

    def broken(args: object) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(runner, "run_lint", broken)
    with pytest.raises(BrokenPipeError):
        main(["lint", "anything.py"])


# -- the project comes from the paths -----------------------------------------------------

HELPER_CALLS_POOL = ("import multiprocessing as mp\n\ndef run(work):\n"
                     "    with mp.Pool(2) as pool:\n        pool.map(work, [1])\n")


@pytest.mark.parametrize("marker", [".git", "setup.cfg", None])
def test_the_project_is_found_from_the_paths_not_the_working_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        marker: str | None) -> None:
    # With no pyproject.toml above the linted path, the working folder was the project: run
    # from a large folder, the search for callers walked all of it (47 s for keras).
    import os

    project = tmp_path / "work" / "proj"
    (project / "pkg").mkdir(parents=True)
    if marker == ".git":
        (project / ".git").mkdir()
    elif marker is not None:
        (project / marker).write_text("")
    (project / "pkg" / "pools.py").write_text(HELPER_CALLS_POOL)
    (project / "main.py").write_text(BAD)
    unrelated = tmp_path / "elsewhere"
    for i in range(30):
        (unrelated / f"d{i}").mkdir(parents=True)
        (unrelated / f"d{i}" / "user.py").write_text("from pkg.pools import run\n")
    listed: list[str] = []
    scandir = os.scandir

    def recorded(path: object = ".") -> object:
        listed.append(os.path.abspath(os.fspath(path)))  # type: ignore[arg-type]
        return scandir(path)  # type: ignore[arg-type]

    found = []
    for here in (unrelated, Path("/"), project / "pkg"):
        monkeypatch.chdir(here)
        monkeypatch.setattr(os, "scandir", recorded)
        listed.clear()
        code = main(["lint", "--no-cache", "--output-format", "concise", str(project / "main.py")])
        monkeypatch.setattr(os, "scandir", scandir)
        out, _ = capsys.readouterr()
        found.append((code, out))
        outside = [p for p in listed if not (p + os.sep).startswith(str(project) + os.sep)]
        assert outside == [], outside[:5]
    assert found[0] == found[1] == found[2] and found[0][0] == 1, found


def test_files_of_no_project_named_far_apart_are_linted_without_walking_around_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # Their common folder (here tmp_path, in life / or a home folder) is no project: it is
    # not walked for callers; a folder named is.
    import os

    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "main.py").write_text(BAD)
    (tmp_path / "big").mkdir()
    for i in range(30):
        (tmp_path / "big" / f"m{i}.py").write_text("import multiprocessing\n")
    listed: list[str] = []
    scandir = os.scandir

    def recorded(path: object = ".") -> object:
        listed.append(os.path.abspath(os.fspath(path)))  # type: ignore[arg-type]
        return scandir(path)  # type: ignore[arg-type]

    monkeypatch.chdir(tmp_path / "a")
    monkeypatch.setattr(os, "scandir", recorded)
    code = main(["lint", "--no-cache", "--output-format", "concise", "main.py", str(tmp_path / "b" / "main.py")])
    monkeypatch.setattr(os, "scandir", scandir)
    out, _ = capsys.readouterr()
    assert code == 1 and out.count(" GD101 ") == 2, out
    assert not any(p.startswith(str(tmp_path / "big")) for p in listed), listed
    assert main(["lint", "--no-cache", str(tmp_path / "big")]) == 0  # a folder named is linted whole


def test_a_finding_that_hides_another_its_fix_leaves_names_it_as_the_next_step(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    # GD101 hides GD401 at the same pool (a forked child of an initialized parent never gets
    # to reserve memory); spawn, GD101's fix, leaves four workers each reserving the GPU.
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tf4.py").write_text(
        "import multiprocessing\n\nimport tensorflow as tf\n\n\ndef work(x):\n    return tf.square(x).numpy()\n\n\n"
        "def main():\n    tf.config.list_physical_devices('GPU')\n    with multiprocessing.Pool(4) as pool:\n"
        "        print(pool.map(work, [1.0, 2.0]))\n\n\nif __name__ == '__main__':\n    main()\n")
    assert main(["lint", "--no-cache", "--output-format", "full", "tf4.py"]) == 1
    out = capsys.readouterr().out
    assert "GD401" not in out.split("= help:")[0]  # not reported while GD101 stands
    assert ("help: Use the spawn start method: multiprocessing.get_context(\"spawn\"); then bound each worker's "
            "GPU memory (memory growth, a memory limit, or its own device) (GD401)") in out
    assert main(["lint", "--no-cache", "--output-format", "full", "--ignore", "GD401", "tf4.py"]) == 1
    assert "(GD401)" not in capsys.readouterr().out
    assert main(["lint", "--no-cache", "--fix", "--unsafe-fixes", "tf4.py"]) == 1
    assert "tf4.py:12:10: GD401 [warning] 4 workers run at once" in capsys.readouterr().out
