"""Record what the real NVML returns while a child holds a CUDA context and 1 GiB.

The child is gpucheck/truth/alloc_child.py (PyTorch, else CuPy); the NVML calls are made
by another child, gpucheck/truth/nvml_query.py, raw through ctypes. The result goes to
``nvml_shapes/shapes.json`` so that the fake libnvidia-ml.so.1 of the tests can be made
to match it; gpucheck/truth/fake_gaps.py lists what the fake does not reproduce today.
"""

from __future__ import annotations

import json
import subprocess
import time
from typing import Any

from gpucheck import children
from gpucheck.children import LineReader, kill_group
from gpucheck.part import Context, PartResult
from gpucheck.truth import fake_gaps
from gpucheck.truth.accuracy import GIB

NAME = "nvml_shapes"
ORDER = 70
HOLDERS = ("torch", "cupy")
HOLD = GIB
HOLD_TIMEOUT = 120.0
QUERY_TIMEOUT = 60.0


def _importable(ctx: Context) -> list[str]:
    code = ("import importlib.util, json, sys; "
            "print(json.dumps([m for m in sys.argv[1:] if importlib.util.find_spec(m) is not None]))")
    done = subprocess.run([ctx.python, "-c", code, *HOLDERS], capture_output=True, text=True, timeout=60,
                          env=children.environment(ctx.repo))
    try:
        return list(json.loads(done.stdout.strip().splitlines()[-1]))
    except (ValueError, IndexError):
        return []


def hold_and_query(ctx: Context, holder: list[str] | None, query: list[str] | None = None) -> dict[str, Any]:
    """Start ``holder`` (an alloc_child command), let it hold its memory, query NVML, let it go."""
    holder = holder or []
    query = query or [ctx.python, "-m", "gpucheck.truth.nvml_query"]
    process = subprocess.Popen(holder, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                               text=True, env=children.environment(ctx.repo), cwd=ctx.repo, start_new_session=True)
    lines = LineReader(process)
    try:
        assert process.stdin is not None
        baseline = lines.next_report(HOLD_TIMEOUT)
        if baseline is None or baseline.get("step") != "baseline":
            return {"error": "the holding child did not start: " + ((baseline or {}).get("message") or "no report")}
        process.stdin.write("next\n")
        process.stdin.flush()
        held = lines.next_report(HOLD_TIMEOUT)
        if held is None or held.get("step") != "alloc":
            return {"error": "the holding child did not allocate: " + ((held or {}).get("message") or "no report")}
        result = children.run([*query, "--pid", str(baseline["pid"])], timeout=QUERY_TIMEOUT,
                           env=children.environment(ctx.repo), cwd=ctx.repo)
        if result.report is None:
            return {"error": f"the NVML query {result.describe()}", "holder": held}
        return {"holder": {"pid": baseline["pid"], "framework_bytes": held["framework_bytes"],
                           "context_framework_bytes": baseline["framework_bytes"]}, "nvml": result.report}
    finally:
        kill_group(process)
        process.wait()


def summary(shapes: dict[str, Any]) -> list[str]:
    """The lines of the report: versions, the process calls, the child's entry, modes."""
    nvml = shapes["nvml"]
    lines = []
    version = (nvml.get("cuda_driver_version_v2") or {}).get("values", [None])[0]
    cuda = f"{version // 1000}.{version % 1000 // 10}" if isinstance(version, int) else "?"
    lines.append(f"driver {(nvml.get('driver_version') or {}).get('value')}, CUDA driver {cuda}, "
                 f"NVML {(nvml.get('nvml_version') or {}).get('value')}")
    pid = shapes["holder"]["pid"]
    for index, device in enumerate(nvml.get("devices", [])):
        calls = ", ".join(f"{name.removeprefix('nvmlDeviceGet')}: {call.get('name', 'absent')}"
                          for name, call in device.get("processes", {}).items())
        lines.append(f"device {index} {(device.get('name') or {}).get('value')}: {calls}")
        entries = device.get("processes", {}).get("nvmlDeviceGetComputeRunningProcesses_v3", {}).get("entries", [])
        mine = [entry for entry in entries if entry["pid"] == pid]
        if mine:
            entry = mine[0]
            lines.append(f"the child (pid {pid}, {shapes['holder']['framework_bytes']} bytes held) is listed: "
                         f"usedGpuMemory {entry['usedGpuMemory']}"
                         f"{' (NOT AVAILABLE sentinel)' if entry['used_not_available'] else ''}, instance IDs "
                         f"{entry.get('gpuInstanceId')}/{entry.get('computeInstanceId')}")
        else:
            lines.append(f"the child's pid {pid} is NOT in the v3 list (listed: "
                         f"{[entry['pid'] for entry in entries]}): NVML's PIDs differ from ours")
        mig, mode = device.get("mig_mode", {}), device.get("compute_mode", {})
        memory2 = device.get("memory_v2", {})
        lines.append(f"MIG {mig.get('values', mig.get('name'))}, compute mode {mode.get('values', mode.get('name'))}, "
                     f"memory v2 {memory2.get('values', memory2.get('name', 'absent'))}, process utilization "
                     f"{device.get('process_utilization', {}).get('name', 'absent')}, accounting "
                     f"{device.get('accounting', {}).get('mode', {}).get('values', 'absent')}")
    return lines


def run(ctx: Context) -> PartResult:
    """Hold a context and 1 GiB with the first framework found; record NVML's answers."""
    begin = time.monotonic()
    found = _importable(ctx)
    if not found:
        return PartResult(NAME, "skipped", [f"neither {' nor '.join(HOLDERS)} is importable by {ctx.python}"],
                          seconds=time.monotonic() - begin)
    framework = found[0]
    shapes = hold_and_query(ctx, [ctx.python, "-m", "gpucheck.truth.alloc_child", framework, str(HOLD)])
    shapes["framework"] = framework
    folder = ctx.folder(NAME)
    if "error" in shapes:
        (folder / "shapes.json").write_text(json.dumps(shapes, indent=1) + "\n")
        return PartResult(NAME, "failed", [shapes["error"]], shapes, time.monotonic() - begin)
    if not shapes["nvml"].get("library"):
        return PartResult(NAME, "skipped", [shapes["nvml"].get("reason", "no NVML")], shapes,
                          time.monotonic() - begin)
    source = ctx.repo / fake_gaps.FAKE_SOURCE
    shapes["fake_gaps"] = fake_gaps.gaps(shapes["nvml"], source.read_text()) if source.exists() else None
    (folder / "shapes.json").write_text(json.dumps(shapes, indent=1) + "\n")
    lines = summary(shapes)
    if shapes["fake_gaps"]:
        lines.append(f"the fake NVML does not reproduce {len(shapes['fake_gaps'])} shapes: "
                     + "; ".join(shapes["fake_gaps"]))
    return PartResult(NAME, "passed", lines, {"shapes": "nvml_shapes/shapes.json", "fake_gaps": shapes["fake_gaps"],
                                              "framework": framework}, time.monotonic() - begin)
