"""Check: gpudoctor's pytest markers on real GPU tests (``gpucheck/plugin_tests``).

The tests run in a child ``pytest -p gpudoctor.pytest_plugin`` (gpudoctor is not
installed on the GPU machine, so its entry point is not there: the plugin is named;
``-p no:gpudoctor`` keeps an installed copy from loading twice). Their JUnit XML is
read back and each test's outcome, and for a failure its message, is compared with
``EXPECTED``.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpucheck import children, environment
from gpucheck.part import Context, PartResult
from gpudoctor.probe.units import parse_size

NAME = "plugin"
ORDER = 60

TESTS = Path(__file__).resolve().parent.parent / "plugin_tests"
_TIMEOUT = 300.0
_SIZE = r"[\d.]+ (?:B|KiB|MiB|GiB|TiB)"


@dataclass(frozen=True)
class Expected:
    """A test's outcome, and a pattern its failure message must match (None: any)."""

    outcome: str  # "passed" or "failed"
    message: str | None = None
    checks: str = ""  # what the test shows, for the report
    at_least: str | None = None  # the size the message's first group must reach ("2 GiB")


EXPECTED = {
    "test_budget_that_holds": Expected("passed", None, "a GPU memory budget that holds passes"),
    "test_budget_that_is_exceeded": Expected(
        "failed", rf"gpu_memory_limit: .*held ({_SIZE}) of GPU memory together, over the limit of 1\.0 GiB",
        "an exceeded budget fails with the measured peak (at least the 2 GiB filled) in the message", "2 GiB"),
    "test_leak_is_caught": Expected(
        "failed", rf"gpu_memory_leak_limit: .*held ({_SIZE}) more GPU memory at its end than at its start",
        "memory still held at the end is caught (at least the 512 MiB kept)", "512 MiB"),
    "test_released_memory_is_no_leak": Expected("passed", None, "memory given back before the end is no leak"),
    "test_fork_after_cuda_init": Expected(
        "failed", r"fork_safe: .*fork\(s\) while .*(PyTorch|torch)", "fork_safe fails a fork after PyTorch "
        "initialized CUDA"),
    "test_spawn_after_cuda_init": Expected("passed", None, "fork_safe passes the same pool with spawn"),
}


def outcomes(junit: str) -> dict[str, dict[str, Any]]:
    """Each test's outcome and failure message from pytest's JUnit XML, by test name."""
    found: dict[str, dict[str, Any]] = {}
    for case in ET.fromstring(junit).iter("testcase"):
        name = case.get("name", "")
        outcome, message = "passed", ""
        for tag in ("failure", "error", "skipped"):
            node = case.find(tag)
            if node is not None:
                outcome = {"failure": "failed", "error": "error", "skipped": "skipped"}[tag]
                message = (node.get("message") or "") + "\n" + (node.text or "")
                break
        found[name] = {"outcome": outcome, "message": message.strip()}
    return found


def compare(found: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per expected test: did it end as expected, with the message expected?"""
    rows = []
    for name, want in EXPECTED.items():
        got = found.get(name)
        if got is None:
            rows.append({"test": name, "checks": want.checks, "ok": False, "outcome": None,
                         "detail": "not in the JUnit report"})
            continue
        ok = got["outcome"] == want.outcome
        detail = f"{got['outcome']}, expected {want.outcome}"
        if ok and want.message is not None:
            match = re.search(want.message, got["message"])
            ok = match is not None
            detail += "; message " + ("matches" if ok else f"does not match /{want.message}/")
            if match is not None and want.at_least is not None:
                ok = parse_size(match.group(1)) >= parse_size(want.at_least)
                detail += f"; {match.group(1)} {'reaches' if ok else 'is less than'} {want.at_least}"
        first = got["message"].splitlines()[0] if got["message"] else ""
        rows.append({"test": name, "checks": want.checks, "ok": ok, "outcome": got["outcome"],
                     "detail": detail, "message": first[:300]})
    return rows


def command(ctx: Context, junit: Path) -> list[str]:
    """The child pytest: the plugin by module name, no cache, JUnit XML, frequent NVML readings."""
    return [ctx.python, "-m", "pytest", "-p", "no:gpudoctor", "-p", "gpudoctor.pytest_plugin",
            "-p", "no:cacheprovider", "-o", "gpudoctor_sample_interval=0.1", "-rA",
            f"--junitxml={junit}", str(TESTS)]


def run(ctx: Context) -> PartResult:
    folder = ctx.folder(NAME)
    if "torch" not in environment.importable(ctx.python, ctx.repo):
        return PartResult(NAME, "skipped", ["not run: torch does not import under --python"])
    junit = folder / "junit.xml"
    done = children.run(command(ctx, junit), timeout=min(_TIMEOUT, ctx.seconds_left()),
                        env=children.environment(ctx.repo), cwd=ctx.repo)
    (folder / "pytest-output.txt").write_text(done.stdout + done.stderr)
    if not junit.exists():
        why = "timed out" if done.timed_out else f"exit status {done.returncode}"
        return PartResult(NAME, "failed", [f"pytest wrote no JUnit XML ({why}): {done.tail(3)}"],
                          {"exit_status": done.returncode})
    rows = compare(outcomes(junit.read_text()))
    bad = [r for r in rows if not r["ok"]]
    lines = [f"{len(rows) - len(bad)} of {len(rows)} marker tests ended as expected"]
    lines += [f"{r['test']}: {r['detail']} ({r['checks']})" for r in bad]
    lines += [f"{r['test']}: {r['message']}" for r in rows if r["ok"] and r["outcome"] == "failed"]
    # The plugin's own word when NVML could not attribute memory to the test's processes.
    lines += [line.strip() for line in done.stdout.splitlines() if "markers were not checked" in line]
    return PartResult(NAME, "failed" if bad else "passed", lines,
                      {"tests": rows, "exit_status": done.returncode, "seconds": done.seconds})
