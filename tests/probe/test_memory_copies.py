"""Workers that each hold a copy of the same data, run for real under the probe until the
tree passes --memory-limit: the OOM verdict says who held what, names the workers' copies
(workers-each-a-copy) and gives the fix.

Two shapes. Spawn workers that each load the data set again in their initializer (each
a fresh interpreter: its copy is its own). Fork workers that only read a list of Python
objects they inherited: each read writes the object's reference count, and copy-on-write
copies the page it lies in, so each worker ends up with a copy of its own — the known
"DataLoader workers' memory grows over a Python list" behaviour
(https://github.com/pytorch/pytorch/issues/13246).

The programs wait on what happened, not on time: no task runs before every worker holds
its copy (a Barrier in the pool's initializer); then the parent keeps each task's 4 MiB
result until the tree passes the limit. Before the barrier the tree holds about 5 x
120 MiB, under the 800 MiB limit; after it, only the parent grows.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from tests.probe.helpers import gpudoctor_json, script, wait_gone
from tests.probe.html_checks import assert_self_contained

LIMIT = ["--memory-limit", "800MiB", "--timeout", "120"]

# argv: the start method ("spawn" or "forkserver").
EACH_LOADS = """\
import multiprocessing
import sys

RECORDS = 30_000  # 4 KiB each: a data set of 117 MiB


def load():
    # Stands in for reading a data set (or a model) from disk.
    return [bytes([i % 251]) * 4096 for i in range(RECORDS)]


data = None


def init(loaded):
    global data
    data = load()  # each worker loads its own copy
    loaded.wait()  # no task before every worker holds it


def work(i):
    return bytes([i % 251]) * (4 << 20)  # a 4 MiB result the parent keeps


if __name__ == "__main__":
    data = load()
    context = multiprocessing.get_context(sys.argv[1])
    loaded = context.Barrier(4)
    kept = []
    with context.Pool(4, initializer=init, initargs=(loaded,)) as pool:
        for result in pool.imap(work, range(1_000)):
            kept.append(result)
"""

READS_INHERITED = """\
import multiprocessing

# A data set as a list of Python objects: 1.5 million strings, about 130 MiB.
data = [str(i).zfill(24) for i in range(1_500_000)]


def init(loaded):
    # Only reads the inherited list; each read writes the string's reference count.
    sum(len(s) for s in data)
    loaded.wait()


def work(i):
    return bytes([i % 251]) * (4 << 20)


if __name__ == "__main__":
    context = multiprocessing.get_context("fork")
    loaded = context.Barrier(4)
    kept = []
    with context.Pool(4, initializer=init, initargs=(loaded,)) as pool:
        for result in pool.imap(work, range(1_000)):
            kept.append(result)
"""


def _run(tmp_path: Path, source: str, *args: str) -> tuple[dict[str, Any], Path]:
    program = script(tmp_path, "copies.py", source)
    page = tmp_path / "report.html"
    code, doc, stderr = gpudoctor_json([*LIMIT, "--html", str(page), "--", sys.executable, str(program), *args])
    assert (code, doc["verdict"], doc["stop_reason"]) == (1, "oom", "memory-limit"), doc["explanation"] + stderr
    # Nothing of the tree is left running.
    assert not wait_gone([p["pid"] for p in doc["processes"]], timeout=30)
    return doc, page


def _workers(doc: dict[str, Any], start: str) -> list[int]:
    return sorted(p["pid"] for p in doc["processes"] if p["start"] == start
                  and not any("resource_tracker" in a for a in p["cmdline"]))


def test_spawn_workers_each_loading_the_data_are_named_with_the_fix(tmp_path: Path) -> None:
    doc, page = _run(tmp_path, EACH_LOADS, "spawn")
    workers = _workers(doc, "spawn")
    assert len(workers) == 4
    memory = doc["memory"]
    group = memory["workers"]
    assert group["processes"] == workers and group["copies"] is True and group["start"] == "spawn"
    # Each holds its 117 MiB data set and an interpreter; the parent holds one too.
    assert 117 << 20 < group["each"] < 180 << 20 and group["together"] > memory["total"] / 2
    ranked = {h["pid"]: h for h in memory["processes"]}
    root = next(p["pid"] for p in doc["processes"] if p["start"] == "root")
    assert ranked[root]["role"] == "parent" and memory["processes"][0]["pid"] == root
    assert sorted(ranked[w]["role"] for w in workers) == [f"spawn worker {n}" for n in range(1, 5)]
    assert all(ranked[w]["own"] > 100 << 20 for w in workers)  # USS read at the limit: their own
    explanation = doc["explanation"]
    assert "Memory by process (peak RSS, " in explanation
    assert "4 spawn workers × ~1" in explanation and "MiB (each its own copy: together " in explanation
    assert f"their parent, pid {root}, holds " in explanation and "5 copies in all" in explanation
    assert "Fix: load the data once, in the parent before the workers start" in explanation
    assert "`multiprocessing.shared_memory`" in explanation and "fewer workers" in explanation
    [cause] = [c for c in doc["causes"] if c["kind"] == "workers-each-a-copy"]
    assert (cause["certainty"], cause["rule"], cause["parent"], cause["processes"]) == (
        "observed", None, root, workers)
    shown = assert_self_contained(page.read_text())
    assert "memory" in shown.ids and "Memory by process" in shown.text
    assert "spawn worker 4" in shown.text and "each its own copy" in shown.text


def test_fork_workers_reading_a_list_of_objects_copy_it_each(tmp_path: Path) -> None:
    doc, _ = _run(tmp_path, READS_INHERITED)
    workers = _workers(doc, "fork")
    assert len(workers) == 4
    group = doc["memory"]["workers"]
    assert (group["processes"], group["measure"], group["copies"]) == (workers, "uss", True)
    # Each copied most of the ~130 MiB of strings it read (their pages, copy-on-write).
    assert group["low"] > 64 << 20
    assert "4 fork workers × " in doc["explanation"] and "of their own (each its own copy: " in doc["explanation"]
    assert "pages that copy-on-write copied for it as it wrote to them" in doc["explanation"]
    assert "counted once (PSS)" in doc["explanation"]
    assert "no list or dict of Python objects" in doc["explanation"]
    assert [c["processes"] for c in doc["causes"] if c["kind"] == "workers-each-a-copy"] == [workers]
