"""``truth_table``: the comparison on recorded child reports, and the child's own probes
run against a fake libcuda.so.1 (no GPU needed)."""

from __future__ import annotations

import ctypes.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gpucheck.parts import truth_table
from gpucheck.truth import levels
from tests.gpucheck.truth_helpers import (
    FAKE_SETUP,
    REPO,
    build_fake_cuda,
    context,
    fake_framework,
    prepend,
)

NONE = {"driver": False, "primary_active": False, "nvml_listed": False}
DRIVER = {"driver": True, "primary_active": False, "nvml_listed": False}
CONTEXT = {"driver": True, "primary_active": True, "nvml_listed": True}
VERSIONS = {"versions": {"torch": "2.11.0+cu130"}}


def report(**steps: Any) -> dict[str, Any]:
    return {**VERSIONS, "after_import": NONE, **steps}


def test_an_observed_level_equal_to_the_table_agrees() -> None:
    row = levels.judge("torch", "torch.cuda.is_available", "torch.cuda.is_available()", "driver-init",
                       report(after_call=DRIVER))
    assert (row.verdict, row.expected, row.observed, row.version) == ("agree", "driver", "driver", "torch 2.11.0+cu130")


def test_an_init_where_the_table_says_inert_is_a_missed_init() -> None:
    row = levels.judge("torch", "torch.cuda.device_count", "torch.cuda.device_count()", "inert",
                       report(after_call=CONTEXT))
    assert row.verdict == "disagree" and "claims less" in row.detail
    assert "expected" not in row.sentence() and "observed context" in row.sentence()


def test_an_inert_result_where_the_table_says_context_is_a_false_alarm() -> None:
    row = levels.judge("cupy", "cupy.cuda.* [runtime.getDevice]", "cupy.cuda.runtime.getDevice()", "runtime-init",
                       report(after_call=NONE))
    assert row.verdict == "disagree" and "claims more" in row.detail


def test_driver_and_context_differ_only_in_level_the_findings_hold() -> None:
    row = levels.judge("torch", "torch.cuda.get_arch_list", "torch.cuda.get_arch_list()", "driver-init",
                       report(after_call=CONTEXT))
    assert row.verdict == "level" and row.detail.startswith("a context where the table says only the driver")
    row = levels.judge("cupy", "cupy.cuda.* [runtime.getDevice]", "cupy.cuda.runtime.getDevice()", "runtime-init",
                       report(after_call=DRIVER))
    assert row.verdict == "level" and "the findings hold" in row.detail
    status, lines, _ = truth_table.summarize([row], [])
    assert status == "passed" and lines[1].startswith("level: cupy.cuda.* [runtime.getDevice]")


def test_nvml_alone_or_the_primary_context_alone_means_a_context() -> None:
    assert levels.observed_level({"driver": True, "primary_active": False, "nvml_listed": True}) == "context"
    assert levels.observed_level({"driver": True, "primary_active": True, "nvml_listed": None}) == "context"
    assert levels.observed_level({"driver": None, "reason": "no CUDA driver"}) is None


def test_a_setup_that_already_initialized_makes_the_row_inconclusive() -> None:
    row = levels.judge("torch", "torch.cuda.Event.record", "event.record()", "runtime-init",
                       report(after_setup=CONTEXT, after_call=CONTEXT))
    assert row.verdict == "inconclusive" and row.prior == "context"


def test_an_api_that_raises_is_an_error_with_its_message() -> None:
    error = {"step": "after_call", "type": "AttributeError", "message": "no attribute 'current_device_idx'"}
    row = levels.judge("torch", "torch.accelerator.current_device_idx", "x()", "runtime-init",
                       report(after_call=NONE, error=error))
    assert row.verdict == "error" and "AttributeError" in row.detail


def test_a_child_without_report_is_a_crash_or_a_timeout() -> None:
    assert levels.judge("jax", "k", "c", "inert", None, "exited with status -11").verdict == "crash"
    assert levels.judge("jax", "k", "c", "inert", None, "timed out after 90 s").verdict == "timeout"


def test_no_driver_and_no_framework_are_not_disagreements() -> None:
    no_driver = {"driver": None, "reason": "no CUDA driver: libcuda.so.1 cannot be loaded"}
    assert levels.judge("torch", "k", "c", "inert", report(after_import=no_driver)).verdict == "no-driver"
    assert levels.judge("torch", "k", "c", "inert", {"import_error": "ModuleNotFoundError"}).verdict == \
        "not-importable"


def test_the_summary_fails_on_a_disagreement_and_lists_it() -> None:
    rows = [levels.judge("torch", "a", "a()", "inert", report(after_call=NONE)),
            levels.judge("torch", "c", "c()", "runtime-init", report(after_call=NONE)),
            levels.judge("torch", "b", "b()", "inert", report(after_call=CONTEXT))]
    status, lines, data = truth_table.summarize(rows, [{"pattern": "p", "reason": "r"}])
    assert status == "failed"
    assert lines[0] == "3 calls in fresh processes: 1 agree, 2 disagree; 1 entries not exercised"
    assert lines[1].startswith("disagree: b: `b()`") and "missed init" in lines[1]  # the worse kind first
    assert lines[2].startswith("disagree: c: `c()`") and "false alarm" in lines[2]
    assert data["counts"] == {"agree": 1, "disagree": 2} and data["versions"] == {"torch": "torch 2.11.0+cu130"}
    json.dumps(data)


