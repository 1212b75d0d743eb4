"""Check gpudoctor's GPU memory sampling against the frameworks, and what supervising costs.

Accuracy: a child (gpucheck/truth/alloc_child.py) allocates known sizes with PyTorch and
with CuPy and reports what each allocator counts; meanwhile gpudoctor's own
:class:`~gpudoctor.probe.sampler.Sampler`, in this process, samples the child's
``usedGpuMemory`` through gpudoctor's NVML module. The changes from the post-context
baseline are compared (gpucheck/truth/accuracy.py). Cost: ``benchmarks/
supervision_overhead.py`` supervises a command at the default interval with NVML on and
reports gpudoctor's CPU use; the goal is 2 % of one core.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from gpucheck import children
from gpucheck.children import LineReader, kill_group
from gpucheck.part import Context, PartResult, Status
from gpucheck.truth.accuracy import SIZES, compare, granularity

NAME = "sampler"
ORDER = 80
FRAMEWORKS = ("torch", "cupy")
MODULES = {"torch": "torch", "cupy": "cupy"}
STEP_TIMEOUT = 120.0  # the first step includes the framework's import and context creation
SETTLE_TIMEOUT = 15.0  # for the sampler to take two process samples after a step
CPU_GOAL = 2.0  # percent of one core
BENCHMARK = "benchmarks/supervision_overhead.py"
BENCHMARK_SECONDS = 20


def _process_bytes(sampler: Any, pid: int, after: float) -> tuple[bool, int | None]:
    """(ready, bytes): the child's NVML memory from the second process sample taken after ``after``."""
    latest: dict[int, Any] = {}
    counts: dict[int, int] = {}
    for sample in sampler.samples():
        if sample.kind == "gpu-process" and sample.pid == pid and sample.t > after:
            latest[sample.device] = sample
            counts[sample.device] = counts.get(sample.device, 0) + 1
    if not counts or max(counts.values()) < 2:
        return False, None
    values = [s.bytes for s in latest.values()]
    return True, None if any(v is None for v in values) else sum(values)


def _settled(sampler: Any, pid: int, after: float, timeout: float = SETTLE_TIMEOUT) -> tuple[bool, int | None]:
    deadline = time.monotonic() + timeout
    while True:
        ready, value = _process_bytes(sampler, pid, after)
        if ready or time.monotonic() > deadline:
            return ready, value
        time.sleep(0.05)


def measure(ctx: Context, framework: str, argv: Sequence[str] | None = None,
            sizes: Sequence[int] = SIZES) -> dict[str, Any]:
    """Run one allocating child under the sampler; return its steps (or why there are none)."""
    from gpudoctor.probe.sampler import Sampler

    argv = list(argv or [ctx.python, "-m", "gpucheck.truth.alloc_child", framework, *map(str, sizes)])
    pids: set[int] = set()
    start = time.monotonic()
    # The sampler takes the tree's RSS from its caller (the supervisor's scan); here only the
    # GPU memory is compared, so the child is named with no RSS or CPU time.
    sampler = Sampler(lambda: dict.fromkeys(pids, (0, 0.0)), start)
    # Its errors come as JSON; stderr unread would block a chatty framework once the pipe fills.
    process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                               text=True, env=children.environment(ctx.repo), cwd=ctx.repo, start_new_session=True)
    lines = LineReader(process)
    sampler.start()
    try:
        return _steps(process, lines, sampler, pids, start, sizes)
    finally:
        sampler.stop()
        kill_group(process)
        process.wait()


def _steps(process: subprocess.Popen[str], lines: LineReader, sampler: Any, pids: set[int], start: float,
           sizes: Sequence[int]) -> dict[str, Any]:
    assert process.stdin is not None
    baseline = lines.next_report(STEP_TIMEOUT)
    if baseline is None or baseline.get("step") != "baseline":
        return {"error": (baseline or {}).get("message") or "the child gave no baseline"}
    pid = int(baseline["pid"])
    pids.add(pid)
    ready, nvml_base = _settled(sampler, pid, time.monotonic() - start)
    if not ready:
        return {"error": f"NVML never listed the child (pid {pid}) after it created its context",
                "pid_namespace": list(sampler.peaks().pid_namespace_notes)}
    readings: list[tuple[int, int, int | None]] = []
    for size in sizes:
        process.stdin.write("next\n")
        process.stdin.flush()
        report = lines.next_report(STEP_TIMEOUT)
        if report is None or report.get("step") != "alloc":
            return {"error": (report or {}).get("message") or f"no report after allocating {size} bytes",
                    "readings": readings}
        _, nvml_bytes = _settled(sampler, pid, time.monotonic() - start)
        readings.append((size, int(report["framework_bytes"]), nvml_bytes))
    steps = compare(int(baseline["framework_bytes"]), nvml_base, readings)
    return {"pid": pid, "baseline_framework": baseline["framework_bytes"], "baseline_nvml": nvml_base,
            "steps": [{**asdict(step), "within": step.within, "tolerance": step.tolerance} for step in steps],
            "sentences": [step.sentence() for step in steps], "all_within": all(step.within for step in steps),
            "nvml_granularity": granularity([nvml_base, *(nvml for _, _, nvml in readings)]),
            "sampler_failure": sampler.failure}


