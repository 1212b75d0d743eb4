"""Real programs that end on (or hang after) an exception with a meaning of its own when
processes share work, under the probe: each must get its verdict, its cause, the user's
line in the explanation's text and the fix, with the exception quoted once, and leave
nothing running.

The programs are written for these tests, modelled on public reports (cited in each); the
held-out set of benchmarks/probe_holdout/ has other programs of the same kinds. Nothing
waits on a fixed sleep: a hang is the probe's own verdict after --hang-after seconds in
which no process of the tree made CPU progress, and a crash loop ends when the probe has
seen --crash-loop identical failures. The deadlines are bounds only a stuck run reaches.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from gpudoctor import hazards
from tests.probe.helpers import gpudoctor_json, marked, running, script, wait_gone

PY = sys.executable
pytestmark = pytest.mark.slow
TIMEOUT = 120

UNPICKLABLE_EXCEPTION = """\
# python/cpython#79492 (bpo-35311) and #103061: an exception class whose __init__ takes
# other arguments than it gives Exception cannot be rebuilt in the parent; the Pool's
# result-handler thread dies and starmap waits for ever.
import multiprocessing


class QuotaExceeded(Exception):
    def __init__(self, user, limit):
        super().__init__(f"{user} is over {limit} GiB")
        self.user = user
        self.limit = limit


def check(user, used):
    if used > 10:
        raise QuotaExceeded(user, 10)
    return used


if __name__ == "__main__":
    with multiprocessing.Pool(2) as pool:
        print(pool.starmap(check, [("ann", 3), ("bob", 12), ("cy", 1)]))
"""

UNPICKLABLE_RESULT = """\
# numba/numba#682 (a Pool task's result holding what cannot be pickled: "MaybeEncodingError:
# Error sending result"): here an object holding a generator.
import multiprocessing


class Chunks:
    def __init__(self, words):
        self.rest = (w.upper() for w in words)


def split(line):
    return Chunks(line.split())


if __name__ == "__main__":
    with multiprocessing.get_context("fork").Pool(2) as pool:
        result = pool.apply_async(split, ("a b c",))
        print(result.get(timeout=60))
"""

INITIALIZER_RAISES = """\
# python/cpython#87472 ("multiprocessing.Pool: an exception in the initializer makes the pool
# restart workers for ever"): every worker's initializer fails, the Pool keeps replacing them.
import multiprocessing
import os


def open_index(variable):
    global INDEX
    INDEX = os.environ[variable]


def lookup(key):
    return INDEX, key


if __name__ == "__main__":
    with multiprocessing.get_context("fork").Pool(2, initializer=open_index,
                                                  initargs=("GPUDOCTOR_NO_SUCH_VARIABLE",)) as pool:
        print(pool.map(lookup, range(4)))
"""

EXECUTOR_INITIALIZER_RAISES = """\
# The same initializer under concurrent.futures (python/cpython#87472's advice): the executor
# marks itself broken and raises BrokenProcessPool instead of starting workers for ever.
import concurrent.futures
import multiprocessing
import os


def open_index(variable):
    global INDEX
    INDEX = os.environ[variable]


def lookup(key):
    return INDEX, key


if __name__ == "__main__":
    context = multiprocessing.get_context("fork")
    with concurrent.futures.ProcessPoolExecutor(2, mp_context=context, initializer=open_index,
                                                initargs=("GPUDOCTOR_NO_SUCH_VARIABLE",)) as executor:
        print(list(executor.map(lookup, range(4))))
"""

PIPE_PEER_DIED = """\
# The multiprocessing documentation, Connection.recv: "Raises EOFError if there is nothing left
# to receive and the other end was closed": the child at the other end dies before it sends.
import multiprocessing


def produce(conn):
    rows = {"a": 1}
    conn.send(rows["b"])


if __name__ == "__main__":
    ours, theirs = multiprocessing.get_context("fork").Pipe()
    child = multiprocessing.get_context("fork").Process(target=produce, args=(theirs,))
    child.start()
    theirs.close()
    print(ours.recv())
"""

START_METHOD_TWICE = """\
# The multiprocessing documentation: set_start_method "should not be used more than once in the
# program"; a second call raises "RuntimeError: context has already been set".
import multiprocessing


def configure():
    multiprocessing.set_start_method("spawn")


if __name__ == "__main__":
    configure()
    multiprocessing.set_start_method("forkserver")
"""

LAMBDA_TO_SPAWN_POOL = """\
# The multiprocessing documentation, "Programming guidelines" (picklability): a spawn pool
# cannot pickle a lambda to send it to the workers (GD108).
import multiprocessing