def test_the_summary_is_skipped_when_nothing_could_run() -> None:
    no_driver = {"driver": None, "reason": "no CUDA driver: libcuda.so.1 cannot be loaded"}
    rows = [levels.judge("torch", "a", "a()", "inert", report(after_import=no_driver))]
    status, lines, _ = truth_table.summarize(rows, [])
    assert status == "skipped" and "no CUDA driver" in lines[0]


# The child itself, against the fake driver.

@pytest.fixture(scope="module")
def fake_cuda(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_fake_cuda(tmp_path_factory.mktemp("fake_cuda"))


@pytest.fixture
def fake_env(fake_cuda: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Children find the fake driver and the fake framework (they inherit the environment)."""
    monkeypatch.setenv("LD_LIBRARY_PATH", prepend("LD_LIBRARY_PATH", fake_cuda))
    monkeypatch.setenv("PYTHONPATH", prepend("PYTHONPATH", fake_framework(tmp_path / "site")))


def child(spec: dict[str, Any], env: dict[str, str] | None = None) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-m", "gpucheck.truth.init_probe", json.dumps(spec)], cwd=REPO,
                          capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_without_libcuda_the_child_says_no_cuda_driver(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if ctypes.util.find_library("cuda") is not None:
        pytest.skip("this machine has a CUDA driver")
    monkeypatch.setenv("PYTHONPATH", prepend("PYTHONPATH", fake_framework(tmp_path / "site")))
    found = child({"imports": "import json", "call": "json.dumps(1)", "distributions": []})
    assert found["after_call"] == {"driver": None, "reason": "no CUDA driver: libcuda.so.1 cannot be loaded"}
    assert levels.judge("x", "k", "c", "inert", found).verdict == "no-driver"


@pytest.mark.usefixtures("fake_env")
@pytest.mark.parametrize(("call", "level"), [("", "none"), ("fakegpu.count()", "driver"),
                                             ("fakegpu.tensor()", "context")])
def test_the_child_reads_the_level_a_call_reached(call: str, level: str) -> None:
    found = child({"imports": "import fakegpu", "call": call, "distributions": ["pytest"]})
    assert levels.observed_level(found["before_import"]) == "none"
    final = found.get("after_call", found["after_import"])
    assert levels.observed_level(final) == level
    assert found["versions"] == {"pytest": pytest.__version__}
    if level == "context":
        assert final["primary_active"] and final["current_context"]


@pytest.mark.usefixtures("fake_env")
def test_a_framework_that_is_not_installed_is_reported_as_such() -> None:
    found = child({"imports": "import no_such_framework_here", "call": "x", "distributions": []})
    assert found["import_error"].startswith("ModuleNotFoundError")


@pytest.mark.usefixtures("fake_env")
def test_the_part_runs_children_concurrently_and_judges_each(tmp_path: Path) -> None:
    todo = [truth_table.Job(FAKE_SETUP, "(import alone)", "", "", "inert"),
            truth_table.Job(FAKE_SETUP, "count", "fakegpu.count()", "", "driver-init"),
            truth_table.Job(FAKE_SETUP, "tensor as driver", "fakegpu.tensor()", "", "driver-init"),
            truth_table.Job(FAKE_SETUP, "after a setup", "fakegpu.count()", "fakegpu.tensor()", "driver-init"),
            truth_table.Job(FAKE_SETUP, "broken", "fakegpu.broken()", "", "runtime-init"),
            truth_table.Job(FAKE_SETUP, "dies", "import os; os._exit(7)", "", "inert")]
    rows = truth_table.execute(context(tmp_path), todo, budget=200, workers=4)
    verdicts = {row.key: row.verdict for row in rows}
    assert verdicts == {"(import alone)": "agree", "count": "agree", "tensor as driver": "level",
                        "after a setup": "inconclusive", "broken": "error", "dies": "crash"}
    assert {row.version for row in rows if row.verdict != "crash"} == {f"pytest {pytest.__version__}"}
    assert "status 7" in next(row.detail for row in rows if row.key == "dies")


@pytest.mark.usefixtures("fake_env")
def test_a_child_that_hangs_is_killed_at_its_timeout(tmp_path: Path) -> None:
    todo = [truth_table.Job(FAKE_SETUP, "hangs", "import time; time.sleep(600)", "", "inert")]
    [row] = truth_table.execute(context(tmp_path), todo, budget=200, child_timeout=2)
    assert row.verdict == "timeout" and row.detail.startswith("timed out")


def test_jobs_after_the_budget_are_not_run(tmp_path: Path) -> None:
    todo = [truth_table.Job(FAKE_SETUP, "late", "1", "", "inert")]
    rows = truth_table.execute(context(tmp_path, seconds=10), todo)
    assert [(row.verdict, row.detail) for row in rows] == [("not-run", "the time budget was spent before its turn")]


def test_the_part_is_skipped_when_no_framework_is_importable(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    absent = tuple(setup.__class__(**{**setup.__dict__, "module": "no_such_module_" + setup.name})
                   for setup in truth_table.FRAMEWORKS)
    monkeypatch.setattr(truth_table, "FRAMEWORKS", absent)
    result = truth_table.run(context(tmp_path))
    assert result.status == "skipped" and "is importable by" in result.summary[0]
