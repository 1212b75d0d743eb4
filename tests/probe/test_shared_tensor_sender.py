"""Tensors taken from a torch.multiprocessing queue after their sender exited, under the probe.

With the default ``file_descriptor`` sharing strategy a queued tensor is a handle: the
receiver's ``get()`` fetches the storage's descriptor from the sending process's
``resource_sharer`` (pytorch/pytorch#65418, #70536). A sender that has exited fails that
``get()`` (FileNotFoundError, ConnectionRefusedError, ...). The probe must name the cause
from the traceback's frames, the receiver's line, the sender that had exited, and the fix.
The programs are written for these tests: the receiver reads only after it has seen the
sender exit (``join``), so the failure is certain, not a race.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

from gpudoctor import hazards
from gpudoctor.probe import explain_exceptions
from gpudoctor.probe.explain_exceptions import COMMAND, Seen
from gpudoctor.probe.failures import Frame, Raised
from tests.probe.helpers import gpudoctor_json, marked, running, script, wait_gone

PY = sys.executable
needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch")
TIMEOUT = 120
LIB = "/usr/lib/python3.11"
USER = Frame("/home/me/learner.py", 45, "<module>", "step, obs = queue.get()")
QUEUE = Frame(f"{LIB}/multiprocessing/queues.py", 122, "Queue.get", "return _ForkingPickler.loads(res)")
REBUILD = Frame("/venv/site-packages/torch/multiprocessing/reductions.py", 538, "rebuild_storage_fd",
                "fd = df.detach()")
SHARER = Frame(f"{LIB}/multiprocessing/resource_sharer.py", 86, "_ResourceSharer.get_connection",
               "c = Client(address, authkey=process.current_process().authkey)")
CONNECTION = Frame(f"{LIB}/multiprocessing/connection.py", 395, "Connection._recv", "chunk = read(handle, remaining)")

# The command is the receiver: it joins the producer, then reads what it left queued.
PARENT_READS_LATE = """\
import torch
import torch.multiprocessing as mp


def produce(queue, n):
    for i in range(n):
        queue.put(torch.full((16,), float(i)))


if __name__ == "__main__":
    queue = mp.Queue()
    producer = mp.Process(target=produce, args=(queue, 3))
    producer.start()
    producer.join()
    total = 0.0
    for _ in range(3):
        total += queue.get().sum().item()
    print(total)
"""

# A worker is the receiver, started once the producer (another worker) has exited.
WORKER_READS_LATE = """\
import sys

import torch
import torch.multiprocessing as mp


def produce(queue):
    queue.put({"weights": torch.ones(4, 4), "step": 1})


def consume(queue):
    batch = queue.get()
    print(batch["weights"].sum())


if __name__ == "__main__":
    queue = mp.Queue()
    producer = mp.Process(target=produce, args=(queue,), name="producer")
    producer.start()
    producer.join()
    consumer = mp.Process(target=consume, args=(queue,), name="consumer")
    consumer.start()
    consumer.join()
    sys.exit(consumer.exitcode)
"""


def _probe(tmp_path: Path, name: str, source: str) -> tuple[dict[str, Any], Path]:
    path = script(tmp_path, name, source)
    _, doc, _ = gpudoctor_json(["--timeout", str(TIMEOUT), "--", PY, str(path)], timeout=TIMEOUT + 60)
    return doc, path


def _cause(doc: dict[str, Any], mark: str) -> dict[str, Any]:
    kind = hazards.SHARED_TENSOR_SENDER_EXITED.cause
    kinds = [c["kind"] for c in doc["causes"]]
    assert kinds and kinds[0] == kind, (kinds, doc["explanation"])
    assert hazards.PEER_PROCESS_GONE.cause not in kinds
    cause: dict[str, Any] = doc["causes"][0]
    assert cause["fix"].startswith(hazards.SHARED_TENSOR_SENDER_EXITED.fix.rstrip("."))
    assert 'set_sharing_strategy("file_system")' in cause["fix"] and f"Fix: {cause['fix']}" in doc["explanation"]
    assert wait_gone([p["pid"] for p in doc["processes"]]) == []
    assert running(marked(mark)) == []
    return cause


def _producer(doc: dict[str, Any]) -> dict[str, Any]:
    return next(p for p in doc["processes"] if p["start"] != "root" and p["exit_code"] == 0)


@pytest.mark.parametrize(("type_", "frames", "kind"), [
    ("FileNotFoundError", (USER, QUEUE, REBUILD, SHARER), hazards.SHARED_TENSOR_SENDER_EXITED.cause),
    ("ConnectionResetError", (USER, QUEUE, REBUILD, SHARER, CONNECTION), hazards.SHARED_TENSOR_SENDER_EXITED.cause),
    ("EOFError", (USER, QUEUE, REBUILD, SHARER, CONNECTION), hazards.SHARED_TENSOR_SENDER_EXITED.cause),
    # The sharer without a framework's shared item (a Connection sent under spawn): a peer gone.
    ("ConnectionResetError", (USER, SHARER, CONNECTION), hazards.PEER_PROCESS_GONE.cause),
    # The message alone is any missing file.
    ("FileNotFoundError", (USER,), None),
    # Another error on the way through those frames is not the sender's exit.
    ("RuntimeError", (USER, QUEUE, REBUILD, SHARER), None),
])
def test_the_cause_is_keyed_on_the_frames_not_the_message(type_: str, frames: tuple[Frame, ...],
                                                          kind: str | None) -> None:
    seen = Seen(1, COMMAND, Raised(type_, "[Errno 2] No such file or directory", frames), False)
    known = next((k for k in explain_exceptions.CATALOGUE if k.matches(seen)), None)
    assert (known.hazard.cause if known else None) == kind


@pytest.mark.slow
@needs_torch
def test_the_command_reading_tensors_its_exited_producer_sent_is_told_why(tmp_path: Path,
                                                                         no_leftovers: str) -> None:
    doc, path = _probe(tmp_path, "learner.py", PARENT_READS_LATE)
    assert doc["verdict"] == "failed"
    cause = _cause(doc, no_leftovers)
    root = next(p for p in doc["processes"] if p["start"] == "root")
    producer = _producer(doc)
    assert cause["processes"] == [root["pid"], producer["pid"]]
    text = doc["explanation"]
    assert f"At your code {path}:17 (in <module>): total += queue.get().sum().item()" in text
    assert f"pid {producer['pid']} (Process-1, running `produce`) exited with status 0" in text
    assert "Last line of stderr" not in text


@pytest.mark.slow
@needs_torch
def test_a_worker_reading_tensors_from_an_exited_worker_is_told_why(tmp_path: Path, no_leftovers: str) -> None:
    doc, path = _probe(tmp_path, "pipeline.py", WORKER_READS_LATE)
    assert doc["verdict"] == "failed"
    cause = _cause(doc, no_leftovers)
    consumer = next(p for p in doc["processes"] if p["start"] != "root" and p["exit_code"] == 1)
    producer = _producer(doc)
    assert cause["processes"] == [consumer["pid"], producer["pid"]]
    text = doc["explanation"]
    assert f"At your code {path}:12 (in consume): batch = queue.get()" in text
    assert f"pid {producer['pid']} (producer, running `produce`) exited with status 0" in text