if __name__ == "__main__":
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        print(pool.map(lambda x: x * 2, range(4)))
"""

DATALOADER_FDS = """\
# pytorch/pytorch#973 and #11201: with the file_descriptor sharing strategy every tensor a
# DataLoader worker returns is an open descriptor; keeping them all runs out of descriptors.
import resource

import torch
from torch.utils.data import DataLoader, Dataset

resource.setrlimit(resource.RLIMIT_NOFILE, (160, 160))


class Pairs(Dataset):
    def __len__(self):
        return 50_000

    def __getitem__(self, i):
        return torch.ones(4) * i, torch.zeros(2)


if __name__ == "__main__":
    held = []
    for x, y in DataLoader(Pairs(), batch_size=2, num_workers=2):
        held.extend((x, y))
    print(len(held))
"""

DATALOADER_SHM = """\
# pytorch/pytorch#5040 and #16979: /dev/shm (64 MB in a Docker container) too small for the
# DataLoader's batches in flight. The program mounts a 12 MiB tmpfs on /dev/shm in a mount
# namespace of its own (as root), so the host's /dev/shm is untouched.
import ctypes

libc = ctypes.CDLL(None, use_errno=True)
assert libc.unshare(0x00020000) == 0, "unshare"
assert libc.mount(None, b"/", None, 0x4000 | (1 << 18), None) == 0, "make / private"
assert libc.mount(b"tmpfs", b"/dev/shm", b"tmpfs", 0, b"size=12m") == 0, "mount"

import torch  # noqa: E402
from torch.utils.data import DataLoader, Dataset  # noqa: E402


class Frames(Dataset):
    def __len__(self):
        return 40

    def __getitem__(self, i):
        return torch.full((1024, 1024), float(i))


if __name__ == "__main__":
    seen = 0
    for frames in DataLoader(Frames(), batch_size=4, num_workers=2, prefetch_factor=2):
        seen += frames.shape[0]
    print(seen)
