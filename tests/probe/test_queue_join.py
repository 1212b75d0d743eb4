"""A parent that joins a child before it reads the child's multiprocessing Queue, under
the probe: the deadlock happens for real (the child's item is bigger than a pipe holds, or
its queue has a maxsize and is full), and the probe must call it hung, name the cause with
the parent's join line and the child's place, and leave nothing running.

Nothing waits on a fixed sleep: the hang is the probe's own verdict after --hang-after
seconds in which no process of the tree made CPU progress (the parent waits in waitpid,
the child in a lock, its feeder thread in a write to a full pipe). The deadlines given are
bounds only a stuck run reaches.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

from gpudoctor import hazards
from tests.probe.helpers import gpudoctor_json, marked, running, script, wait_gone

PY = sys.executable
pytestmark = pytest.mark.slow

# Only a run that is stuck reaches these: the runs take seconds.
TIMEOUT = 120
HANG_AFTER = "3"

JOIN_BEFORE_GET = """\
# A child puts its result, bigger than a pipe holds (1 MB; Linux pipes hold 64 KiB), on a
# multiprocessing.Queue and returns; its parent joins it before it reads the queue. Modelled
# on python/cpython#73983 ("Deadlock with multiprocessing.Queue()") and n8n-io/n8n#19084 (a
# runner that hung on every result over 64 KB); CPython's documentation, multiprocessing
# programming guidelines, "Joining processes that use queues".
import multiprocessing
import sys


def produce(queue):
    queue.put(b"x" * 1_000_000)


if __name__ == "__main__":
    context = multiprocessing.get_context(sys.argv[1])
    queue = context.Queue()
    child = context.Process(target=produce, args=(queue,))
    child.start()
    child.join()
    print(len(queue.get()))
"""

FULL_QUEUE = """\
# The same with small items on a bounded queue (python/cpython#91594 puts in a loop and
# joins): the child's third put waits for room that only the parent's get would make.
import multiprocessing
import sys


def produce(queue):
    for i in range(3):
        queue.put(i)


if __name__ == "__main__":
    context = multiprocessing.get_context(sys.argv[1])
    queue = context.Queue(maxsize=1)
    child = context.Process(target=produce, args=(queue,))
    child.start()
    child.join()
    print(queue.get())
