"""The garbage collector is paused while linting, and given back as it was found."""

from __future__ import annotations

import gc
import subprocess
import sys
import weakref
from pathlib import Path

from gpudoctor.lint import collector

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
from gpudoctor.lint import collector
collector.process_ends_after_run()
code = main(["lint", "--no-cache", "--exit-zero", "--jobs", "1", sys.argv[1]])
print(code, gc.isenabled(), gc.get_freeze_count() > 0)
"""


def test_a_process_that_ends_after_the_run_leaves_it_off_and_sets_the_heap_aside() -> None:
    done = subprocess.run([sys.executable, "-c", _ENDING, str(FIXTURES / "cases")],
                          capture_output=True, text=True, timeout=300, check=True)
    assert done.stdout.split()[-3:] == ["0", "False", "True"]
