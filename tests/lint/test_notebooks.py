"""Jupyter notebooks: read as the program of their code cells, findings at (cell, line).

The annotated notebooks under fixtures/notebooks/ are checked by test_fixtures.py; this
file checks the reading itself, every output format, bad input, discovery and --fix.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from gpudoctor.cli import main
from gpudoctor.lint import notebook

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "notebooks"
README_CASE = FIXTURES / "cuda_init_then_pool.ipynb"


def _notebook(*cells: object, metadata: object = None) -> str:
    def cell(source: object) -> dict[str, object]:
        if isinstance(source, tuple):  # (kind, source)
            return {"cell_type": source[0], "metadata": {}, "source": source[1]}
        return {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": source}
    return json.dumps({"cells": [cell(c) for c in cells], "metadata": metadata or {},
                       "nbformat": 4, "nbformat_minor": 5}, indent=1) + "\n"


def _program(*cells: object) -> notebook.Notebook:
    return notebook.read(_notebook(*cells).encode())


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\nrequires-python = ">=3.10"\n')
    shutil.copy(README_CASE, tmp_path / "nb.ipynb")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _errors(findings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The errors (the README's notebook also meets GD108 on Python 3.14: a warning)."""
    return [f for f in findings if f["severity"] == "error"]


# -- reading ---------------------------------------------------------------------------------

def test_code_cells_in_order_form_the_program_and_rows_map_back() -> None:
    found = _program(("markdown", "# Title\nno code"), ["import os\n", "x = 1"], "", "y = 2\n")
    assert found.program == "import os\nx = 1\n\ny = 2\n\n"
    assert [(c.number, c.first_row, len(c.lines)) for c in found.cells] == [(2, 1, 2), (3, 3, 1), (4, 4, 2)]
    assert found.locate(2) == (2, 2) and found.locate(3) == (3, 1) and found.locate(4) == (4, 1)
    assert found.locate(99) is None


@pytest.mark.parametrize(("line", "replaced"), [
    ("%matplotlib inline", "pass"),
    ("!pip install x", "pass"),
    ("files = !ls", "files = ..."),
    ("a, b = %sx echo 1 2", "a, b = ..."),
    ("obj?", "pass"),
    ("??obj", "pass"),
    ("pip install --quiet x", "pass"),
    ("cd ..", "pass"),
    ("time = 5", "time = 5"),  # an automagic name used as Python stays Python
    ("run(1)", "run(1)"),
    ("x = 1  # really?", "x = 1  # really?"),
])
def test_ipython_syntax_is_neutralised(line: str, replaced: str) -> None:
    assert _program([f"{line}\n", "z = 1"]).program.split("\n")[:2] == [replaced, "z = 1"]


def test_a_magic_alone_in_a_block_keeps_the_block_and_columns() -> None:
    source = "for i in range(2):\n    %time f(i)\nprint(i)  # end\n"
    program = _program(source).program
    assert program.split("\n")[:3] == ["for i in range(2):", "    pass", "print(i)  # end"]
    compile(program, "nb", "exec")


def _lines(source: str) -> list[str]:
    """One cell's lines as the program has them, IPython syntax neutralised (whether or not
    the result is valid Python)."""
    return notebook._neutralise(source.split("\n"))[0]


def test_a_dedented_magic_and_a_continued_one() -> None:
    source = "if x:\n    y = 1\n%env A=1 \\\n   B=2\nz = (1,\n%2)\n"
    assert _lines(source)[:6] == ["if x:", "    y = 1", "pass", "", "z = (1,", "%2)"]  # in brackets: Python


def test_percent_in_a_string_or_brackets_is_python() -> None:
    source = 'doc = """\n%d items\n"""\nv = [1,\n!2]\n'
    assert _lines(source)[:5] == ['doc = """', "%d items", '"""', "v = [1,", "!2]"]


def test_a_cell_that_is_not_python_is_left_out_and_the_rest_read() -> None:
    """IPython rejects such a cell with SyntaxError and runs the others (a half-typed line,
    LaTeX pasted into a code cell): its rows stay, empty."""
    found = _program("import os\n", "ms.loc[ms['a'] < ,'a']\n", "$GN$ & $0.30 \\pm 0.18$\n", "x = 1\n")
    assert [cell for cell, *_ in found.skipped] == [2, 3]
    assert found.program.split("\n")[:7] == ["import os", "", "", "", "", "", "x = 1"]


