"""The garbage collector is paused while linting, and given back as it was found."""

from __future__ import annotations

import gc
import subprocess
import sys
import weakref
from pathlib import Path

from gpudoctor.lint import gc_pause as collector

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def test_paused_inside_and_back_on_after() -> None:
    assert gc.isenabled()
    with collector.paused():
        assert not gc.isenabled()
        with collector.paused():  # nested: still off, and the outer block turns it back on
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled() and gc.get_freeze_count() == 0


def test_cycles_made_while_paused_wait_for_the_collector_to_come_back() -> None:
    class Node:
        other: Node

    with collector.paused():
        first, second = Node(), Node()
        first.other, second.other = second, first
        watch = weakref.ref(first)
        del first, second
        _ = [[index] for index in range(50_000)]  # far past the collector's threshold
        assert watch() is not None  # no collection ran
    gc.collect()
    assert watch() is None


def test_what_the_program_froze_stays_frozen() -> None:
    gc.collect()
    gc.freeze()
    try:
        before = gc.get_freeze_count()
        with collector.paused():
            pass
        assert gc.get_freeze_count() >= before and gc.isenabled()
    finally:
        gc.unfreeze()


def test_left_alone_when_the_program_turned_it_off() -> None:
    gc.disable()
    try:
        with collector.paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


_ENDING = """
import gc, sys
from pathlib import Path
from gpudoctor.cli import main
from gpudoctor.lint import gc_pause as collector
collector.process_ends_after_run()
runs = []
for _ in range(3):  # --fix lints a second time in the same process
    code = main(["lint", "--no-cache", "--exit-zero", "--jobs", "1", sys.argv[1]])
    runs.append(gc.get_freeze_count() + len(gc.get_objects()))  # every object the collector tracks
print(code, gc.isenabled(), *runs)
"""


def test_a_process_that_ends_after_the_run_leaves_it_off_and_sets_the_heap_aside() -> None:
    """And a second run in that process first frees what the first one left (it is in
    cycles: without the collector it would stay, run after run)."""
    done = subprocess.run([sys.executable, "-c", _ENDING, str(FIXTURES / "cases")],
                          capture_output=True, text=True, timeout=300, check=True)
    code, enabled, first, second, third = done.stdout.split()[-5:]
    assert (code, enabled) == ("0", "False")
    assert int(first) > 10_000
    assert int(third) < int(first) * 1.3 and int(second) < int(first) * 1.3


def test_a_worker_turns_it_off_for_good(tmp_path: Path) -> None:
    """A worker analyses file after file and then exits: the collector is off from its
    start and stays off between its files (turning it on again would traverse every parse
    it keeps)."""
    (tmp_path / "job.py").write_text("import multiprocessing as mp\nimport cupy\n\n\ndef w(i):\n"
                                     "    return cupy.ones(i)\n\n\nmp.Pool(2).map(w, [1])\n")
    code = ("import gc, pickle, sys\nfrom gpudoctor.lint import file_analysis\n"
            "from gpudoctor.lint.limits import DEFAULT_LIMITS\nfrom gpudoctor.knowledge.processes import Target\n"
            "file_analysis.start_worker(sys.argv[1], Target(11), pickle.dumps(({}, None, None, DEFAULT_LIMITS)))\n"
            "print(gc.isenabled())\n"
            "for _ in range(2):\n    [(_, outcome)] = file_analysis.analyse_in_worker([sys.argv[1] + '/job.py'])\n"
            "    print(gc.isenabled(), len(outcome.findings) > 0, outcome.errors)\n")
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True,
                          timeout=60, check=True)
    assert done.stdout.split("\n")[:3] == ["False", "False True []", "False True []"]
