"""How the checks judge what the probe and pytest reported, on recorded and built documents."""

from __future__ import annotations

import ast
import copy
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from gpucheck.part import Context
from gpucheck.parts import plugin, scenarios, scripts
from gpucheck.probe_runs import gpu_facts, probe, read_document

RECORDED = Path(__file__).parent / "recorded"


def _recorded(name: str) -> dict[str, Any]:
    return json.loads((RECORDED / name).read_text())


# -- scenarios ---------------------------------------------------------------------------

def _scenario(name: str, rule: str, needs: tuple[str, ...]) -> SimpleNamespace:
    return SimpleNamespace(name=name, rule=rule, needs=needs)


def test_plan_runs_what_imports_and_keeps_memory_hungry_runs_apart() -> None:
    catalogue = [_scenario("torch-fork", "GD101", ("torch",)), _scenario("jax-fork", "GD101", ("jax",)),
                 _scenario("torch-oom", "GD401", ("torch",)), _scenario("tf-env", "GD301", ("tensorflow",)),
                 _scenario("threads", "GD102", ()), _scenario("cupy-fork", "GD101", ("cupy",))]
    how = {p.name: (p.how, p.why) for p in scenarios.plan(catalogue, {"torch", "jax", "tensorflow"}, False)}
    assert how == {"torch-fork": ("together", ""), "jax-fork": ("in-turn", ""), "torch-oom": ("alone", ""),
                   "tf-env": ("together", ""), "threads": ("together", ""),
                   "cupy-fork": ("not-run", "cupy does not import under --python")}
    # A CUDA build of TensorFlow (or one whose build is unknown) reserves the GPU: alone.
    tf = [p for p in scenarios.plan(catalogue, {"tensorflow"}, None) if p.name == "tf-env"]
    assert tf[0].how == "alone"


def test_recorded_verdicts_agree_with_the_scenarios_expect() -> None:
    document = _recorded("probe_scenario_fork_with_threads.json")
    rows = scenarios.verdicts(document, "fork-with-threads")
    assert [(r["variant"], r["status"], r["as_expected"]) for r in rows] == [("unsafe", "hung", True),
                                                                            ("safe", "ok", True)]
    assert rows[0]["causes"] == ["multithreaded-fork"]
    status, lines = scenarios.judge(rows, [])
    assert status == "passed" and lines == ["2 of 2 variants ended as their scenario expects"]


def test_a_variant_that_differs_from_expect_fails_the_part() -> None:
    document = copy.deepcopy(_recorded("probe_scenario_fork_with_threads.json"))
    document["scenarios"][0]["status"] = "ok"  # the unsafe variant did not reproduce
    rows = scenarios.verdicts(document, "fork-with-threads")
    status, lines = scenarios.judge(rows, [])
    assert status == "failed"
    assert lines[0] == "1 of 2 variants ended as their scenario expects; 1 did not"
    assert lines[1].startswith("fork-with-threads unsafe: ok, expected hung — ")


def test_skipped_and_missing_scenarios_are_said_not_hidden() -> None:
    document = copy.deepcopy(_recorded("probe_scenario_fork_with_threads.json"))
    for entry in document["scenarios"]:
        entry.update(status="skipped", reason="torch 2.11.0 is a CPU-only build (torch)")
    rows = scenarios.verdicts(document, "fork-with-threads")
    assert all(r["as_expected"] is None for r in rows)
    status, lines = scenarios.judge(rows, [scenarios.Planned("numba-fork", "GD101", ("numba",), "not-run",
                                                               "numba does not import under --python")])
    assert status == "failed"  # nothing ran at all
    assert "fork-with-threads safe: skipped by the probe — torch 2.11.0 is a CPU-only build (torch)" in lines
    assert "numba-fork: not run — numba does not import under --python" in lines
    # No document (the probe died): both variants are errors that carry the reason.
    broken = scenarios.verdicts(None, "torch-oom-fill", "gpudoctor probe did not end within 200 s")
    assert [(r["status"], r["as_expected"], r["reason"]) for r in broken] == \
        [("error", False, "gpudoctor probe did not end within 200 s")] * 2


