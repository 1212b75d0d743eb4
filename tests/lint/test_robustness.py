"""Bad and big input: real code bases, generated programs and hostile files never crash the linter."""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import sys
import sysconfig
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpudoctor.cli import main
from gpudoctor.lint.engine import lint_paths
from gpudoctor.lint.frontend.reading import ParseFailure, read_text
from gpudoctor.lint.rules._registry import all_rules
from gpudoctor.lint.selection import build_selection
from gpudoctor.lint.settings import Settings

CODES = [r.code for r in all_rules()]


def _settings(root: Path) -> Settings:
    return Settings(build_selection(CODES, CODES), sys.version_info[1], "linux", root)


def _package(name: str) -> Path:
    if name == "stdlib":
        return Path(sysconfig.get_paths()["stdlib"])
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        pytest.fail(f"{name} is not installed: `make test` installs it (the tensorflow extra)")
    return Path(next(iter(spec.submodule_search_locations)))


def _genuinely_unparseable(path: str) -> bool:
    text = read_text(Path(path))
    if isinstance(text, ParseFailure):
        return True
    try:
        ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return True
    return False


# Lints the files named on stdin, one per line, under the root given, with every rule, in two
# worker processes (as on a machine of two cores: half the time, and the workers' path meets
# real code too), in a process of its own (its fork server ends with it); prints the result.
_LINT_IN_WORKERS = """
import json, sys
from pathlib import Path
from tests.lint.test_robustness import _settings
from gpudoctor.lint.engine import lint_paths
result = lint_paths([Path(line) for line in sys.stdin.read().splitlines()], _settings(Path(sys.argv[1])), jobs=2)
print(json.dumps({"internal_errors": [str(e) for e in result.internal_errors], "checked": result.files_checked,
                  "unparseable": [f.site.path for f in result.findings if f.code == "GD000"]}))
"""


# Of the standard library's own tests (820 files, 17 MB: two thirds of linting the standard
# library, 50 s), those whose code is unlike the library's: syntax, tokenizer and source
# encoding tests, the files no parser reads (GD000), and the multiprocessing tests (the code the
# rules are about). The library itself (970 modules) is linted whole.
_STDLIB_TESTS_KEPT = re.compile(r"bad|grammar|syntax|patma|fstring|token|unparse|coding|pep|multiprocessing|concurrent")


def _lint_targets(name: str, root: Path) -> list[Path]:
    files = sorted(p for p in root.rglob("*.py") if "site-packages" not in p.relative_to(root).parts)
    if name != "stdlib":
        return files
    return [p for p in files if p.relative_to(root).parts[0] != "test"
            or _STDLIB_TESTS_KEPT.search(p.relative_to(root).as_posix())]


@pytest.mark.parametrize("name", ["tensorflow", "keras", "numpy", "stdlib"])
def test_real_code_bases_lint_without_an_internal_error(name: str) -> None:
    import json
    import subprocess

    root = _package(name)
    files = _lint_targets(name, root)
    assert len(files) > 300
    done = subprocess.run([sys.executable, "-c", _LINT_IN_WORKERS, str(root)], input="\n".join(map(str, files)),
                          capture_output=True, text=True, timeout=900, cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["internal_errors"] == []
    assert result["checked"] == len(files)
    assert all(_genuinely_unparseable(path) for path in result["unparseable"]), result["unparseable"]


# -- generated programs ----------------------------------------------------------------------

_IMPORTS = st.lists(st.sampled_from([
    "import multiprocessing as mp", "import multiprocessing", "from multiprocessing import Pool, Process",
    "import cupy as cp", "import tensorflow as tf", "import torch", "import torch.multiprocessing as tmp",
    "import os", "import threading", "from concurrent.futures import ProcessPoolExecutor",
    "import jax", "from numba import cuda", "import helpers", "from helpers import *",
]), min_size=1, max_size=6)
_EXPRESSIONS = st.sampled_from([
    "cp.ones(3)", "tf.constant([1.0])", "torch.zeros(2).cuda()", "jax.numpy.ones(2)",
    "mp.Pool(2)", "mp.get_context('spawn').Pool(2)", "Pool()", "ProcessPoolExecutor(2)",
    "mp.Process(target=work, args=(1,))", "os.fork()", "threading.Thread(target=work).start()",
    "tf.config.experimental.set_memory_growth(g, True)", "cuda.to_device([1])",
    "work(1)", "helpers.run(work)", "lambda: cp.ones(1)", "[cp.ones(i) for i in range(3)]",
    "mp.set_start_method('spawn')", "tmp.spawn(work, nprocs=2)", "x.map(work, range(3))",
    "torch.utils.data.DataLoader(ds, num_workers=2)", "getattr(mp, 'Pool')(2)", "undefined_name(1)",
])
_STATEMENTS = st.one_of(
    _EXPRESSIONS.map(lambda e: e),
    _EXPRESSIONS.map(lambda e: f"x = {e}"),
    _EXPRESSIONS.map(lambda e: f"with {e} as x:\n    x.map(work, range(3))"),
    _EXPRESSIONS.map(lambda e: f"os.environ['CUDA_VISIBLE_DEVICES'] = str({e})"),
    _EXPRESSIONS.map(lambda e: f"try:\n    {e}\nexcept RuntimeError:\n    pass"),
    _EXPRESSIONS.map(lambda e: f"for i in range(2):\n    p = {e}\n    p.start()\n    p.join()"),
    _EXPRESSIONS.map(lambda e: f"if __name__ == '__main__':\n    {e}"),
    _EXPRESSIONS.map(lambda e: f"def work(i):\n    return {e}"),
    _EXPRESSIONS.map(lambda e: f"class W(mp.Process):\n    def run(self):\n        {e}"),
    _EXPRESSIONS.map(lambda e: f"async def go():\n    await {e}"),
    st.just("def f(*args, **kwargs):\n    return f(*args, **kwargs)"),  # recursion
    st.just("import sys; sys.modules['x'] = sys"),
)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                    HealthCheck.function_scoped_fixture])
@given(main_imports=_IMPORTS, main_body=st.lists(_STATEMENTS, max_size=8),
       helper_body=st.lists(_STATEMENTS, max_size=4))