"""


def _probe(tmp_path: Path, name: str, source: str, *options: str) -> tuple[dict[str, Any], Path]:
    path = script(tmp_path, name, source)
    _, doc, _ = gpudoctor_json(["--timeout", str(TIMEOUT), "--hang-after", "3", *options, "--", PY, str(path)],
                               timeout=TIMEOUT + 60)
    return doc, path


def _cause(doc: dict[str, Any], kind: str) -> dict[str, Any]:
    found = [c for c in doc["causes"] if c["kind"] == kind]
    assert found, (kind, [c["kind"] for c in doc["causes"]], doc["explanation"])
    return found[0]


def _nothing_left(doc: dict[str, Any], mark: str) -> None:
    pids = [p["pid"] for p in doc["processes"]]
    assert wait_gone(pids) == []
    assert running(marked(mark)) == []


def _quoted_once(doc: dict[str, Any], text: str) -> None:
    assert doc["explanation"].count(text) == 1, doc["explanation"]


def test_an_exception_the_parent_cannot_unpickle_is_why_the_pool_hangs(tmp_path: Path, no_leftovers: str) -> None:
    doc, path = _probe(tmp_path, "quota.py", UNPICKLABLE_EXCEPTION)
    assert doc["verdict"] == "hung"
    hazard = hazards.TASK_EXCEPTION_UNPICKLABLE
    cause = _cause(doc, hazard.cause)
    assert cause["fix"] == hazard.fix
    text = doc["explanation"]
    assert f"your code {path}:16: raise QuotaExceeded(user, 10)" in text  # the task's raise
    assert f"`__init__` ({path}:8)" in text  # the class that cannot be rebuilt
    assert f"called from your code {path}:22" in text  # the starmap that waits
    assert "the tasks run `check`, defined at" in text
    _quoted_once(doc, "QuotaExceeded.__init__() missing 1 required positional argument")
    assert hazard.fix_line in text.splitlines()
    _nothing_left(doc, no_leftovers)


def test_a_result_that_cannot_be_pickled_names_the_task_and_what_it_held(tmp_path: Path,
                                                                          no_leftovers: str) -> None:
    doc, path = _probe(tmp_path, "chunks.py", UNPICKLABLE_RESULT)
    assert doc["verdict"] == "failed"
    hazard = hazards.TASK_RESULT_UNPICKLABLE
    assert _cause(doc, hazard.cause)["fix"] == hazard.fix
    text = doc["explanation"]
    assert f"At your code {path}:18 (in <module>): print(result.get(timeout=60))" in text
    assert "returned a `Chunks`, which holds a `generator`" in text
    _quoted_once(doc, "MaybeEncodingError: Error sending result")
    assert "Last line of stderr" not in text
    assert hazard.fix_line in text.splitlines()
    _nothing_left(doc, no_leftovers)


def test_a_pool_initializer_that_raises_is_a_crash_loop_with_its_fix(tmp_path: Path, no_leftovers: str) -> None:
    doc, path = _probe(tmp_path, "index.py", INITIALIZER_RAISES, "--crash-loop", "6")
    assert doc["verdict"] == "crash-loop"
    hazard = hazards.POOL_INITIALIZER_FAILED
    assert _cause(doc, hazard.cause)["fix"] == hazard.fix
    text = doc["explanation"]
    assert f"They failed at your code {path}:9 (in open_index): INDEX = os.environ[variable]" in text
    assert hazard.fix_line in text.splitlines()
    _nothing_left(doc, no_leftovers)


def test_a_broken_process_pool_names_the_initializer_that_broke_it(tmp_path: Path, no_leftovers: str) -> None:
    doc, path = _probe(tmp_path, "index_executor.py", EXECUTOR_INITIALIZER_RAISES)
    assert doc["verdict"] == "failed"
    hazard = hazards.BROKEN_PROCESS_POOL
    assert _cause(doc, hazard.cause)["fix"] == hazard.fix
    text = doc["explanation"]
    assert f"At your code {path}:21 (in <module>): print(list(executor.map(lookup, range(4))))" in text
    assert f"A worker's initializer raised KeyError: 'GPUDOCTOR_NO_SUCH_VARIABLE', at your code {path}:10" in text
    _quoted_once(doc, "BrokenProcessPool: A process in the process pool was terminated abruptly")
    _nothing_left(doc, no_leftovers)


def test_eof_on_a_pipe_names_the_child_that_died_at_the_other_end(tmp_path: Path, no_leftovers: str) -> None:
    doc, path = _probe(tmp_path, "pipe.py", PIPE_PEER_DIED)
    assert doc["verdict"] == "failed"
    hazard = hazards.PEER_PROCESS_GONE
    cause = _cause(doc, hazard.cause)
    child = next(p for p in doc["processes"] if p["start"] == "fork")
    text = doc["explanation"]
    assert f"At your code {path}:16 (in <module>): print(ours.recv())" in text
    assert f"most likely pid {child['pid']} (fork) exited with status 1 (KeyError: 'b'" in text
    assert cause["fix"] == hazard.fix and hazard.fix_line in text.splitlines()
    _nothing_left(doc, no_leftovers)


def test_setting_the_start_method_twice_shows_the_second_call(tmp_path: Path, no_leftovers: str) -> None:
    doc, path = _probe(tmp_path, "twice.py", START_METHOD_TWICE)
    assert doc["verdict"] == "failed"
    hazard = hazards.START_METHOD_SET_TWICE
    assert _cause(doc, hazard.cause)["fix"] == hazard.fix
    text = doc["explanation"]
    assert f"At your code {path}:12 (in <module>): multiprocessing.set_start_method(\"forkserver\")" in text
    _quoted_once(doc, "context has already been set")
    assert hazard.fix_line in text.splitlines()
    _nothing_left(doc, no_leftovers)


def test_a_lambda_sent_to_a_spawn_pool_shows_the_users_line(tmp_path: Path, no_leftovers: str) -> None:
    doc, path = _probe(tmp_path, "lam.py", LAMBDA_TO_SPAWN_POOL)
    assert doc["verdict"] == "failed"
    hazard = hazards.WORKER_NOT_IMPORTABLE
    cause = _cause(doc, hazard.cause)
    assert cause["rule"] == "GD108" and cause["fix"] == hazard.fix
    text = doc["explanation"]
    assert f"At your code {path}:7 (in <module>): print(pool.map(lambda x: x * 2, range(4)))" in text
    assert hazard.fix_line in text.splitlines()
    _nothing_left(doc, no_leftovers)


needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch")


@needs_torch
def test_dataloader_out_of_descriptors_gives_the_sharing_strategy_fix(tmp_path: Path, no_leftovers: str) -> None:
    doc, path = _probe(tmp_path, "pairs.py", DATALOADER_FDS)
    assert doc["verdict"] == "failed"
    hazard = hazards.TOO_MANY_OPEN_FILES
    assert _cause(doc, hazard.cause)["fix"] == hazard.fix
    text = doc["explanation"]
    assert f"At your code {path}:21 (in <module>)" in text
    assert "open-file limit of" in text
    assert "set_sharing_strategy('file_system')" in hazard.fix_line and hazard.fix_line in text.splitlines()
    assert "Last line of stderr" not in text
    _nothing_left(doc, no_leftovers)


@needs_torch
@pytest.mark.skipif(os.geteuid() != 0, reason="mounts a small /dev/shm in a mount namespace (needs root)")
def test_dataloader_with_a_small_dev_shm_gives_the_shm_size_fix(tmp_path: Path, no_leftovers: str) -> None:
    doc, path = _probe(tmp_path, "frames.py", DATALOADER_SHM)
    assert doc["verdict"] in ("failed", "crashed")
    hazard = hazards.SHARED_MEMORY_FULL
    assert _cause(doc, hazard.cause)["fix"] == hazard.fix
    text = doc["explanation"]
    assert f"At your code {path}:25 (in <module>)" in text
    assert "--shm-size" in hazard.fix_line and hazard.fix_line in text.splitlines()
    _nothing_left(doc, no_leftovers)


WORKERS_OUT_OF_MEMORY = """\
# A Pool whose workers each build a large table under a per-process address-space budget
# (as a batch scheduler's limit, or `ulimit -v`, gives them): the allocation fails with
# MemoryError in the worker and Pool.map raises it in the parent (the shape of
# python/cpython#82124's reports of memory errors coming back through Pool.map).
import multiprocessing
import resource