def test_machine_facts_from_the_probe_report() -> None:
    facts = gpu_facts(_recorded("probe_machine_no_gpu.json"))
    assert facts["nvml_available"] is False and facts["devices"] == []
    assert facts["nvml_reason"] == "no NVIDIA driver: libnvidia-ml.so.1 not found"
    device = {"index": 0, "name": "NVIDIA H100 80GB HBM3", "memory": {"total": 85 << 30}, "mig_mode": False,
              "compute_mode": "DEFAULT", "persistence_mode": True}
    facts = gpu_facts({"machine": {"nvml": {"available": True, "driver_version": "580.159.03",
                                            "cuda_driver_version": "13.0", "devices": [device]}}})
    assert facts["devices"][0]["mig_mode"] is False and facts["devices"][0]["compute_mode"] == "DEFAULT"
    assert facts["driver_version"] == "580.159.03"
    assert read_document("not json") is None and read_document("[1]") is None


# -- supervised scripts -------------------------------------------------------------------

OOM = next(s for s in scripts.SCRIPTS if s.oom)


def _oom_run(peaks: dict[int, int]) -> dict[str, Any]:
    """A supervised run's document in the probe's JSON layout: JAX's two-process OOM."""
    processes = [{"pid": 100, "ppid": 1, "start": "root", "verdict": "crashed", "exit_code": 1,
                  "cmdline": ["python", "jax_two_process_oom.py"], "gpu_memory_peak": {}}]
    processes += [{"pid": pid, "ppid": 100, "start": "spawn", "verdict": "oom" if i else "ok",
                   "exit_code": 1 if i else 0, "cmdline": ["python", "-c", "spawn_main"],
                   "gpu_memory_peak": {"0": used}} for i, (pid, used) in enumerate(peaks.items())]
    held = ", ".join(f"pid {pid} {used >> 30}.0 GiB" for pid, used in peaks.items())
    explanation = ("Out of GPU memory: RESOURCE_EXHAUSTED: Out of memory while trying to allocate (JAX).\n"
                   "GPU 0 memory peaked at 79.0 GiB of 80.0 GiB (99%).\n"
                   f"  held by this command: {held}.\n"
                   "Fix: turn on memory growth ... XLA_PYTHON_CLIENT_PREALLOCATE=false or "
                   "XLA_PYTHON_CLIENT_MEM_FRACTION for JAX ...")
    return {"command": ["python", "jax_two_process_oom.py"], "verdict": "oom", "exit_code": 1,
            "explanation": explanation, "stop_reason": "exited", "duration": 9.0, "processes": processes,
            "matches": [], "causes": [{"kind": "gpu-oom", "certainty": "observed", "frameworks": ["jax:cuda"]}],
            "events": [], "samples": [], "notes": []}


def _page(run: dict[str, Any]) -> str:
    pytest.importorskip("matplotlib")
    from gpudoctor.probe import html_report

    machine = _recorded("probe_machine_no_gpu.json")["machine"]
    return html_report.command_page({"machine": machine, "run": run})


def test_oom_script_expectations_hold_on_a_full_report() -> None:
    run = _oom_run({201: 60 << 30, 202: 1 << 30})
    found = {e["expectation"]: e for e in scripts.check(OOM, run, _page(run))}
    assert all(e["ok"] for e in found.values()), found
    assert set(found) == {"verdict", "cause", "names the framework", "names the fix",
                          "per-process GPU memory in the JSON", "per-process GPU memory in the explanation",
                          "one GPU memory cell per process in the HTML"}


def test_html_cells_are_read_from_the_real_page() -> None:
    run = _oom_run({201: 60 << 30, 202: 1 << 30})
    assert scripts.html_gpu_cells(_page(run)) == {201: "GPU 0: 60.0 GiB", 202: "GPU 0: 1.0 GiB"}


def test_oom_without_per_process_memory_fails_those_expectations() -> None:
    run = _oom_run({})  # NVML gave no per-process memory (MIG, another PID namespace)
    run["explanation"] = run["explanation"].replace("  held by this command: .\n", "")
    found = {e["expectation"]: e["ok"] for e in scripts.check(OOM, run, _page(run))}
    assert found["verdict"] and found["names the fix"]
    assert not found["per-process GPU memory in the JSON"]
    assert not found["per-process GPU memory in the explanation"]
    assert not found["one GPU memory cell per process in the HTML"]