def test_colab_form_lines_above_a_cell_magic_and_an_indented_cell() -> None:
    found = _program("#@title Install { display-mode: 'form' }\n%%bash\napt-get install -y foo (\n",
                     "    import os\n    !ls\n")
    assert not found.skipped
    assert found.program.split("\n")[4:6] == ["import os", "pass"]


def test_cell_magics() -> None:
    found = _program("%%bash\necho (\n", "%%time\nx = 1\n")
    assert found.program.split("\n")[:5] == ["", "", "", "", "x = 1"]


def test_a_kernel_that_is_not_python_has_no_program() -> None:
    raw = _notebook("x <- 1", metadata={"language_info": {"name": "R"}}).encode()
    assert notebook.read(raw).program == ""


@pytest.mark.parametrize(("raw", "reason"), [
    (b"{not json", "invalid JSON"),
    (b"[]", "not an object"),
    (json.dumps({"nbformat": 3, "worksheets": []}).encode(), "nbformat 3"),
    (json.dumps({"nbformat": 4, "cells": {}}).encode(), "no list of cells"),
    (json.dumps({"nbformat": 4, "cells": [{"cell_type": "code", "source": 3}]}).encode(), "cell 1 cannot be read"),
    (b"\xff\xfe", "not valid UTF-8"),
])
def test_what_is_not_a_notebook_says_why(raw: bytes, reason: str) -> None:
    with pytest.raises(notebook.NotANotebook, match=reason):
        notebook.read(raw)


# -- output formats (the README example: GD101 at cell 4, line 2; the init at cell 1, line 12) --

