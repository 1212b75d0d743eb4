"""Notebooks executed in a real Jupyter kernel (nbclient + ipykernel), as a user runs them.

Each test starts its own kernel: this interpreter, from a kernel spec written for the
test (a ``python3`` spec of the user's could name another Python), importing the same
gpudoctor as the tests. Cells run one by one; a cell that hangs runs as a task while the
test watches for what proves the hang, then interrupts the kernel. The kernel is killed
with its process group at the end, and the test checks nothing it started is left.

Verified behaviour (CPU-only TensorFlow 2.21, Python 3.11): after a 1000x1000 matmul in
the kernel, the workers of a fork pool running the same op each sit in a futex wait
with one thread and no CPU time, forever; interrupting the kernel ends the pool. A spawn
pool whose worker is defined in a cell prints "AttributeError: Can't get attribute
'square' on <module '__main__' (built-in)>" from every worker it starts, and its map
never returns.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

import gpudoctor
from gpudoctor.cli import main

nbclient = pytest.importorskip("nbclient", reason="real-kernel tests need nbclient (the jupyter extra)")
nbformat = pytest.importorskip("nbformat", reason="real-kernel tests need nbformat (the jupyter extra)")
pytest.importorskip("ipykernel", reason="real-kernel tests need ipykernel (the jupyter extra)")

pytestmark = pytest.mark.kernel

KERNEL = "gpudoctor-tests"
# Deadlines only a stuck run reaches: a kernel importing TensorFlow takes 5-15 s on a
# loaded 2-core machine.
DEADLINE = 240.0
# How long a worker that should be computing must show no CPU progress while asleep to
# be called hung (a 1000x1000 matmul keeps a running worker busy, never asleep).
HUNG_AFTER = 2.0


@pytest.fixture
def kernel_spec(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A kernel spec for this interpreter and this checkout of gpudoctor, found first."""
    root = Path(gpudoctor.__file__).resolve().parents[1]
    spec = tmp_path / "jupyter" / "kernels" / KERNEL
    spec.mkdir(parents=True)
    path = os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "gpudoctor tests", "language": "python", "env": {"PYTHONPATH": path}}))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "runtime"))
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    return KERNEL


def _notebook(cells: list[str]) -> Any:
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in cells])
    notebook.metadata["kernelspec"] = {"name": KERNEL, "display_name": "gpudoctor tests", "language": "python"}
    return notebook


def _text(cell: Any, stream: str | None = None) -> str:
    return "".join(o.get("text", "") for o in cell.outputs
                   if o.get("output_type") == "stream" and stream in (None, o.get("name")))


def _error(cell: Any) -> str | None:
    return next((o["ename"] for o in cell.outputs if o.get("output_type") == "error"), None)


class Kernel:
    """A notebook run cell by cell in a real kernel."""

    def __init__(self, notebook: Any, client: Any) -> None:
        self.notebook, self.client = notebook, client

    async def run(self, index: int) -> Any:
        cell = self.notebook.cells[index]
        await asyncio.wait_for(self.client.async_execute_cell(cell, index), DEADLINE)
        return cell

    def start(self, index: int) -> asyncio.Task[Any]:
        return asyncio.ensure_future(self.run(index))

    async def interrupt(self, task: asyncio.Task[Any]) -> Any:
        await self.client.km.interrupt_kernel()
        return await task

    def processes(self) -> list[int]:
        """The kernel and every process under it."""
        kernel = psutil.Process(self.client.km.provisioner.pid)
        return [kernel.pid, *(p.pid for p in kernel.children(recursive=True))]


def _running(pids: list[int]) -> list[int]:
    alive = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                alive.append(pid)
        except psutil.Error:
            continue
    return alive


async def _until(what: str, check: Any) -> Any:
    """Poll ``check`` until it returns something true; fail at the deadline."""
    deadline = time.monotonic() + DEADLINE
    while not (found := check()):
        if time.monotonic() > deadline:
            pytest.fail(f"gave up waiting for {what} after {DEADLINE:g} s")
        await asyncio.sleep(0.1)
    return found


async def _gone(pids: list[int]) -> None:
    await _until(f"processes {pids} to end", lambda: not _running(pids))


def _execute(notebook: Any, kernel_name: str, cwd: Path, body: Any) -> list[int]:
    """Run ``body(kernel)`` with a kernel started in ``cwd``; kill it after, and return
    every process it had, which the caller checks are gone."""
    seen: list[int] = []

    async def session() -> None:
        client = nbclient.NotebookClient(notebook, kernel_name=kernel_name, timeout=None, allow_errors=True,
                                         shutdown_kernel="immediate", resources={"metadata": {"path": str(cwd)}})
        async with client.async_setup_kernel():
            kernel = Kernel(notebook, client)
            try:
                await body(kernel)
            finally:
                seen.extend(kernel.processes())
        await _gone(seen)

    # ipykernel forwards what its children write to file descriptor 2 (a spawned worker's
    # traceback) to the notebook, except under pytest, which it recognises by this variable:
    # the kernel runs without it, as it would for a user.
    test = os.environ.pop("PYTEST_CURRENT_TEST", None)
    try:
        asyncio.run(session())
    finally:
        if test is not None:
            os.environ["PYTEST_CURRENT_TEST"] = test
    return seen


def _stalled(pids: list[int], since: dict[int, tuple[float, float]]) -> bool:
    """Has every worker been asleep, with one thread and no CPU progress, for HUNG_AFTER?
    (``since``: per worker, its CPU time and when that last changed.)"""
    now = time.monotonic()
    for pid in pids:
        try:
            process = psutil.Process(pid)
            with process.oneshot():
                busy = sum(process.cpu_times()[:2])
                asleep = process.status() == psutil.STATUS_SLEEPING and process.num_threads() == 1
        except psutil.Error:
            return False
        if not asleep or since.get(pid, (None, 0.0))[0] != busy:
            since[pid] = (busy, now)
    return all(now - since[pid][1] >= HUNG_AFTER for pid in pids)


