"""The run's budgets travel as one ``Limits`` object: to the analysis, to the workers, and
past the cache (which holds findings made with the defaults only)."""

from __future__ import annotations

import dataclasses
import pickle
import subprocess
import sys
from pathlib import Path

from gpudoctor.knowledge.processes import Target
from gpudoctor.lint import file_analysis
from gpudoctor.lint.cache import Cache
from gpudoctor.lint.engine import lint_paths
from gpudoctor.lint.limits import DEFAULT_LIMITS, Limits
from gpudoctor.lint.rules._registry import all_rules
from gpudoctor.lint.selection import build_selection
from gpudoctor.lint.settings import Settings

FORK_AFTER_INIT = ("import multiprocessing as mp\nimport cupy as cp\n\n\ndef work(x):\n    return x\n\n\n"
                   "cp.ones(3)\nmp.Pool(2).map(work, [1])\n")


def test_the_limits_module_imports_nothing_heavy() -> None:
    # Engine and workers import it on every run, also the runs that parse nothing.
    code = ("import sys, gpudoctor.lint.limits\n"
            "print(sorted(m for m in sys.modules if m.startswith(('libcst', 'gpudoctor.lint.'))))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert run.stdout.strip() == "['gpudoctor.lint.limits']"


def test_limits_are_frozen_and_compare_by_value() -> None:
    smaller = dataclasses.replace(DEFAULT_LIMITS, max_call_depth=3)
    assert smaller != DEFAULT_LIMITS and smaller == Limits(max_call_depth=3)
    assert pickle.loads(pickle.dumps(smaller)) == smaller
    try:
        smaller.max_call_depth = 4  # type: ignore[misc]
    except dataclasses.FrozenInstanceError:
        pass
    else:
        raise AssertionError("Limits must be frozen")


def test_a_worker_analyses_with_the_limits_it_was_sent(tmp_path: Path) -> None:
    smaller = dataclasses.replace(DEFAULT_LIMITS, max_events=7)
    file_analysis.start_worker(str(tmp_path), Target(11), pickle.dumps(({}, None, None, smaller)))
    try:
        assert isinstance(file_analysis._worker, tuple), file_analysis._worker  # noqa: SLF001
        assert file_analysis._worker[0].limits == smaller  # noqa: SLF001
    finally:
        file_analysis._worker = None  # noqa: SLF001


def test_a_run_with_other_limits_neither_reads_nor_writes_the_cache(tmp_path: Path) -> None:
    (tmp_path / "main.py").write_text(FORK_AFTER_INIT)
    codes = [r.code for r in all_rules()]
    settings = Settings(build_selection(codes, codes), 12, "linux", tmp_path)
    files = [tmp_path / "main.py"]
    smaller = dataclasses.replace(DEFAULT_LIMITS, max_call_depth=0)
    first = lint_paths(files, settings, cache=Cache(tmp_path, "key"), limits=smaller)
    assert first.analysed == 1
    again = lint_paths(files, settings, cache=Cache(tmp_path, "key"), limits=smaller)
    assert again.analysed == 1 and again.cached == 0
    stored = lint_paths(files, settings, cache=Cache(tmp_path, "key"))
    assert stored.analysed == 1 and stored.cached == 0  # nothing was stored by the runs before
    assert lint_paths(files, settings, cache=Cache(tmp_path, "key")).cached == 1
