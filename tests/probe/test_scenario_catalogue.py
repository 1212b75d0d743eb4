"""The scenario library: stable names, declarations, availability, and the linter's agreement."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpudoctor.cli import main
from gpudoctor.errors import GpudoctorError
from gpudoctor.probe import frameworks, scenario_command, scenario_run, scenarios
from gpudoctor.probe.frameworks import Framework
from gpudoctor.probe.nvml import NvmlReport
from gpudoctor.probe.scenario_run import VariantResult

STABLE = {
    "tensorflow-fork-after-init": "GD101",
    "cupy-fork-after-init": "GD101",
    "torch-fork-after-init": "GD101",
    "jax-fork-after-init": "GD101",
    "numba-fork-after-init": "GD101",
    "torch-object-to-worker": "GD201",
    "torch-oom-fill": "GD401",
    "cupy-object-to-worker": "GD201",
    "tensorflow-env-after-init": "GD301",
    "tensorflow-config-after-init": "GD302",
    "tensorflow-oom-grab-all": "GD401",
    "jax-oom-preallocate": "GD401",
    "process-in-daemonic-worker": "GD105",
    "fork-with-threads": "GD102",
}
# The scenarios that reproduce for real without a GPU.
CPU = {"tensorflow-fork-after-init", "tensorflow-env-after-init", "tensorflow-config-after-init",
       "process-in-daemonic-worker", "fork-with-threads"}


def _scenario(name: str) -> scenarios.Scenario:
    return next(s for s in scenarios.catalogue() if s.name == name)


def test_names_and_rules_are_stable() -> None:
    assert {s.name: s.rule for s in scenarios.catalogue()} == STABLE
    assert {s.name for s in scenarios.catalogue() if not s.gpu} == CPU
    for s in scenarios.catalogue():
        assert s.path.name == s.name.replace("-", "_") + ".py"
        assert set(s.needs) <= set(frameworks.FRAMEWORKS)
        assert s.summary and s.unsafe and s.safe
        assert s.expect_safe == ("ok",)
        assert "ok" not in s.expect_unsafe


def test_rule_names_match_the_linter() -> None:
    from gpudoctor.lint.rules._registry import rule_by_code

    for code, name in scenarios.RULE_NAMES.items():
        rule = rule_by_code(code)
        assert rule is not None and rule.name == name


def test_reading_the_catalogue_imports_no_framework() -> None:
    code = ("import sys; from gpudoctor.probe import scenarios; scenarios.catalogue();"
            "print([m for m in ('tensorflow', 'cupy', 'torch', 'jax') if m in sys.modules])")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


WORKERS = """\
import multiprocessing


def shared(x):
    return x


def task(x):
    return shared(x) + 1


def square(x):
    return x * x


def unsafe():
    with multiprocessing.Pool(2) as pool:
        print(pool.map(task, range(4)), shared(1))


def safe():
    with multiprocessing.Pool(2) as pool:
        print(pool.map(square, range(4)), shared(1))