TENSORFLOW_FORK = [
    "%load_ext gpudoctor",
    "import multiprocessing\nimport os\n\nimport tensorflow as tf",
    "x = tf.matmul(tf.ones((1000, 1000)), tf.ones((1000, 1000)))",
    "def work(i):\n"
    '    open(f"started-{os.getpid()}", "w").close()\n'
    "    return float(tf.reduce_sum(tf.matmul(tf.ones((1000, 1000)), tf.ones((1000, 1000)))))",
    'with multiprocessing.get_context("fork").Pool(2) as pool:\n    print(pool.map(work, range(2)))',
    "%gpudoctor",
    "%gpudoctor lint --select GD101",
    "%reload_ext gpudoctor",
    "%gpudoctor",
]


@pytest.mark.tensorflow
@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None, reason="needs TensorFlow")
def test_a_fork_after_a_tensorflow_op_hangs_and_gpudoctor_names_the_cell(kernel_spec: str, tmp_path: Path) -> None:
    notebook = _notebook(TENSORFLOW_FORK)
    workers: list[int] = []

    async def body(kernel: Kernel) -> None:
        for index in range(4):
            await kernel.run(index)
        hanging = kernel.start(4)
        started = await _until("both workers to start their op", lambda: sorted(tmp_path.glob("started-*")))
        assert len(started) == 2
        workers.extend(int(path.name.split("-")[1]) for path in started)
        assert set(workers) <= set(kernel.processes())  # forked by the kernel itself
        since: dict[int, tuple[float, float]] = {}
        await _until("the workers to stall", lambda: _stalled(workers, since))
        assert not hanging.done()
        cell = await kernel.interrupt(hanging)
        assert _error(cell) == "KeyboardInterrupt"
        await _gone(workers)  # leaving the with block terminated the pool
        for index in range(5, len(TENSORFLOW_FORK)):
            await kernel.run(index)

    _execute(notebook, kernel_spec, tmp_path, body)
    saved = tmp_path / "executed.ipynb"
    nbformat.write(notebook, saved)
    cells = nbformat.read(saved, as_version=4).cells

    # gpudoctor warned before the forking cell ran (printed before the pool started).
    warning = _text(cells[4], "stderr")
    assert "gpudoctor: before this cell runs:\n  cell [5] line 1: GD101 [error] the Pool forks" in warning
    assert "cell [3] line 1: TensorFlow initialized here" in warning
    # Watched as it happened: TensorFlow appeared in cell [3], with its threads.
    report = _text(cells[5], "stdout")
    assert "TensorFlow: initialized in cell [3] (its eager context exists; native threads " in report
    assert "A Pool() here would start its workers with: fork" in report
    assert "Verdict: a fork now is unsafe.\nTensorFlow was initialized in cell [3]: a forked worker that uses " \
           "TensorFlow will hang" in report
    lint = _text(cells[6], "stdout")
    assert lint.startswith("cell [5] line 1: GD101 [error]")
    assert lint.endswith("Found 1 finding in the 7 executed cells, read in the order the kernel ran them.\n")
    # Loaded again after the fact: the executed cells show which one did it.
    again = _text(cells[8], "stdout")
    assert "TensorFlow: initialized in cell [3] (its eager context exists)\n      before gpudoctor was loaded " \
           "(cell [8]); the executed cells show it: tensorflow.ones in cell [3]" in again
    assert "TensorFlow was initialized in cell [3]" in again


SPAWN_WORKER_IN_A_CELL = [
    "%load_ext gpudoctor",
    "import multiprocessing\n\n\ndef square(x):\n    return x * x",
    'with multiprocessing.get_context("spawn").Pool(1) as pool:\n    print(pool.map(square, [1, 2]))',
    "%gpudoctor lint",
]
CANNOT_GET = "AttributeError: Can't get attribute 'square' on <module '__main__'"


def test_a_spawn_worker_defined_in_a_cell_cannot_be_found(kernel_spec: str, tmp_path: Path) -> None:
    notebook = _notebook(SPAWN_WORKER_IN_A_CELL)

    async def body(kernel: Kernel) -> None:
        for index in range(2):
            await kernel.run(index)
        failing = kernel.start(2)
        await _until("a worker's AttributeError", lambda: CANNOT_GET in _text(notebook.cells[2]))
        assert not failing.done()  # the pool replaces each worker that dies: map never returns
        cell = await kernel.interrupt(failing)
        assert _error(cell) == "KeyboardInterrupt"
        await kernel.run(3)

    _execute(notebook, kernel_spec, tmp_path, body)
    lint = _text(notebook.cells[3], "stdout")
    assert "GD000" not in lint and "error" not in _text(notebook.cells[3], "stderr")
    assert lint.startswith("cell [3] line 2: GD108 [error] Pool sends `square` (a task) to spawn workers")
    assert lint.endswith("in the 4 executed cells, read in the order the kernel ran them.\n")


def test_a_spawn_worker_defined_in_a_cell_is_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The notebook of the test above, as saved: the linter reads the worker's definition
    # in a cell and the spawn pool that sends it.
    path = tmp_path / "spawn_worker_in_a_cell.ipynb"
    nbformat.write(_notebook(SPAWN_WORKER_IN_A_CELL), path)
    code = main(["lint", "--no-cache", str(path)])
    out = capsys.readouterr().out
    assert code == 1 and "GD000" not in out
    assert ": GD108 Pool sends `square` (a task) to spawn workers; `square` is defined in a notebook cell" in out

