"""``sampler``: the comparison of NVML's per-process memory with a framework's count, the
verdict with the supervision cost, and gpudoctor's real Sampler driven through the fake NVML."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gpucheck.parts import sampler
from gpucheck.truth.accuracy import GIB, GRANULE, MIB, Step, compare, granularity
from tests.gpucheck.truth_helpers import FAKE_ALLOCATOR, REPO, context
from tests.probe.conftest import fake_nvml, fake_nvml_dir
from tests.probe.helpers import FakeNvml

__all__ = ["fake_nvml", "fake_nvml_dir"]


def test_changes_within_five_percent_or_one_granule_agree() -> None:
    steps = compare(2 * MIB, 500 * MIB, [(256 * MIB, 258 * MIB, 759 * MIB),
                                         (GIB, 1282 * MIB, 500 * MIB + 1300 * MIB),
                                         (GIB, 2306 * MIB, 500 * MIB + 2600 * MIB)])
    assert [step.framework_delta for step in steps] == [256 * MIB, 1280 * MIB, 2304 * MIB]
    assert [step.within for step in steps] == [True, True, False]
    assert steps[0].tolerance == int(0.05 * 256 * MIB)
    assert "OUTSIDE" in steps[2].sentence() and "+296.0 MiB" in steps[2].sentence()


def test_the_granularity_nvml_counts_in_is_read_from_its_values() -> None:
    assert granularity([302 * MIB, 302 * MIB + GIB]) == 2 * MIB
    assert granularity([GIB + 4096, None]) == 4096
    assert granularity([None]) is None


def test_a_small_step_gets_one_granule_of_slack() -> None:
    assert Step(MIB, MIB, MIB + GRANULE).within
    assert not Step(MIB, MIB, MIB + GRANULE + 1).within


def test_memory_nvml_does_not_report_is_never_within() -> None:
    [step] = compare(0, None, [(MIB, MIB, None)])
    assert not step.within and "no memory" in step.sentence()


def test_the_verdict_fails_on_a_step_outside_or_a_cost_above_the_goal() -> None:
    good = {"all_within": True, "sentences": ["+256 MiB: ..."]}
    status, lines = sampler.judge({"torch": good, "cupy": {"skipped": "cupy is not importable"}},
                                  {"cpu_percent_of_core": 0.8, "nvml": True, "within": True})
    assert status == "passed"
    assert lines[1] == "cupy: skipped (cupy is not importable)" and "0.80 % of one core" in lines[2]
    status, lines = sampler.judge({"torch": good}, {"cpu_percent_of_core": 3.1, "nvml": True, "within": False})
    assert status == "failed" and lines[-1].endswith("FAILED")
    status, lines = sampler.judge({"torch": {**good, "all_within": False}}, {"skipped": "not present"})
    assert status == "failed" and lines[-1] == "supervision cost: skipped: not present"
    assert sampler.judge({"torch": {"skipped": "x"}}, {"skipped": "y"})[0] == "skipped"


def test_a_missing_benchmark_is_recorded_as_skipped(tmp_path: Path) -> None:
    ctx = context(tmp_path)
    ctx = ctx.__class__(out=ctx.out, python=ctx.python, repo=tmp_path, deadline=ctx.deadline)
    assert sampler.overhead(ctx) == {"skipped": "benchmarks/supervision_overhead.py not present"}


def test_the_benchmark_figure_is_read_from_its_json(tmp_path: Path) -> None:
    script = tmp_path / "benchmarks" / "supervision_overhead.py"
    script.parent.mkdir()
    script.write_text('import json, sys\nprint("warming up")\n'
                      'print(json.dumps({"cpu_percent_of_core": 1.5, "nvml": True, "argv": sys.argv[1:]}))\n')
    ctx = context(tmp_path)
    ctx = ctx.__class__(out=ctx.out, python=ctx.python, repo=tmp_path, deadline=ctx.deadline)
    found = sampler.overhead(ctx, seconds=3)
    assert (found["cpu_percent_of_core"], found["nvml"], found["within"]) == (1.5, True, True)
    assert found["report"]["argv"] == ["--seconds", "3", "--json"]


DRIVE = textwrap.dedent('''
    import json, sys, time
    from pathlib import Path
    from gpucheck.part import Context
    from gpucheck.parts import sampler
    ctx = Context(Path(sys.argv[1]), sys.executable, Path.cwd(), time.monotonic() + 300)
    sizes = [64 << 20, 256 << 20, 512 << 20]
    print(json.dumps(sampler.measure(ctx, "fake", [sys.executable, sys.argv[2], *map(str, sizes)], sizes)))
''')


@pytest.mark.slow
def test_gpudoctors_sampler_follows_the_childs_memory_through_nvml(fake_nvml: FakeNvml, tmp_path: Path) -> None:
    fake_nvml.add_device(total=80 * GIB)
    script = tmp_path / "fake_allocator.py"
    script.write_text(FAKE_ALLOCATOR)
    done = subprocess.run([sys.executable, "-c", DRIVE, str(tmp_path / "out"), str(script)], cwd=REPO,
                          env=fake_nvml.env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["baseline_nvml"] == 302 * MIB and found["baseline_framework"] == 2 * MIB
    assert [step["nvml_delta"] for step in found["steps"]] == [64 * MIB, 323 * MIB, 932 * MIB]
    assert [step["within"] for step in found["steps"]] == [True, True, False]
    assert found["all_within"] is False and found["sampler_failure"] is None
    assert found["nvml_granularity"] == MIB  # the stand-in drifts by 3 MiB once


def test_the_allocating_child_says_when_its_framework_is_missing() -> None:
    for framework in sampler.FRAMEWORKS:
        if importlib.util.find_spec(framework) is not None:
            continue
        done = subprocess.run([sys.executable, "-m", "gpucheck.truth.alloc_child", framework, "1024"], cwd=REPO,
                              capture_output=True, text=True, timeout=120)
        report = json.loads(done.stdout.strip().splitlines()[-1])
        assert done.returncode == 0 and report["step"] == "error"
        assert report["message"].startswith(f"{framework} is not importable")


def test_without_nvml_and_benchmark_the_part_is_skipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gpudoctor.probe import nvml

    monkeypatch.setattr(nvml, "unavailable_reason", lambda: "no NVIDIA driver: libnvidia-ml.so.1 not found")
    monkeypatch.setattr(sampler, "BENCHMARK", "benchmarks/no_such_benchmark.py")
    result = sampler.run(context(tmp_path))
    assert result.status == "skipped"
    assert result.summary[0] == "torch: skipped (no NVIDIA driver: libnvidia-ml.so.1 not found)"
    assert json.loads((tmp_path / "out" / "sampler" / "sampler.json").read_text())["overhead"] == {
        "skipped": "benchmarks/no_such_benchmark.py not present"}