def overhead(ctx: Context, seconds: int = BENCHMARK_SECONDS) -> dict[str, Any]:
    """gpudoctor's CPU while supervising, from the benchmark script (absent: skipped)."""
    script = ctx.repo / BENCHMARK
    if not script.exists():
        return {"skipped": f"{BENCHMARK} not present"}
    result = children.run([ctx.python, str(script), "--seconds", str(seconds), "--json"], timeout=seconds + 120,
                       env=children.environment(ctx.repo), cwd=ctx.repo)
    if result.report is None:
        return {"error": f"{BENCHMARK} {result.describe()}"}
    cpu = result.report.get("cpu_percent_of_core")
    if not isinstance(cpu, (int, float)):
        return {"error": f"{BENCHMARK} printed no cpu_percent_of_core", "report": result.report}
    return {"cpu_percent_of_core": float(cpu), "nvml": result.report.get("nvml"), "goal": CPU_GOAL,
            "within": cpu <= CPU_GOAL, "report": result.report}


def _importable(ctx: Context) -> dict[str, bool]:
    code = ("import importlib.util, json, sys; "
            "print(json.dumps({m: importlib.util.find_spec(m) is not None for m in sys.argv[1:]}))")
    report = children.run([ctx.python, "-c", code, *MODULES.values()], timeout=60,
                          env=children.environment(ctx.repo)).report
    return {name: bool((report or {}).get(module)) for name, module in MODULES.items()}


def judge(accuracy: dict[str, dict[str, Any]], cost: dict[str, Any]) -> tuple[Status, list[str]]:
    """The status and the report's lines from each framework's steps and the cost figure."""
    lines: list[str] = []
    failed = False
    measured = False
    for framework, result in accuracy.items():
        if "skipped" in result:
            lines.append(f"{framework}: skipped ({result['skipped']})")
            continue
        measured = True
        if "error" in result:
            failed = True
            lines.append(f"{framework}: FAILED: {result['error']}")
            continue
        failed |= not result["all_within"]
        verdict = "all steps within tolerance" if result["all_within"] else "FAILED: a step is outside tolerance"
        lines.append(f"{framework}: {verdict}; " + "; ".join(result["sentences"])
                     + f"; NVML counts in multiples of {result.get('nvml_granularity')} bytes")
    if "cpu_percent_of_core" in cost:
        measured = True
        failed |= not cost["within"]
        lines.append(f"supervision cost: {cost['cpu_percent_of_core']:.2f} % of one core with NVML "
                     f"{cost.get('nvml')} (goal ≤ {CPU_GOAL:g} %){'' if cost['within'] else ': FAILED'}")
    elif "error" in cost:
        failed = True
        lines.append(f"supervision cost: FAILED: {cost['error']}")
    else:
        lines.append(f"supervision cost: skipped: {cost.get('skipped')}")
    status: Status = "failed" if failed else "passed" if measured else "skipped"
    return status, lines


def run(ctx: Context) -> PartResult:
    """Measure both frameworks' accuracy and the supervision cost."""
    begin = time.monotonic()
    try:
        from gpudoctor.probe import nvml
    except ImportError as error:
        return PartResult(NAME, "skipped", [f"gpudoctor's NVML module cannot be imported here: {error}"])
    reason = nvml.unavailable_reason()
    found = _importable(ctx)
    accuracy: dict[str, dict[str, Any]] = {}
    for framework in FRAMEWORKS:
        if reason is not None:
            accuracy[framework] = {"skipped": reason}
        elif not found[framework]:
            accuracy[framework] = {"skipped": f"{framework} is not importable by {ctx.python}"}
        elif ctx.seconds_left() < STEP_TIMEOUT:
            accuracy[framework] = {"skipped": "the run's time is nearly spent"}
        else:
            accuracy[framework] = measure(ctx, framework)
    cost = overhead(ctx) if ctx.seconds_left() > BENCHMARK_SECONDS + 30 else {"skipped": "no time left"}
    status, lines = judge(accuracy, cost)
    data = {"accuracy": accuracy, "overhead": cost, "nvml": reason or "available"}
    (ctx.folder(NAME) / "sampler.json").write_text(json.dumps(data, indent=1) + "\n")
    return PartResult(NAME, status, lines, data, time.monotonic() - begin)