def test_generated_programs_never_crash_the_analysis(tmp_path_factory: pytest.TempPathFactory,
                                                      main_imports: list[str], main_body: list[str],
                                                      helper_body: list[str]) -> None:
    root = tmp_path_factory.mktemp("generated")
    (root / "main.py").write_text("\n".join(main_imports) + "\n\n" + "\n\n".join(main_body) + "\n")
    (root / "helpers.py").write_text("import multiprocessing as mp\nimport cupy as cp\n\n"
                                     + "\n\n".join(helper_body) + "\n\ndef run(f):\n    return f(1)\n")
    result = lint_paths([root / "main.py", root / "helpers.py"], _settings(root))
    assert result.internal_errors == []
    for finding in result.findings:
        assert finding.site.row >= 1 and finding.message


# -- hostile files -------------------------------------------------------------------------

@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_hostile_files_become_findings(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (workdir / "nul.py").write_bytes(b"import multiprocessing\x00\n")
    (workdir / "latin.py").write_bytes(b"import multiprocessing\nname = '\xe9t\xe9'\n")
    (workdir / "bad_coding.py").write_bytes(b"# -*- coding: no-such-codec -*-\nimport multiprocessing\n")
    # 20 000 terms: CPython gives up on the nesting; libcst would take minutes.
    (workdir / "chain.py").write_text("import multiprocessing as mp\ny = " + " + ".join(["1"] * 20000) + "\n")
    (workdir / "parens.py").write_text("import multiprocessing as mp\ny = " + "(" * 300 + "1" + ")" * 300 + "\n")
    os.symlink("loop_b.py", workdir / "loop_a.py")
    os.symlink("loop_a.py", workdir / "loop_b.py")
    (workdir / "pkg").mkdir()
    os.symlink("..", workdir / "pkg" / "up")  # a directory loop: not followed
    assert main(["lint", "--no-cache", "."]) == 1
    out = capsys.readouterr().out
    assert "nul.py:1:1: GD000 file contains a null byte" in out
    assert "latin.py:2:1: GD000 file is not valid UTF-8" in out
    assert "bad_coding.py:1:1: GD000 cannot read file: unknown encoding" in out
    assert "chain.py:1:1: GD000 cannot parse: the code is nested too deeply for Python's parser" in out
    assert "parens.py:2:" in out and "GD000 cannot parse: too many nested parentheses" in out
    assert "loop_a.py:1:1: GD000 cannot read file: Too many levels of symbolic links" in out
    assert "Traceback" not in out


def test_a_symlink_loop_named_on_the_command_line_is_an_error(workdir: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    os.symlink("b.py", workdir / "a.py")
    os.symlink("a.py", workdir / "b.py")
    assert main(["lint", "a.py"]) == 2
    assert "a.py: a symbolic link to nothing (or a symlink loop)" in capsys.readouterr().err


def test_deep_but_valid_nesting_is_analysed(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    calls = "x"
    for _ in range(150):
        calls = f"f({calls})"
    blocks = "".join(" " * i + f"if c{i}:\n" for i in range(80)) + " " * 80 + "cp.ones(1)\n"
    (workdir / "deep.py").write_text(
        "import multiprocessing as mp\nimport cupy as cp\n\n"
        f"y = {calls}\n{blocks}\ndef work(i):\n    return float(cp.ones(i).sum())\n\n"
        "with mp.Pool(2) as pool:\n    pool.map(work, range(2))\n")
    assert main(["lint", "--no-cache", "deep.py"]) == 1
    out = capsys.readouterr().out
    assert "deep.py:90:6: GD101" in out and "(cupy.ones, line 85, when `c79` is true (line 84))" in out


def test_a_five_megabyte_file(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    chunks = ["import multiprocessing as mp\nimport cupy as cp\n\n"]
    index = 0
    # Generated code: large functions (what protobuf or a table-driven generator writes).
    # Their bodies are never parsed by libcst; the cost grows with the number of
    # definitions, not the bytes (about 32 000 small functions take 15 s).
    body = "".join(f"    total += values[{i}] * scale + {i}\n" for i in range(60))
    while sum(map(len, chunks)) < 5_000_000:
        chunks.append(f"def helper_{index}(values, scale={index}):\n    total = 0\n{body}    return total\n\n\n")
        index += 1
    chunks.append("def work(x):\n    return float(cp.ones(x).sum())\n\n\n"
                  "if __name__ == '__main__':\n    cp.ones(1)\n    with mp.Pool(2) as pool:\n"
                  "        pool.map(work, range(3))\n")
    (workdir / "huge.py").write_text("".join(chunks))
    assert (workdir / "huge.py").stat().st_size > 5_000_000
    assert main(["lint", "--no-cache", "--select", "GD101", "huge.py"]) == 1
    out = capsys.readouterr().out
    rows = len("".join(chunks).splitlines())
    assert f"huge.py:{rows - 1}:10: GD101" in out  # the with statement, above the last line


def test_relative_paths_follow_the_working_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The same relative name in two folders is two files (a cache keyed on the bare name
    # once made the second run lint the first folder's file).
    from gpudoctor.lint.paths import real_path

    for name in ("one", "two"):
        (tmp_path / name).mkdir()
        monkeypatch.chdir(tmp_path / name)
        assert real_path("bad.py") == tmp_path / name / "bad.py"


def test_a_body_only_cpython_reads_is_a_finding_whatever_the_file_size(workdir: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """A form feed before an indent: CPython accepts it, libcst's tokenizer does not. A short
    file is parsed whole (GD000 for the file); a long one function by function (GD000 for
    that function, the rest still analysed). Never an internal error."""
    body = ("import multiprocessing as mp\nimport cupy as cp\n\n\ndef work(x):\n"
            "\x0c    with open(x) as f:\n        return f.read()\n\n\n"
            "def ones(n):\n    return float(cp.ones(n).sum())\n\n\n"
            "def run():\n    with mp.Pool(2) as pool:\n        pool.map(work, ['a'])\n"
            "        return pool.map(ones, [1])\n")
    padding = "".join(f"\n\ndef helper_{i}(a):\n    return a + {i}\n" for i in range(150))
    (workdir / "short.py").write_text(body)
    (workdir / "long.py").write_text(body + padding)
    assert main(["lint", "--no-cache", "short.py", "long.py"]) == 1
    captured = capsys.readouterr()
    assert "short.py:1:1: GD000 cannot parse with libcst" in captured.out
    assert "long.py:6:1: GD000 cannot parse the body of work() with libcst" in captured.out
    assert "long.py:15:10: GD103" in captured.out
    assert "internal error" not in captured.err and "Traceback" not in captured.err


def test_code_frames_count_lines_as_python_does(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A form feed or a line separator inside a string is not a line break (str.splitlines
    says it is), and a declared encoding is honoured."""
    (workdir / "frame.py").write_bytes(
        b"# -*- coding: latin-1 -*-\nimport multiprocessing as mp\nimport cupy as cp\n"
        b"NOTE = '\xe9t\xe9 \x0c page'\ncp.zeros(1)\n\n\ndef work(i):\n    return float(cp.sum(cp.arange(i)))\n\n\n"
        b"if __name__ == '__main__':\n    with mp.Pool(2) as pool:\n        pool.map(work, range(3))\n")
    assert main(["lint", "--no-cache", "--output-format", "full", "frame.py"]) == 1
    out = capsys.readouterr().out
    assert "13 |     with mp.Pool(2) as pool:" in out and "5 | cp.zeros(1)" in out


def test_warnings_about_the_checked_code_are_not_printed(tmp_path: Path) -> None:
    """Compiling code with an invalid escape warns (SyntaxWarning from Python 3.12); the
    warning is about the user's code and must not reach gpudoctor's output."""
    import subprocess
    import sys

    target = tmp_path / "escapes.py"
    target.write_text('import re\nPATTERN = re.compile("\\d+")\nassert (1, 2) is not None\n', encoding="utf-8")
    done = subprocess.run([sys.executable, "-W", "always", "-m", "gpudoctor", "lint", "--no-cache", str(target)],
                          capture_output=True, text=True, check=False, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Warning" not in done.stderr, done.stderr
