"""``%load_ext gpudoctor`` driven through IPython's InteractiveShell in this process.

TensorFlow here is the stand-in of conftest.py (its first op makes the eager context
gpudoctor reads); the real one runs in a real kernel in test_real_kernel.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gpudoctor.hazards import FORK_AFTER_INIT
from gpudoctor.ipython import executed_cells, live_state
from tests.ipython.conftest import run

pytest.importorskip("IPython", reason="the extension's tests need IPython (the jupyter extra)")

pytestmark = pytest.mark.usefixtures("stand_in_tensorflow")

# A pool the cell only starts when asked to: the linter reads it (it cannot know the
# variable is unset), the test process never forks.
POOL = """\
if os.environ.get("START_THE_POOL"):
    with mp.get_context("fork").Pool(1) as pool:
        pool.map(work, range(2))
"""


@pytest.fixture
def forking(monkeypatch: pytest.MonkeyPatch) -> None:
    """A Pool() here forks, as on Linux up to Python 3.13, whatever this session set."""
    monkeypatch.setattr(live_state, "start_method", lambda: ("fork", False))


def _magic(shell: Any, capsys: pytest.CaptureFixture[str], line: str) -> tuple[str, str]:
    capsys.readouterr()
    run(shell, f"%gpudoctor {line}".rstrip())
    out = capsys.readouterr()
    return out.out, out.err


def test_load_registers_the_magic_and_unload_removes_it_with_the_hooks(shell: Any) -> None:
    run(shell, "%load_ext gpudoctor")
    assert "gpudoctor" in shell.magics_manager.magics["line"]
    hooks = [len(shell.events.callbacks[name]) for name in ("pre_run_cell", "post_run_cell")]
    run(shell, "%unload_ext gpudoctor")
    assert "gpudoctor" not in shell.magics_manager.magics["line"]
    assert [len(shell.events.callbacks[name]) for name in ("pre_run_cell", "post_run_cell")] == \
        [count - 1 for count in hooks]


@pytest.mark.usefixtures("forking")
def test_report_names_the_framework_and_the_cell_that_initialized_it(
        shell: Any, capsys: pytest.CaptureFixture[str]) -> None:
    run(shell, "%load_ext gpudoctor")
    run(shell, "import tensorflow as tf")
    run(shell, "x = tf.matmul(tf.ones((2, 2)), tf.ones((2, 2)))")
    out, err = _magic(shell, capsys, "")
    assert err == ""
    assert "TensorFlow: initialized in cell [3] (its eager context exists" in out
    assert "A Pool() here would start its workers with: fork" in out
    assert "Verdict: a fork now is unsafe." in out
    assert ("TensorFlow was initialized in cell [3]: a forked worker that uses TensorFlow will hang, "
            "or abort with CUDA_ERROR_NOT_INITIALIZED.") in out
    assert FORK_AFTER_INIT.notebook_fix_line in out  # the spawn fix, with the worker moved out of the cells


@pytest.mark.usefixtures("forking")
def test_a_runtime_initialized_before_the_extension_is_found_in_the_executed_cells(
        shell: Any, capsys: pytest.CaptureFixture[str]) -> None:
    run(shell, "import tensorflow as tf")
    run(shell, "def build():\n    return tf.matmul(tf.ones((2, 2)), tf.ones((2, 2)))")
    run(shell, "model = build()")  # the cell that ran it, not the cell that holds the call
    run(shell, "%load_ext gpudoctor")
    out, _ = _magic(shell, capsys, "")
    assert "TensorFlow: initialized in cell [3] (its eager context exists)" in out
    assert ("before gpudoctor was loaded (cell [4]); the executed cells show it: tensorflow.ones in cell [3], "
            "written in cell [2]") in out
    assert "TensorFlow was initialized in cell [3]" in out


@pytest.mark.usefixtures("forking")
def test_a_runtime_no_executed_cell_explains_is_said_so(shell: Any, capsys: pytest.CaptureFixture[str]) -> None:
    run(shell, "import tensorflow as tf")
    run(shell, 'getattr(tf, "on" + "es")((2, 2))')  # a call the analysis cannot resolve
    run(shell, "%load_ext gpudoctor")
    out, _ = _magic(shell, capsys, "")
    assert "TensorFlow: initialized before gpudoctor was loaded (cell [3])" in out
    assert "no executed cell shows how" in out
    assert "TensorFlow was initialized: a forked worker" in out  # no cell named


@pytest.mark.usefixtures("forking")
def test_an_imported_framework_is_not_an_initialized_one(shell: Any, capsys: pytest.CaptureFixture[str]) -> None:
    run(shell, "%load_ext gpudoctor")
    run(shell, "import tensorflow as tf")
    out, _ = _magic(shell, capsys, "")
    assert "GPU runtimes initialized now: none" in out
    assert "Imported, not initialized: TensorFlow" in out
    assert "Verdict: a fork now copies no initialized GPU runtime, but TensorFlow is imported" in out


@pytest.mark.usefixtures("forking")
def test_the_cuda_driver_alone_is_named_with_its_cell(shell: Any, capsys: pytest.CaptureFixture[str],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    # What the probe reports once a library ran cuInit (no framework runtime of its own).
    initialized: list[str] = []
    monkeypatch.setattr(live_state, "runtimes", lambda: tuple(initialized))
    run(shell, "%load_ext gpudoctor")
    shell.user_ns["cuinit"] = lambda: initialized.append("cuda-driver")
    run(shell, "cuinit()")
    out, _ = _magic(shell, capsys, "")
    assert "The CUDA driver (cuInit had run): initialized in cell [2] (libcuda is loaded and cuInit ran)" in out
    assert ("The CUDA driver was initialized in cell [2]: a forked worker that uses CUDA will fail, since the "
            "driver's state does not survive fork.") in out


def test_with_spawn_chosen_the_pool_inherits_nothing(shell: Any, capsys: pytest.CaptureFixture[str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(live_state, "start_method", lambda: ("spawn", True))
    run(shell, "%load_ext gpudoctor")
    run(shell, "import tensorflow as tf\ntf.ones((1,))")
    out, _ = _magic(shell, capsys, "")
    assert "A Pool() here would start its workers with: spawn (set by set_start_method)" in out
    assert "Verdict: a Pool() here starts fresh interpreters (spawn): they inherit nothing of TensorFlow" in out
    assert "cannot be a function defined in a cell" in out


def test_lint_reads_the_cells_in_the_order_the_kernel_ran_them(
        shell: Any, capsys: pytest.CaptureFixture[str]) -> None:
    run(shell, "%load_ext gpudoctor")
    run(shell, "import multiprocessing as mp\nimport os\n\nimport tensorflow as tf")
    run(shell, "def work(i):\n    return tf.ones((i,))")
    run(shell, POOL)  # [4]: before any TensorFlow op in this kernel
    run(shell, "x = tf.ones((2, 2))")  # [5]
    out, err = _magic(shell, capsys, "lint")
    assert (err, out) == ("", "No findings in the 6 executed cells, read in the order the kernel ran them.\n")
    run(shell, POOL)  # [7]: the same cell again, now after the op of cell [5]
    out, _ = _magic(shell, capsys, "lint")
    assert out.startswith("cell [7] line 2: GD101 [error] the Pool forks its worker processes after TensorFlow "
                          "initialized")
    assert "    cell [5] line 1: TensorFlow initialized here (tensorflow.ones)\n" in out
    # `work` is defined in a cell: spawn alone would not reach it, so the help moves it first
    assert ("    help: Move `work` into a module next to the notebook (e.g. `workers.py`) and import it from "
            'there; then use the spawn start method: multiprocessing.get_context("spawn")\n') in out
    assert out.endswith("Found 1 finding in the 8 executed cells, read in the order the kernel ran them.\n")
    out, _ = _magic(shell, capsys, "lint --ignore GD101")
    assert out.startswith("No findings in the 9 executed cells")


def test_a_cell_that_would_fork_a_poisoned_kernel_is_warned_about_before_it_runs(
        shell: Any, capsys: pytest.CaptureFixture[str]) -> None:
    run(shell, "%load_ext gpudoctor")
    run(shell, "import multiprocessing as mp\nimport os\n\nimport tensorflow as tf")
    run(shell, "def work(i):\n    return tf.ones((i,))")
    run(shell, POOL)
    run(shell, "x = tf.ones((2, 2))")
    assert capsys.readouterr().err == ""  # the first pool ran before the op: nothing to say
    run(shell, POOL)
    err = capsys.readouterr().err
    assert err.startswith("gpudoctor: before this cell runs:\n  cell [6] line 2: GD101 [error] the Pool forks")
    assert "      cell [5] line 1: TensorFlow initialized here (tensorflow.ones)\n" in err
    run(shell, "y = 1")  # adds nothing: the finding of cell [6] is not news
    assert capsys.readouterr().err == ""


def test_the_warning_names_a_call_that_completes_a_finding_in_an_earlier_cell(
        shell: Any, capsys: pytest.CaptureFixture[str]) -> None:
    run(shell, "%load_ext gpudoctor")
    run(shell, "import multiprocessing as mp\nimport os\n\nimport tensorflow as tf")
    run(shell, "def work(i):\n    return tf.ones((i,))")
    run(shell, f"def train():\n{''.join('    ' + line + chr(10) for line in POOL.splitlines())}")
    run(shell, "x = tf.ones((2, 2))")
    capsys.readouterr()
    run(shell, "train()")
    err = capsys.readouterr().err
    assert err.startswith("gpudoctor: before this cell runs:\n  cell [4] line 3: GD101 [error]")
    assert "      (reached from this cell, [6]: it runs that code after what ran before it)\n" in err


def test_magic_mistakes_are_sentences(shell: Any, capsys: pytest.CaptureFixture[str]) -> None:
    run(shell, "%load_ext gpudoctor")
    for line, message in [("bogus", "gpudoctor: unknown command 'bogus'\nusage: %gpudoctor"),
                          ("lint --select", "gpudoctor: --select needs a value"),
                          ("lint --fix", "gpudoctor: unknown argument '--fix' for lint"),
                          ('lint "unclosed', "gpudoctor: cannot read the arguments"),
                          ("lint --select NOPE",
                           "gpudoctor: unknown rule code or prefix 'NOPE' in the arguments of %gpudoctor lint")]:
        out, err = _magic(shell, capsys, line)
        assert out == "" and err.startswith(message), (line, err)
        assert "Traceback" not in err
    out, err = _magic(shell, capsys, "help")
    assert out.startswith("usage: %gpudoctor ") and err == ""


def test_a_bad_configuration_is_a_sentence_naming_the_file(shell: Any, capsys: pytest.CaptureFixture[str]) -> None:
    (Path.cwd() / "pyproject.toml").write_text("[tool.gpudoctor]\nbogus = 1\n")
    run(shell, "%load_ext gpudoctor")
    out, err = _magic(shell, capsys, "lint")
    assert out == "" and "pyproject.toml" in err and "bogus" in err and "Traceback" not in err


def test_an_error_of_gpudoctor_in_the_check_leaves_the_cell_running(
        shell: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    run(shell, "%load_ext gpudoctor")

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("broken on purpose")

    monkeypatch.setattr(executed_cells, "lint", broken)
    result = run(shell, "value = 41 + 1")
    assert result.success and shell.user_ns["value"] == 42
    assert capsys.readouterr().err == ("gpudoctor: the check before this cell failed (RuntimeError: broken on "
                                       "purpose); the cell runs without it\n")


def test_the_extension_imports_no_gpu_framework_and_gpudoctor_stays_light(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "import gpudoctor\n"
        "light = [m for m in ('IPython', 'gpudoctor.ipython', 'libcst') if m in sys.modules]\n"
        "from IPython.core.interactiveshell import InteractiveShell\n"
        "from traitlets.config import Config\n"
        "config = Config(); config.HistoryManager.hist_file = ':memory:'\n"
        "shell = InteractiveShell(config=config)\n"
        "for cell in ['%load_ext gpudoctor', 'import multiprocessing', '%gpudoctor', '%gpudoctor lint']:\n"
        "    shell.run_cell(cell, store_history=True)\n"
        "frameworks = ('tensorflow', 'torch', 'cupy', 'jax', 'numba', 'pycuda', 'pynvml')\n"
        "loaded = [m for m in frameworks if m in sys.modules]\n"
        "print('LIGHT', light, 'LOADED', loaded)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                          env={**os.environ, "IPYTHONDIR": str(tmp_path / "ipython")})
    assert "Verdict: no GPU runtime is initialized in this kernel" in done.stdout, done.stdout + done.stderr
    assert done.stdout.strip().endswith("LIGHT [] LOADED []"), done.stdout + done.stderr