"""


def test_a_variants_code_is_its_function_and_the_helpers_only_it_names() -> None:
    unsafe = scenarios.variant_code(WORKERS, "unsafe")
    assert unsafe.startswith("def task(x):") and "def unsafe():" in unsafe
    assert "def shared" not in unsafe and "def square" not in unsafe and "def safe" not in unsafe
    safe = scenarios.variant_code(WORKERS, "safe")
    assert safe.startswith("def square(x):") and safe.endswith("print(pool.map(square, range(4)), shared(1))")
    assert scenarios.variant_code("x = 1\n", "unsafe") == ""


def test_every_scenario_shows_the_code_of_both_variants() -> None:
    for scenario in scenarios.catalogue():
        for variant in scenarios.VARIANTS:
            assert f"def {variant}() -> None:" in scenario.code(variant), (scenario.name, variant)


def test_each_script_runs_its_variants_by_argument() -> None:
    for s in scenarios.catalogue():
        tree = ast.parse(s.path.read_text())
        functions = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        assert {"unsafe", "safe"} <= functions, s.name


NO_DRIVER = "no NVIDIA driver: libnvidia-ml.so.1 not found"
TF_CPU = Framework("tensorflow", True, "2.21.0", "tensorflow-cpu", None, False, "CPU-only build")
TF_GPU = Framework("tensorflow", True, "2.21.0", "tensorflow", "12.5", True, "built with CUDA")


def test_skip_reasons_name_what_is_missing() -> None:
    none: dict[str, Framework] = {}
    assert scenario_run.why_skipped(_scenario("cupy-fork-after-init"), none, None) == "cupy not installed"
    assert scenario_run.why_skipped(_scenario("cupy-fork-after-init"), none, NO_DRIVER) == \
        f"cupy not installed; {NO_DRIVER}"
    grab_all = _scenario("tensorflow-oom-grab-all")
    assert scenario_run.why_skipped(grab_all, {"tensorflow": TF_GPU}, NO_DRIVER) == NO_DRIVER
    assert scenario_run.why_skipped(grab_all, {"tensorflow": TF_GPU}, None) is None
    assert scenario_run.why_skipped(grab_all, {"tensorflow": TF_CPU}, None) == \
        "tensorflow 2.21.0 is a CPU-only build (tensorflow-cpu)"
    # A CPU scenario needs no GPU, only its framework.
    fork = _scenario("tensorflow-fork-after-init")
    assert scenario_run.why_skipped(fork, {"tensorflow": TF_CPU}, NO_DRIVER) is None
    assert scenario_run.why_skipped(fork, none, NO_DRIVER) == "tensorflow not installed"
    assert scenario_run.why_skipped(_scenario("fork-with-threads"), none, NO_DRIVER) is None


def test_gpu_availability_comes_from_nvml() -> None:
    assert scenario_run.gpu_missing(NvmlReport(False, NO_DRIVER)) == NO_DRIVER
    assert scenario_run.gpu_missing(NvmlReport(True, None)) == "no NVIDIA GPU: NVML lists no device"


def test_unknown_scenario_is_a_usage_error_listing_the_names(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(GpudoctorError):
        scenarios.select(["fork-after-init"])
    assert main(["probe", "--scenario", "tensorflow-fork-after-init", "--scenario", "nope"]) == 2
    err = capsys.readouterr().err
    assert "unknown scenario 'nope' (--scenario)" in err
    assert all(name in err for name in STABLE)
    assert "Traceback" not in err


def test_scenario_options_do_not_combine_with_a_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["probe", "--scenario", "fork-with-threads", "--", "true"]) == 2
    assert "--scenario cannot be combined with a command" in capsys.readouterr().err


def test_html_target_is_checked_before_any_work(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "no-such-dir" / "report.html"
    assert main(["probe", "--html", str(missing), "--scenario", "fork-with-threads"]) == 2
    assert f"directory {missing.parent} does not exist" in capsys.readouterr().err


def _result(variant: str, status: str) -> VariantResult:
    return VariantResult(_scenario("fork-with-threads"), variant, status, "", "", 0.0, None)


def test_exit_code_is_about_the_safe_variants_and_errors() -> None:
    assert scenario_command.exit_code([_result("unsafe", "hung"), _result("safe", "ok")]) == 0
    assert scenario_command.exit_code([_result("unsafe", "skipped"), _result("safe", "skipped")]) == 0
    # The unsafe variant not reproducing is reported, not a failure of the machine.
    assert scenario_command.exit_code([_result("unsafe", "ok"), _result("safe", "ok")]) == 0
    assert scenario_command.exit_code([_result("unsafe", "hung"), _result("safe", "crashed")]) == 1
    assert scenario_command.exit_code([_result("unsafe", "error"), _result("safe", "ok")]) == 1
    assert _result("unsafe", "ok").as_expected is False
    assert _result("unsafe", "hung").as_expected is True
    assert _result("safe", "skipped").as_expected is None


def test_list_scenarios_says_what_runs_here() -> None:
    done = subprocess.run([sys.executable, "-m", "gpudoctor", "probe", "--list-scenarios", "--json"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    listed = {s["name"]: s for s in json.loads(done.stdout)["scenarios"]}
    assert set(listed) == set(STABLE)
    assert listed["process-in-daemonic-worker"]["runs_here"] is True
    for s in listed.values():
        assert s["runs_here"] == (s["skip_reason"] is None)


def _lint(path: Path, capsys: pytest.CaptureFixture[str]) -> set[str]:
    main(["lint", "--output-format", "json", "--no-cache", str(path)])
    return {finding["code"] for finding in json.loads(capsys.readouterr().out)}


def _only(scenario: scenarios.Scenario, variant: str, directory: Path) -> Path:
    """Write the scenario's script with one variant left: the other function and the dispatch gone."""
    source = scenario.path.read_text()
    lines = source.splitlines(keepends=True)
    tree = ast.parse(source)
    other = next(n for n in tree.body if isinstance(n, ast.FunctionDef)
                 and n.name == ("safe" if variant == "unsafe" else "unsafe"))
    main_block = next(n for n in tree.body if isinstance(n, ast.If))
    kept = lines[: other.lineno - 1] + lines[other.end_lineno: main_block.lineno - 1]
    path = directory / variant / scenario.path.name
    path.parent.mkdir()
    path.write_text("".join(kept) + f'if __name__ == "__main__":\n    {variant}()\n')
    return path


# Scenarios of a failure the linter cannot see: the probe finds them at run time.
RUNTIME_ONLY = {
    # PyTorch allocates on demand: how much each worker takes is data, not code (GD401's
    # documentation says PyTorch is not flagged).
    "torch-oom-fill",
}


@pytest.mark.parametrize("name", sorted(STABLE))
def test_the_linter_flags_the_unsafe_variant_and_not_the_safe_one(
        name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    scenario = _scenario(name)
    flagged = _lint(_only(scenario, "unsafe", tmp_path), capsys)
    assert (scenario.rule not in flagged) if name in RUNTIME_ONLY else (scenario.rule in flagged)
    assert _lint(_only(scenario, "safe", tmp_path), capsys) == set()
