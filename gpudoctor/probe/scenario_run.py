"""Run one variant of a scenario under the probe's supervisor and judge the outcome.

The scenario script runs exactly like ``gpudoctor probe -- python SCRIPT VARIANT``:
same sandbox, same bootstrap, same diagnosis. This module only decides whether a
scenario can run here (from package metadata and NVML, never by importing a
framework) and turns the diagnosis into one of the scenario statuses.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gpudoctor import hazards
from gpudoctor.probe import wording
from gpudoctor.probe.diagnosis import Diagnosis
from gpudoctor.probe.error_strings import CAUSE
from gpudoctor.probe.frameworks import Framework
from gpudoctor.probe.nvml import NvmlReport
from gpudoctor.probe.scenarios import Scenario
from gpudoctor.probe.verdicts import StopReason, Verdict
from gpudoctor.probe.wording import plural

if TYPE_CHECKING:
    from gpudoctor.probe.live_view import View


# How far a variant's timeout stretches while its processes still make CPU progress.
_BUSY_STRETCH = 4


@dataclass(frozen=True)
class Settings:
    """How each variant is run: the deadlines and budgets of its sandbox."""

    timeout: float = 30.0
    hang_after: float = 3.0
    grace: float = 3.0
    memory_limit: int | None = None
    output_limit: int = 64 * 1024
    sample_interval: float = 0.05
    native_stacks: bool = True


@dataclass(frozen=True)
class VariantResult:
    """The outcome of one variant: a status, why, and the supervised run behind it."""

    scenario: Scenario
    variant: str
    status: str  # one of scenarios.STATUSES
    reason: str
    explanation: str
    duration_s: float
    run: dict[str, Any] | None  # the run's JSON document; None when skipped
    interrupted_by: int | None = None  # a signal that stopped gpudoctor itself

    @property
    def as_expected(self) -> bool | None:
        """Tell whether the status is one the scenario declares for this variant."""
        if self.status == "skipped":
            return None
        return self.status in self.scenario.expected(self.variant)


def gpu_missing(report: NvmlReport) -> str | None:
    """Return why this machine cannot run GPU scenarios ("no NVIDIA driver: ..."), or None."""
    if not report.available:
        return report.reason or "no NVIDIA driver"
    if not report.devices:
        return "no NVIDIA GPU: NVML lists no device"
    return None


def why_skipped(scenario: Scenario, frameworks: Mapping[str, Framework], no_gpu: str | None) -> str | None:
    """Return why ``scenario`` cannot run on this machine (every reason), or None.

    ``no_gpu`` is what ``gpu_missing`` said about this machine.
    """
    reasons = [f"{name} not installed" for name in scenario.needs
               if not frameworks.get(name, Framework(name, False)).installed]
    if scenario.gpu:
        if no_gpu:
            reasons.append(no_gpu)
        for name in scenario.needs:
            found = frameworks.get(name)
            # A CPU-only build cannot reach the GPU however many there are.
            if found is not None and found.installed and found.cuda_build is False:
                reasons.append(f"{name} {found.version} is a CPU-only build ({found.distribution})")
    return "; ".join(reasons) or None


def skipped(scenario: Scenario, variant: str, reason: str) -> VariantResult:
    """Return the result of a variant that was not run."""
    return VariantResult(scenario, variant, "skipped", reason,
                         f"Skipped: {reason}.", 0.0, None)


def _status(diagnosis: Diagnosis) -> str:
    if diagnosis.verdict in (Verdict.OK, Verdict.HUNG, Verdict.OOM, Verdict.CRASHED):
        return str(diagnosis.verdict)
    if diagnosis.stop_reason == StopReason.TIMEOUT:
        return "error"
    return "crashed"  # "failed" (non-zero exit) and "killed" (by a signal of its own)


def _last_error(diagnosis: Diagnosis) -> str | None:
    causes = [m.line for m in diagnosis.matches if m.kind == CAUSE]
    if causes:
        return causes[0]
    last = [line for line in diagnosis.explanation.splitlines() if line.startswith("Last line of stderr: ")]
    return last[0].removeprefix("Last line of stderr: ") if last else None


def _reason(status: str, diagnosis: Diagnosis, duration: float, settings: Settings,
            busy: list[int] | None = None) -> str:
    """Say in one line why the variant ended with ``status`` (``busy``: the processes still
    making CPU progress when it was stopped)."""
    if status == "ok":
        return f"exited with status 0 after {duration:.1f} s"
    if status == "error" and diagnosis.stop_reason == StopReason.TIMEOUT:
        stretched = f" (given up to {duration:.0f} s while busy)" if duration > settings.timeout + 1 else ""
        if busy:
            return (f"still running after --scenario-timeout {settings.timeout:g} s{stretched}: "
                    f"{wording.pids(busy)} still making CPU progress, so it was not judged hung")
        return (f"still running after --scenario-timeout {settings.timeout:g} s; no process had waited "
                f"without CPU progress for {settings.hang_after:g} s, so it was not judged hung")
    if status == "hung":
        hung = diagnosis.processes_with(Verdict.HUNG)
        forked = [p for p in hung if p.start == "fork"]
        text = f"{plural(len(hung), 'process')} waited {settings.hang_after:g} s with no CPU progress"
        if forked:
            text += f", {len(forked)} of them fork children"
        where = next((p.blocked_in for p in forked + hung if p.blocked_in), None)
        return text + (f"; blocked in {where}" if where else "")
    error = _last_error(diagnosis)
    if error:
        return error
    root = diagnosis.root
    return root.explanation if root else diagnosis.verdict.value


def _broken_install(reason: str) -> bool:
    """Tell a framework that is installed but cannot be imported from a real demonstration."""
    return reason.startswith(("ModuleNotFoundError", "ImportError"))


def _explanation(scenario: Scenario, variant: str, status: str, diagnosis: Diagnosis) -> str:
    expected = scenario.expected(variant)
    verdict = ("as the scenario expects" if status in expected
               else f"not what the scenario expects ({' or '.join(expected)})")
    lead = (f"{variant.capitalize()} variant of {scenario.name} ({scenario.rule} "
            f"{scenario.rule_name}): {scenario.describe(variant)}. Result: {status}, {verdict}.")
    explanation = diagnosis.explanation
    hazard = next((h for h in hazards.BY_CAUSE.values() if h.rule == scenario.rule), None)
    if variant == "unsafe" and status in expected and hazard is not None and hazard.fix_line not in explanation \
            and "\nFix: " not in f"\n{explanation}":
        # Nothing in the run named it (the failure is the scenario's own check, not a
        # framework's message): the scenario shows its rule's hazard, so that is the cause.
        explanation += f"\nCause: {hazard.why.split(': ', 1)[0]} ({scenario.rule}).\n{hazard.fix_line}"
    return lead + "\n" + explanation


def run_variant(scenario: Scenario, variant: str, settings: Settings, view: View | None = None) -> VariantResult:
    """Run ``scenario``'s ``variant`` in the sandbox and return its result (``view``: the
    live view or progress lines, shown the variant's processes as it runs)."""
    from gpudoctor.probe import diagnose, explain, render_run
    from gpudoctor.probe.record import interrupted
    from gpudoctor.probe.supervise import Limits, Supervisor

    limits = Limits(
        timeout=settings.timeout,
        # A variant still computing at its deadline is slow, not broken (TensorFlow imported
        # in three processes on a loaded 2-core machine takes long): it may go on while it
        # makes progress. A hang is still caught after hang_after; a loop ends at the cap.
        busy_timeout=settings.timeout * _BUSY_STRETCH,
        hang_after=settings.hang_after,
        grace=settings.grace,
        memory_limit=settings.memory_limit,
        output_limit=settings.output_limit,
        sample_interval=settings.sample_interval,
        # Scenario runs are short: read RSS and per-process GPU memory often enough to chart.
        process_interval=0.2,
        native_stacks=settings.native_stacks,
    )
    started = time.monotonic()
    # The scenario's output is evidence for the diagnosis, not for the terminal.
    supervisor = Supervisor([sys.executable, str(scenario.path), variant], limits, None, None, view,
                            own_program=True)
    run = supervisor.run()
    diagnosis = diagnose.diagnose(run)
    document = render_run.to_json(run, diagnosis)
    duration = round(time.monotonic() - started, 2)
    # A signal that came while the tree was being stopped still means: stop everything
    # (unless the scenario's own program sent it: that is its outcome, judged as any other).
    if interrupted(run):
        return VariantResult(scenario, variant, "error", "interrupted", "Interrupted.", duration,
                             document, run.signal_received)
    status = _status(diagnosis)
    reason = _reason(status, diagnosis, run.duration, settings, explain.busy(run))
    if status == "crashed" and _broken_install(reason):
        status = "error"
    return VariantResult(scenario, variant, status, reason,
                         _explanation(scenario, variant, status, diagnosis), duration, document)


def to_json(result: VariantResult) -> dict[str, Any]:
    """Return one entry of the ``"scenarios"`` list of ``gpudoctor probe --json``."""
    run = result.run or {}
    return {
        "name": result.scenario.name,
        "variant": result.variant,
        "status": result.status,
        "reason": result.reason,
        "explanation": result.explanation,
        "rule": result.scenario.rule,
        "rule_name": result.scenario.rule_name,
        "description": result.scenario.describe(result.variant),
        "expected": list(result.scenario.expected(result.variant)),
        "as_expected": result.as_expected,
        "duration_s": result.duration_s,
        "command": run.get("command", []),
        "duration": run.get("duration"),  # of the supervised run itself, for the timeline
        "stop_reason": run.get("stop_reason"),
        "processes": run.get("processes", []),
        "matches": run.get("matches", []),
        "causes": run.get("causes", []),
        "memory": run.get("memory"),  # who held the memory, when the variant ran out of it
        "events": run.get("events", []),
        "samples": run.get("samples", []),
        "memory_limit": run.get("memory_limit"),  # the variant's host-memory budget, for the timeline
        "notes": run.get("notes", []),
    }
