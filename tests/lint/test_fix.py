"""Autofix: the spawn fix for GD101/GD103 is unsafe, re-parses, is idempotent, and is refused
where it would break the program."""

from __future__ import annotations

import json
from pathlib import Path

import libcst as cst
import pytest

from gpudoctor.cli import main

SOURCE = '''\
"""Train."""
from __future__ import annotations

from multiprocessing import Pool
from concurrent.futures import ProcessPoolExecutor
import multiprocessing as mp

import torch


def work(i):
    return torch.ones(i).cuda().sum().item()


def main():
    torch.cuda.is_available()
    with Pool(2) as pool:
        pool.map(work, range(3))
    with ProcessPoolExecutor(2) as ex:
        list(ex.map(work, range(3)))
    p = mp.Process(target=work, args=(1,))
    p.start()
    with mp.get_context("fork").Pool(2) as pool:
        pool.map(work, range(3))
    with Pool(2) as pool:
        pool.map(lambda i: torch.ones(i).cuda(), range(3))
'''


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "train.py").write_text(SOURCE)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_fix_alone_applies_no_unsafe_fix(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lint", "--fix", "train.py"]) == 1
    assert (repo / "train.py").read_text() == SOURCE
    assert "No safe fix; 4 unsafe fixes hidden" in capsys.readouterr().out


def test_diff_shows_and_changes_nothing(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lint", "--diff", "--unsafe-fixes", "train.py"]) == 1
    out = capsys.readouterr().out
    assert (repo / "train.py").read_text() == SOURCE
    assert '+    with multiprocessing.get_context("spawn").Pool(2) as pool:' in out
    assert '+    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as ex:' in out
    assert '+    p = mp.get_context("spawn").Process(target=work, args=(1,))' in out
    assert '+    with mp.get_context("spawn").Pool(2) as pool:' in out
    assert "+import multiprocessing\n" in out
    assert "lambda" not in "".join(line for line in out.splitlines() if line.startswith("+"))


def test_unsafe_fix_is_applied_reparses_and_is_idempotent(repo: Path) -> None:
    assert main(["lint", "--fix", "--unsafe-fixes", "train.py"]) == 1  # the lambda pool remains
    fixed = (repo / "train.py").read_text()
    cst.parse_module(fixed)
    assert fixed.count('get_context("spawn")') == 4
    assert fixed.index("import multiprocessing\n") < fixed.index("from multiprocessing import Pool")
    assert main(["lint", "--fix", "--unsafe-fixes", "train.py"]) == 1
    assert (repo / "train.py").read_text() == fixed
    assert main(["lint", "--select", "GD104", "train.py"]) == 0


def test_no_fix_where_spawn_would_start_processes_at_import(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (repo / "script.py").write_text(
        "import multiprocessing as mp\nimport cupy as cp\n\ndef work(i):\n    return cp.arange(i)\n\n"
        "cp.ones(2)\nwith mp.Pool(2) as pool:\n    pool.map(work, range(2))\n"
    )
    assert main(["lint", "--output-format", "json", "script.py"]) == 1
    (finding,) = [f for f in json.loads(capsys.readouterr().out) if f["severity"] == "error"]
    assert finding["code"] == "GD101" and finding["fix"] is None


def test_no_fix_where_spawned_workers_could_not_load_the_function(repo: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    # `work` lives in the __main__ block, which a spawned worker does not run (GD108's case).
    (repo / "script.py").write_text(
        "import multiprocessing as mp\nimport cupy as cp\n\nif __name__ == '__main__':\n"
        "    def work(i):\n        return cp.arange(i)\n\n"
        "    cp.ones(2)\n    with mp.Pool(2) as pool:\n        pool.map(work, range(2))\n"
    )
    assert main(["lint", "--output-format", "json", "script.py"]) == 1
    (finding,) = [f for f in json.loads(capsys.readouterr().out) if f["severity"] == "error"]
    assert finding["code"] == "GD101" and finding["fix"] is None
    main(["lint", "--output-format", "full", "script.py"])
    assert "help: Define `work` at the top level of the script, above the" in capsys.readouterr().out


def test_json_carries_the_fix(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    main(["lint", "--output-format", "json", "train.py"])
    fixes = [f["fix"] for f in json.loads(capsys.readouterr().out) if f["fix"]]
    assert len(fixes) == 4 and {f["applicability"] for f in fixes} == {"unsafe"}
    edit = fixes[0]["edits"][-1]
    assert set(edit) == {"content", "location", "end_location"}


def test_a_fix_keeps_the_file_a_symlink_points_to_and_its_mode(repo: Path) -> None:
    (repo / "real").mkdir()
    (repo / "train.py").rename(repo / "real" / "train.py")
    (repo / "real" / "train.py").chmod(0o755)
    (repo / "train.py").symlink_to(repo / "real" / "train.py")
    assert main(["lint", "--no-cache", "--fix", "--unsafe-fixes", "train.py"]) == 1
    assert (repo / "train.py").is_symlink()
    assert 'get_context("spawn")' in (repo / "real" / "train.py").read_text()
    assert (repo / "real" / "train.py").stat().st_mode & 0o777 == 0o755


@pytest.mark.parametrize(("name", "encode"), [
    ("crlf", lambda text: text.replace("\n", "\r\n").encode()),
    ("cr", lambda text: text.replace("\n", "\r").encode()),
    ("bom", lambda text: b"\xef\xbb\xbf" + text.encode()),
    ("latin-1", lambda text: ("# -*- coding: latin-1 -*-\n# \xe9t\xe9\n" + text).encode("latin-1")),
    ("form-feed", lambda text: text.replace('"""Train."""', '"""Train.\x0c\u2028"""').encode()),
])
def test_a_fix_keeps_the_files_encoding_and_line_endings(repo: Path, name: str, encode) -> None:  # type: ignore[no-untyped-def]
    """The fixed file is, byte for byte, the plain file's fix in the file's own encoding
    and line endings: the edits land where the analysis saw the code (a byte order mark, a
    form feed or a line separator inside a string does not move them)."""
    assert main(["lint", "--fix", "--unsafe-fixes", "--no-cache", "train.py"]) == 1
    fixed_plain = (repo / "train.py").read_text(encoding="utf-8")
    assert fixed_plain != SOURCE
    (repo / "train.py").write_bytes(encode(SOURCE))
    assert main(["lint", "--fix", "--unsafe-fixes", "--no-cache", "train.py"]) == 1
    assert (repo / "train.py").read_bytes() == encode(fixed_plain), name


CONTEXT_HELD = '''\
import multiprocessing as mp
from concurrent.futures import ProcessPoolExecutor

import cupy as cp

ctx = mp.get_context("fork")


def work(x):
    return float(cp.arange(x).sum())


def main():
    cp.zeros(3)
    results = ctx.Queue()
    with ctx.Pool(2) as pool:
        results.put(pool.map(work, range(4)))
    worker = ctx.Process(target=work, args=(3,))
    worker.start()
    worker.join()
    with ProcessPoolExecutor(2, mp_context=ctx) as ex:
        list(ex.map(work, range(4)))


if __name__ == "__main__":
    main()
'''


def test_a_fork_context_held_in_a_variable_is_switched_where_it_is_made(
        repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # ctx.Queue() must switch with the pool: a queue of a fork context cannot be sent to a
    # spawned child. So the context itself becomes spawn, once, for every use of it.
    (repo / "held.py").write_text(CONTEXT_HELD)
    assert main(["lint", "--no-cache", "--diff", "--unsafe-fixes", "held.py"]) == 1
    captured = capsys.readouterr()
    assert '-ctx = mp.get_context("fork")\n+ctx = mp.get_context("spawn")\n' in captured.out
    added = [line for line in captured.out.splitlines() if line.startswith("+") and not line.startswith("+++")]
    assert len(added) == 1 and "no fix for" not in captured.err
    assert captured.err == "Would fix 3 findings (1 file) with the fixes above.\n"
    assert main(["lint", "--no-cache", "--fix", "--unsafe-fixes", "held.py"]) == 0
    assert (repo / "held.py").read_text() == CONTEXT_HELD.replace('"fork"', '"spawn"')


@pytest.mark.parametrize(("change", "reason"), [
    (("    cp.zeros(3)\n", '    cp.zeros(3)\n    print(ctx.get_start_method())\n'),
     "`ctx` is also used at line 15 (`ctx.get_start_method()`, which the fix cannot judge)"),
    (("ctx.Process(target=work,", "ctx.Process(target=lambda: work(3),"),
     "`ctx` is also used at line 18 (a start that cannot switch to spawn: its child runs a lambda, "
     "which spawned workers cannot load (GD108))"),
    (('ctx = mp.get_context("fork")\n', 'ctx = mp.get_context("fork")\nctx = mp.get_context("fork")\n'),
     "`ctx` is set in more than one place"),
    (('mp.get_context("fork")', 'mp.get_context(METHOD)'),
     "`ctx` is chosen with a start method that is not a plain string"),
])
def test_a_context_in_a_variable_is_left_alone_when_a_use_of_it_could_break(
        repo: Path, capsys: pytest.CaptureFixture[str], change: tuple[str, str], reason: str) -> None:
    source = CONTEXT_HELD.replace(*change)
    if "METHOD" in source:
        source = source.replace("ctx = mp", 'METHOD = "fork"\nctx = mp')
    (repo / "held.py").write_text(source)
    assert main(["lint", "--no-cache", "--diff", "--unsafe-fixes", "held.py"]) == 0
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert lines[0].startswith("gpudoctor: no fix for GD101 at held.py:")
    assert any(line.endswith(reason) for line in lines), lines
    assert lines[-1] == "No fix to show."


def test_diff_says_why_a_start_gets_no_fix(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lint", "--no-cache", "--diff", "--unsafe-fixes", "train.py"]) == 1
    err = capsys.readouterr().err
    assert ("gpudoctor: no fix for GD101 at train.py:25:10: its child runs a lambda, which spawned workers "
            "cannot load (GD108)\n") in err
    (repo / "script.py").write_text(
        "import multiprocessing as mp\nimport cupy as cp\n\ndef work(i):\n    return cp.arange(i)\n\n"
        "cp.ones(2)\nwith mp.Pool(2) as pool:\n    pool.map(work, range(2))\n")
    assert main(["lint", "--no-cache", "--diff", "--unsafe-fixes", "script.py"]) == 0
    assert "script.py:8:6: the start runs while the module is imported" in capsys.readouterr().err


def test_a_process_subclass_gets_no_fix_and_the_reason_names_the_way(repo: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    (repo / "sub.py").write_text(
        "import multiprocessing as mp\nimport cupy as cp\n\n\nclass Worker(mp.Process):\n"
        "    def run(self):\n        cp.arange(3)\n\n\nif __name__ == '__main__':\n    cp.ones(2)\n"
        "    w = Worker()\n    w.start()\n    w.join()\n")
    assert main(["lint", "--no-cache", "--diff", "--unsafe-fixes", "sub.py"]) == 0
    err = capsys.readouterr().err
    assert ("it starts an instance of `Worker`, a Process subclass, which uses the default start method: "
            'choose spawn once, `multiprocessing.set_start_method("spawn")` under the main guard') in err, err


def test_fix_with_unsafe_fixes_says_why_a_finding_was_left(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lint", "--no-cache", "--fix", "--unsafe-fixes", "train.py"]) == 1  # the lambda pool remains
    err = capsys.readouterr().err
    assert "gpudoctor: no fix for GD101 at train.py:25:10: its child runs a lambda" in err
    assert "Fixed 4 findings in 1 file." in err


LAID_OUT = '''\
import multiprocessing
from concurrent.futures import ProcessPoolExecutor

import torch


def work(i):
    return torch.ones(i).cuda().sum().item()


def main():
    torch.cuda.is_available()
    if True:
        with multiprocessing.Pool(
            processes=4,
            maxtasksperchild=10,
        ) as pool:
            pool.map(work, range(4))
        with ProcessPoolExecutor(
            max_workers=2,
        ) as pool:
            list(pool.map(work, range(4)))
        with multiprocessing.Pool(processes=2, initializer=print, initargs=("""a
b""",)) as pool:
            pool.map(work, range(4))


if __name__ == "__main__":
    main()
'''


def test_a_call_over_several_lines_keeps_its_layout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # libcst writes a node's lines without the indentation of its block: a rewritten call
    # over several lines lost it (the arguments at column 4, the parenthesis at 0).
    (tmp_path / "train.py").write_text(LAID_OUT)
    monkeypatch.chdir(tmp_path)
    assert main(["lint", "--fix", "--unsafe-fixes", "train.py"]) in (0, 1)
    fixed = (tmp_path / "train.py").read_text()
    spawn = 'multiprocessing.get_context("spawn")'
    assert fixed == LAID_OUT.replace("with multiprocessing.Pool(", f"with {spawn}.Pool(").replace(
        "            max_workers=2,\n", f"            max_workers=2,\n            mp_context={spawn},\n")