BUDGET = 400 * 2**20


def limit():
    resource.setrlimit(resource.RLIMIT_AS, (BUDGET, BUDGET))


def table(n):
    return len(bytearray(n * 2**20))


if __name__ == "__main__":
    with multiprocessing.get_context("fork").Pool(2, initializer=limit) as pool:
        print(pool.map(table, [16, 32, 1024, 16]))
"""


def test_a_memory_error_from_a_pool_worker_is_a_memory_story(tmp_path: Path, no_leftovers: str) -> None:
    doc, path = _probe(tmp_path, "tables.py", WORKERS_OUT_OF_MEMORY)
    assert doc["verdict"] == "failed"
    hazard = hazards.MEMORY_ERROR
    assert _cause(doc, hazard.cause)["fix"] == hazard.fix
    text = doc["explanation"]
    assert f"At your code {path}:21 (in <module>): print(pool.map(table, [16, 32, 1024, 16]))" in text
    assert "raised in a worker, by a task, and raised again here by the pool" in text
    assert "address-space limit" in text
    assert hazard.fix_line in text.splitlines()
    _nothing_left(doc, no_leftovers)


QUEUE_AS_TASK_ARGUMENT = """\
# The multiprocessing documentation, "Programming guidelines" ("Explicitly pass resources to
# child processes": at their creation): a Queue handed to Pool tasks as an argument is pickled
# by the pool's task-handler thread and refuses ("Queue objects should only be shared between
# processes through inheritance").
import multiprocessing


def crunch(n, progress):
    progress.put(n)
    return n * n


if __name__ == "__main__":
    progress = multiprocessing.Queue()
    with multiprocessing.get_context("fork").Pool(2) as pool:
        squares = pool.starmap(crunch, [(n, progress) for n in range(8)])
    print(squares)
"""

POOL_ON_SELF = """\
# The shape of DEAP/deap#434: a class keeps its Pool and maps its own method; the bound method
# drags the object, and its pool, into every task ("pool objects cannot be passed between
# processes or pickled").
import multiprocessing


class Thumbnailer:
    def __init__(self, size):
        self.size = size
        self.workers = multiprocessing.get_context("fork").Pool(2)

    def shrink(self, width):
        return min(width, self.size)

    def run(self, widths):
        return list(self.workers.imap(self.shrink, widths))


if __name__ == "__main__":
    print(Thumbnailer(64).run([10, 100, 1000]))
"""

SPAWNED_PROCESS_RAISES = """\
# The torch.multiprocessing documentation ("Spawning subprocesses"): when one process fails,
# the others are killed and the exception is raised with the failed process's traceback.
# Process 2's settings lack a key; processes 0 and 1 wait (as for a collective) until spawn
# terminates them.
import threading

import torch.multiprocessing as mp

SETTINGS = [{"lr": 0.1}, {"lr": 0.2}, {"learning_rate": 0.3}]


def worker(index, ready):
    lr = SETTINGS[index]["lr"]
    threading.Event().wait()


if __name__ == "__main__":
    mp.spawn(worker, args=(None,), nprocs=3)
"""

SPAWNED_PROCESS_EXITS = """\
# The torch.multiprocessing documentation (ProcessExitedException): a process that exits with a
# status of its own, with no exception to report, ends the spawn; the other is terminated.
import sys
import threading