"""

GET_BEFORE_JOIN = JOIN_BEFORE_GET.replace("    child.join()\n    print(len(queue.get()))\n",
                                          "    print(len(queue.get()))\n    child.join()\n")


def _line(source: str, text: str) -> int:
    return source.splitlines().index(text) + 1


def _run(tmp_path: Path, source: str, *args: str) -> tuple[Path, int, dict[str, Any]]:
    """Supervise ``source`` with the start method ``args[0]`` and the probe options after it."""
    path = script(tmp_path, "prog.py", source)
    code, doc, _ = gpudoctor_json(["--timeout", str(TIMEOUT), "--hang-after", HANG_AFTER, *args[1:], "--",
                                   PY, str(path), args[0]], timeout=TIMEOUT + 60)
    return path, code, doc


def _child(doc: dict[str, Any]) -> dict[str, Any]:
    """The Process the parent started (not the resource tracker of a spawn context)."""
    children: list[dict[str, Any]] = [p for p in doc["processes"]
                                      if p["start"] != "root" and "resource_tracker" not in " ".join(p["cmdline"])]
    assert len(children) == 1, children
    return children[0]


@pytest.mark.parametrize(("method", "native"), [("fork", True), ("spawn", True), ("fork", False)])
def test_a_parent_that_joins_before_it_reads_the_queue_is_hung_with_its_join_line_named(
        tmp_path: Path, method: str, native: bool, no_leftovers: str) -> None:
    path, code, doc = _run(tmp_path, JOIN_BEFORE_GET, method, *([] if native else ["--no-native-stacks"]))
    assert (code, doc["verdict"], doc["stop_reason"]) == (1, "hung", "hung"), doc["explanation"]
    root = next(p for p in doc["processes"] if p["start"] == "root")
    child = _child(doc)
    assert child["start"] == method and child["verdict"] == "hung"
    if not native:  # the feeder thread is read from faulthandler's dump of every thread
        assert child["stack_source"] == "faulthandler"
    # py-spy names the script as sys.path finds it (prog.py), faulthandler by its whole path.
    join_at = f"{path.name}:{_line(JOIN_BEFORE_GET, '    child.join()')})"
    start_at = f"{path.name}:{_line(JOIN_BEFORE_GET, '    child.start()')})"
    lines = doc["explanation"].splitlines()
    lead = next(line for line in lines if line.startswith("Joined before its queue was read: "))
    assert lead.startswith(f"Joined before its queue was read: pid {root['pid']} joins process {child['pid']} "
                           "before reading what it put on a multiprocessing Queue; the child cannot exit until "
                           "its items are read.")
    assert "join (" in lead and "multiprocessing/process.py:" in lead
    assert "called from your code <module> (" in lead and lead.endswith(join_at + "."), lead
    held = next(line for line in lines if line.startswith(f"pid {child['pid']} has returned from its target"))
    assert "_finalize_join (" in held and "multiprocessing/queues.py:" in held
    assert "blocked writing an item into the queue's pipe in " in held and "send_bytes (" in held
    assert hazards.QUEUE_JOINED_BEFORE_READ.why in lines and hazards.QUEUE_JOINED_BEFORE_READ.fix_line in lines
    assert "cancel_join_thread" in hazards.QUEUE_JOINED_BEFORE_READ.fix
    # The place shown is the parent's join, never the fork child's copy of the start line.
    assert start_at not in doc["explanation"] and start_at not in (child["blocked_in"] or "")
    assert [(c["kind"], c["rule"], c["certainty"], c["parent"], c["processes"]) for c in doc["causes"]] == [
        ("join-before-queue-drained", None, "observed", root["pid"], [child["pid"]])]
    assert hazards.MULTITHREADED_FORK.why not in lines
    assert running(p["pid"] for p in doc["processes"]) == []
    assert wait_gone(marked(no_leftovers), timeout=30) == []


def test_a_child_waiting_to_put_on_a_full_queue_is_named_with_its_put_line(
        tmp_path: Path, no_leftovers: str) -> None:
    _, code, doc = _run(tmp_path, FULL_QUEUE, "fork")
    assert (code, doc["verdict"], doc["stop_reason"]) == (1, "hung", "hung"), doc["explanation"]
    child = _child(doc)
    put_at = f"prog.py:{_line(FULL_QUEUE, '        queue.put(i)')}): the queue is full (its maxsize)"
    held = next(line for line in doc["explanation"].splitlines() if line.startswith(f"pid {child['pid']} waits in "))
    assert "put (" in held and "multiprocessing/queues.py:" in held
    assert "called from your code produce (" in held and put_at in held, held
    (cause,) = doc["causes"]
    assert (cause["kind"], cause["processes"]) == ("join-before-queue-drained", [child["pid"]])
    assert any(put_at in line for line in cause["evidence"]), cause
    assert running(p["pid"] for p in doc["processes"]) == []
    assert wait_gone(marked(no_leftovers), timeout=30) == []


def test_reading_the_queue_before_the_join_is_ok_and_names_no_cause(tmp_path: Path) -> None:
    _, code, doc = _run(tmp_path, GET_BEFORE_JOIN, "fork")
    assert (code, doc["verdict"], doc["causes"]) == (0, "ok", []), doc["explanation"]


@pytest.mark.tensorflow
@pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None, reason="needs TensorFlow")
def test_a_queue_held_child_of_an_initialized_parent_is_the_queue_s_not_the_framework_s(
        tmp_path: Path, no_leftovers: str) -> None:
    # An earlier step of the program (or, under the pytest plugin, an earlier test) ran
    # TensorFlow in the parent: the child is forked after it, but waits at its exit for its
    # queue, never in TensorFlow. The queue is the cause; the fork is a hazard of its own.
    source = JOIN_BEFORE_GET.replace("import multiprocessing\n", "import multiprocessing\n\nimport tensorflow as tf\n")
    source = source.replace("    context = multiprocessing", "    print(float(tf.reduce_sum(tf.ones((64, 64)))))\n"
                                                          "    context = multiprocessing")
    _, code, doc = _run(tmp_path, source, "fork")
    assert (code, doc["verdict"]) == (1, "hung"), doc["explanation"]
    child = _child(doc)
    assert [(c["kind"], c["certainty"]) for c in doc["causes"]] == [
        ("join-before-queue-drained", "observed"), ("fork-after-init", "latent")]
    lines = doc["explanation"].splitlines()
    assert ("That is a hazard of its own (GD101) for a child that runs TensorFlow, but this one waits elsewhere, "
            "as told below.") in lines
    assert hazards.why_for(hazards.FORK_AFTER_INIT, ["tensorflow"]) not in lines
    assert running(p["pid"] for p in doc["processes"]) == [] and child["verdict"] == "hung"
    assert wait_gone(marked(no_leftovers), timeout=30) == []