def test_fork_script_needs_the_cause_and_the_fix() -> None:
    torch_fork = next(s for s in scripts.SCRIPTS if s.file == "torch_fork_pool.py")
    run = {"verdict": "failed", "causes": [{"kind": "fork-after-init", "fix": "start the workers with spawn"}],
           "explanation": "PyTorch: Cannot re-initialize CUDA in forked subprocess.\nFix: use the spawn start method"}
    assert all(e["ok"] for e in scripts.check(torch_fork, run, None))
    run = {"verdict": "ok", "causes": [], "explanation": "exited with status 0"}
    assert [e["ok"] for e in scripts.check(torch_fork, run, None)] == [False, False, False, False]


def test_every_script_exists_and_parses() -> None:
    for script in scripts.SCRIPTS:
        path = scripts.HERE / script.file
        ast.parse(path.read_text(), str(path))
        assert ast.get_docstring(ast.parse(path.read_text())), script.file  # says what it expects


# -- the plugin's marker tests -----------------------------------------------------------

def _junit(cases: dict[str, str | None]) -> str:
    body = "".join(f'<testcase classname="test_gpu_markers" name="{name}" time="1.0">'
                   + (f'<failure message="{message}">details</failure>' if message else "") + "</testcase>"
                   for name, message in cases.items())
    return f'<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">{body}</testsuite></testsuites>'


AS_EXPECTED = {
    "test_budget_that_holds": None,
    "test_budget_that_is_exceeded": "gpu_memory_limit: the test's processes held 2.6 GiB of GPU memory together, "
                                    "over the limit of 1.0 GiB",
    "test_leak_is_caught": "gpu_memory_leak_limit: the test's processes held 512.0 MiB more GPU memory at its "
                           "end than at its start, over the limit of 64.0 MiB",
    "test_released_memory_is_no_leak": None,
    "test_fork_after_cuda_init": "fork_safe: 1 fork(s) while PyTorch CUDA was initialized in the forking process "
                                 "at test_gpu_markers.py:55 in test_fork_after_cuda_init",
    "test_spawn_after_cuda_init": None,
}


def test_marker_outcomes_as_expected() -> None:
    rows = plugin.compare(plugin.outcomes(_junit(AS_EXPECTED)))
    assert all(r["ok"] for r in rows), rows


def test_marker_outcomes_that_differ_are_named() -> None:
    cases = dict(AS_EXPECTED)
    cases["test_budget_that_is_exceeded"] = cases["test_budget_that_is_exceeded"].replace("2.6 GiB", "1.2 GiB")
    cases["test_leak_is_caught"] = None  # the leak was not seen
    del cases["test_spawn_after_cuda_init"]
    rows = {r["test"]: r for r in plugin.compare(plugin.outcomes(_junit(cases)))}
    assert not rows["test_budget_that_is_exceeded"]["ok"]
    assert "1.2 GiB is less than 2 GiB" in rows["test_budget_that_is_exceeded"]["detail"]
    assert rows["test_leak_is_caught"]["detail"] == "passed, expected failed"
    assert rows["test_spawn_after_cuda_init"]["detail"] == "not in the JUnit report"
    assert rows["test_fork_after_cuda_init"]["ok"]


def test_every_expected_marker_test_exists() -> None:
    tree = ast.parse((plugin.TESTS / "test_gpu_markers.py").read_text())
    tests = {n.name for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")}
    assert tests == set(plugin.EXPECTED)


def test_no_probe_is_started_without_time_left(tmp_path: Path) -> None:
    ctx = Context(tmp_path, "python3", tmp_path, deadline=0.0)
    done = probe(ctx, tmp_path, "torch-oom-fill", ["--scenario", "torch-oom-fill"], timeout=200)
    assert done.problem == "not started: no time left of --budget"
    assert scenarios.verdicts(done.document, "torch-oom-fill", done.problem)[0]["reason"] == done.problem