import torch.multiprocessing as mp


def worker(index, shards):
    if index >= len(shards):
        sys.exit(3)
    threading.Event().wait()


if __name__ == "__main__":
    mp.spawn(worker, args=(["a.bin"],), nprocs=2)
"""


def test_a_queue_passed_as_a_task_argument_names_where_it_is_made(tmp_path: Path, no_leftovers: str) -> None:
    doc, path = _probe(tmp_path, "squares.py", QUEUE_AS_TASK_ARGUMENT)
    assert doc["verdict"] == "failed"
    hazard = hazards.SYNC_OBJECT_PICKLED
    assert _cause(doc, hazard.cause)["fix"] == hazard.fix
    text = doc["explanation"]
    assert (f"At your code {path}:16 (in <module>): squares = pool.starmap(crunch, [(n, progress) for n in "
            "range(8)])") in text
    assert "task-handler thread pickles each task" in text and "a `Queue` was in it" in text
    assert f"It is made (`Queue()`) at your code {path}:14: progress = multiprocessing.Queue()." in text
    _quoted_once(doc, "Queue objects should only be shared between processes through inheritance")
    assert "Last line of stderr" not in text
    assert "initargs" in hazard.fix_line and hazard.fix_line in text.splitlines()
    _nothing_left(doc, no_leftovers)


def test_a_pool_kept_on_self_names_the_bound_method_and_the_attribute(tmp_path: Path, no_leftovers: str) -> None:
    doc, path = _probe(tmp_path, "thumbs.py", POOL_ON_SELF)
    assert doc["verdict"] == "failed"
    hazard = hazards.POOL_PICKLED
    assert _cause(doc, hazard.cause)["fix"] == hazard.fix
    text = doc["explanation"]
    assert f"At your code {path}:16 (in Thumbnailer.run): return list(self.workers.imap(self.shrink, widths))" in text
    assert "`self.shrink` is a bound method: pickling it for the workers pickles `self`" in text
    assert f"`self.workers` holds it, set at your code {path}:10:" in text
    _quoted_once(doc, "pool objects cannot be passed between processes or pickled")
    assert "__getstate__" in hazard.fix_line and hazard.fix_line in text.splitlines()
    _nothing_left(doc, no_leftovers)


@needs_torch
def test_a_spawned_process_that_raised_is_named_with_its_line_and_the_others_are_its_effect(
        tmp_path: Path, no_leftovers: str) -> None:
    doc, path = _probe(tmp_path, "sweep.py", SPAWNED_PROCESS_RAISES)
    assert doc["verdict"] == "failed"
    hazard = hazards.SPAWNED_PROCESS_RAISED
    cause = _cause(doc, hazard.cause)
    assert cause["fix"] == hazard.fix
    failed = [p for p in doc["processes"] if p["start"] == "spawn" and p["exit_code"] == 1]
    assert len(failed) == 1 and failed[0]["pid"] in cause["processes"]
    text = doc["explanation"]
    assert (f"Process 2 of `torch.multiprocessing.spawn` (pid {failed[0]['pid']}) raised KeyError: 'lr', at your "
            f"code {path}:13 (in worker): lr = SETTINGS[index][\"lr\"].") in text
    assert "stopped by spawn after process 2 failed, as a consequence, not a cause (process 0, pid" in text
    _quoted_once(doc, "KeyError: 'lr'")
    assert hazard.fix_line in text.splitlines()
    _nothing_left(doc, no_leftovers)


@needs_torch
def test_a_spawned_process_that_exited_is_named_with_its_status(tmp_path: Path, no_leftovers: str) -> None:
    doc, path = _probe(tmp_path, "shards.py", SPAWNED_PROCESS_EXITS)
    assert doc["verdict"] == "failed"
    hazard = hazards.SPAWNED_PROCESS_EXITED
    cause = _cause(doc, hazard.cause)
    assert cause["fix"] == hazard.fix
    failed = next(p for p in doc["processes"] if p["start"] == "spawn" and p["exit_code"] == 3)
    assert failed["pid"] in cause["processes"]
    text = doc["explanation"]
    assert f"Process 1 of `torch.multiprocessing.spawn`: pid {failed['pid']} (spawn) exited with status 3" in text
    assert f"from your code worker ({path}:11)" in text
    assert "stopped by spawn after process 1 failed, as a consequence, not a cause (process 0, pid" in text
    assert hazard.fix_line in text.splitlines()
    _nothing_left(doc, no_leftovers)