def test_concise(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lint", "--no-cache", "nb.ipynb"]) == 1
    out = capsys.readouterr().out
    assert out.startswith("nb.ipynb:cell 4:2:6: GD101 the Pool forks")
    assert "(torch.cuda.is_available, cell 1, line 12)" in out


def test_full_shows_each_cell(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lint", "--no-cache", "--output-format", "full", "nb.ipynb"]) == 1
    out = capsys.readouterr().out
    assert "--> nb.ipynb:cell 4:2:6\n  |\n2 | with mp.Pool(2) as pool:\n" in out
    assert "--> nb.ipynb:cell 1:12:7\n   |\n12 | print(torch.cuda.is_available())\n" in out
    assert "--> nb.ipynb:cell 3:2:12\n" in out  # the child's use, in the cell that defines it


def test_json(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lint", "--no-cache", "--output-format", "json", "nb.ipynb"]) == 1
    [finding] = _errors(json.loads(capsys.readouterr().out))
    assert (finding["code"], finding["cell"], finding["location"], finding["filename"]) == \
        ("GD101", 4, {"row": 2, "column": 6}, "nb.ipynb")
    assert [(r["cell"], r["location"]["row"]) for r in finding["related"]] == [(1, 12), (3, 2)]


def test_json_cell_is_null_in_a_python_file(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / "bad.py").write_text("import os\nimport torch\ntorch.cuda.init()\nos.fork()\n")
    main(["lint", "--no-cache", "--output-format", "json", "bad.py"])
    assert all(f["cell"] is None for f in json.loads(capsys.readouterr().out))


def test_sarif(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lint", "--no-cache", "--output-format", "sarif", "nb.ipynb"]) == 1
    [result] = [r for r in json.loads(capsys.readouterr().out)["runs"][0]["results"] if r["level"] == "error"]
    location = result["locations"][0]
    assert location["properties"] == {"cell": 4}
    assert location["physicalLocation"]["region"]["startLine"] == 2
    assert location["physicalLocation"]["artifactLocation"]["uri"] == "nb.ipynb"
    assert [r["properties"]["cell"] for r in result["relatedLocations"]] == [1, 3]


def test_github(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lint", "--no-cache", "--output-format", "github", "nb.ipynb"]) == 1
    line = capsys.readouterr().out
    assert line.startswith("::error file=nb.ipynb,title=GD101 fork-after-gpu-init::cell 4:2:6: GD101 ")
    assert "line=" not in line.split("::")[1]  # a line of the file would point into its JSON


# -- the same notebook switched to spawn: its cell-defined worker is GD108 -------------------

SPAWN_CASE = FIXTURES / "spawn_pool_cell_worker.ipynb"


def test_gd101_in_a_notebook_moves_the_worker_before_offering_spawn(
        project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    main(["lint", "--no-cache", "--output-format", "json", "nb.ipynb"])
    [finding] = _errors(json.loads(capsys.readouterr().out))
    assert finding["fix"] is None  # a spawn context would not reach `work`
    main(["lint", "--no-cache", "--output-format", "full", "nb.ipynb"])
    assert ("help: Move `work` into a module next to the notebook (e.g. `workers.py`) and import it from "
            'there; then use the spawn start method: multiprocessing.get_context("spawn")') in capsys.readouterr().out


@pytest.mark.parametrize("fmt", ["concise", "full", "json", "sarif", "github"])
def test_a_cell_defined_spawn_worker_in_every_format(fmt: str, project: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    shutil.copy(SPAWN_CASE, project / "nb.ipynb")
    assert main(["lint", "--no-cache", "--output-format", fmt, "nb.ipynb"]) == 1
    out = capsys.readouterr().out
    if fmt == "concise":
        assert out.startswith("nb.ipynb:cell 4:4:11: GD108 Pool sends `square` (a task) to spawn workers; ")
        assert "AttributeError: Can't get attribute 'square' on <module '__main__' (built-in)>" in out
    elif fmt == "full":
        assert "--> nb.ipynb:cell 4:4:11\n" in out and "--> nb.ipynb:cell 3:1:5\n" in out
        assert "help: Move `square` into a module next to the notebook" in out
    elif fmt == "json":
        [finding] = json.loads(out)
        assert (finding["code"], finding["cell"], finding["location"]) == ("GD108", 4, {"row": 4, "column": 11})
        assert [(r["cell"], r["location"]["row"]) for r in finding["related"]] == [(3, 1)]
    elif fmt == "sarif":
        [result] = json.loads(out)["runs"][0]["results"]
        assert result["ruleId"] == "GD108" and result["locations"][0]["properties"] == {"cell": 4}
    else:
        assert out.startswith("::error file=nb.ipynb,title=GD108 worker-function-not-importable::cell 4:4:11: ")


def test_from_python_3_14_the_default_pool_cannot_reach_a_cell_function(
        project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # forkserver is the Linux default from 3.14: the README notebook's fork crash becomes GD108.
    assert main(["lint", "--no-cache", "--target-version", "py314", "nb.ipynb"]) == 1
    out = capsys.readouterr().out
    assert out.startswith("nb.ipynb:cell 4:3:11: GD108 Pool sends `work` (a task) to workers started with "
                          "forkserver, the target's default; ")
    assert "GD101" not in out


def test_the_readme_example_is_what_gpudoctor_prints(capsys: pytest.CaptureFixture[str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    root = FIXTURES.parents[1]
    readme = (root / "README.md").read_text()
    command = ("$ gpudoctor lint fixtures/notebooks/cuda_init_then_pool.ipynb "
               "fixtures/notebooks/spawn_pool_cell_worker.ipynb")
    shown = readme.split(command + "\n", 1)[1].split("```", 1)[0]
    monkeypatch.chdir(root)
    main(["lint", "--no-cache", *command.split()[3:]])
    assert capsys.readouterr().out == shown


# -- noqa, fixes, discovery, cache, bad input -------------------------------------------------

def test_an_unused_noqa_in_a_cell_is_reported_at_the_cell(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / "nb.ipynb").write_text(_notebook("import os\n", "print(os.getpid())  # noqa: GD101\n"))
    assert main(["lint", "--no-cache", "--extend-select", "GD001", "nb.ipynb"]) == 1
    assert capsys.readouterr().out.startswith("nb.ipynb:cell 2:1:21: GD001 [warning] unused noqa directive for GD101")


def test_fix_never_writes_a_notebook(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / "nb.ipynb").write_text(_notebook("import os\n", "print(os.getpid())  # noqa: GD101\n"))
    before = (project / "nb.ipynb").read_bytes()
    main(["lint", "--no-cache", "--extend-select", "GD001", "--fix", "--unsafe-fixes", "nb.ipynb"])
    captured = capsys.readouterr()
    assert (project / "nb.ipynb").read_bytes() == before
    assert "gpudoctor: not fixing nb.ipynb: fixes are not applied to Jupyter notebooks" in captured.err
    assert "fixable" not in captured.out


def test_a_walk_finds_notebooks_and_honours_gitignore(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / "scratch").mkdir()
    shutil.copy(README_CASE, project / "scratch" / "old.ipynb")
    (project / ".ipynb_checkpoints").mkdir()
    shutil.copy(README_CASE, project / ".ipynb_checkpoints" / "nb-checkpoint.ipynb")
    (project / ".gitignore").write_text("scratch/\n")
    assert main(["lint", "--show-files", "."]) == 0
    assert capsys.readouterr().out.split() == ["nb.ipynb"]


def test_the_cache_serves_a_notebook(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lint", "nb.ipynb"]) == 1
    first = capsys.readouterr().out
    assert main(["lint", "--verbose", "nb.ipynb"]) == 1
    captured = capsys.readouterr()
    assert captured.out == first and "1 from the cache" in captured.err


def test_a_notebook_imports_a_module_beside_it(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """As the kernel has the notebook's folder on sys.path, and as a .py file there resolves."""
    (project / "lab").mkdir()
    (project / "lab" / "gpu_setup.py").write_text(
        "import torch\n\ndef setup():\n    torch.cuda.init()\n\ndef work():\n    torch.ones(1, device='cuda')\n")
    cells = ("import multiprocessing as mp\nfrom gpu_setup import setup, work\nsetup()\n",
             "mp.Process(target=work).start()\n")
    (project / "lab" / "run.ipynb").write_text(_notebook(*cells))
    (project / "lab" / "run.py").write_text("".join(cells))
    assert main(["lint", "--no-cache", "lab/run.ipynb", "lab/run.py"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("lab/run.ipynb:cell 2:1:1: GD101 ")
    assert out[1].startswith("lab/run.py:4:1: GD101 ")


@pytest.mark.parametrize(("name", "expected"), [
    ("broken_json.ipynb", "broken_json.ipynb:4:2: GD000 not a Jupyter notebook: invalid JSON "
                          "(Expecting ',' delimiter at line 4 column 2)"),
    ("nbformat3.ipynb", "nbformat3.ipynb:1:1: GD000 not read: nbformat 3 notebook (only nbformat 4 is read"),
])
def test_bad_notebooks_are_gd000(name: str, expected: str, project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shutil.copy(FIXTURES / "bad" / name, project / name)
    assert main(["lint", "--no-cache", name]) == 1
    assert capsys.readouterr().out.startswith(expected)


def test_a_cell_left_open_is_left_out_and_the_others_checked(project: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    (project / "nb.ipynb").write_text(_notebook(
        "import multiprocessing as mp\nimport cupy as cp\n", "x = (1,\n",
        "def work(i):\n    return float(cp.ones(i).sum())\n",
        "cp.ones(3)\nwith mp.Pool(2) as pool:\n    pool.map(work, [1])\n"))
    assert main(["lint", "--no-cache", "nb.ipynb"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("nb.ipynb:cell 2:2:1: GD000 [warning] cell 2 is not Python (a bracket left open at "
                             "the end of the cell): it is left out, and the rest of the notebook is checked")
    assert out[1].startswith("nb.ipynb:cell 4:2:6: GD101 ")


def test_an_escape_continued_at_the_end_of_a_cell_is_not_left_open() -> None:
    """IPython runs ``!cmd \\`` on a cell's last line (the backslash goes to the shell)."""
    found = _program("!echo a \\\n  b \\", "%env A=1 \\")
    assert not found.skipped
    assert found.program.split("\n")[:3] == ["pass", "", "pass"]
    assert [cell for cell, *_ in _program("x = 1 + \\").skipped] == [1]  # Python continued past the cell fails


def test_a_run_reads_each_notebook_once(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """More notebooks in one run than a bounded cache held: the analysis and the placing of findings share one read."""
    for index in range(66):
        (project / f"nb{index}.ipynb").write_text(_notebook(f"import multiprocessing as mp\nx = {index}\n"))
    notebook.read.cache_clear()
    main(["lint", "--no-cache", "--jobs", "1", "."])
    capsys.readouterr()
    assert notebook.read.cache_info().misses == 67  # the 66 and nb.ipynb


def test_pre_commit_hooks_take_notebooks() -> None:
    text = (Path(__file__).resolve().parents[2] / ".pre-commit-hooks.yaml").read_text()
    assert text.count("types_or: [python, pyi, jupyter]") == 2


def test_a_notebook_whose_only_code_is_not_python_still_says_so(project: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    # Its one cell cannot be parsed, so nothing of it can matter and it is not analysed: the
    # cell left out is still reported, as a .py file that cannot be parsed is (red team).
    (project / "nb.ipynb").write_text(_notebook("import multiprocessing\ndef (:\nmultiprocessing.Pool(2)\n"))
    for _ in range(2):  # (the second run reads the cache)
        assert main(["lint", "nb.ipynb"]) == 1
        assert capsys.readouterr().out.startswith("nb.ipynb:cell 1:")
