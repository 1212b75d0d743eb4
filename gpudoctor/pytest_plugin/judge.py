"""Apply the checks to a test's call report: fail it, or say why a check could not run."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from gpudoctor.probe.diagnosis import Diagnosis
from gpudoctor.probe.verdicts import Verdict
from gpudoctor.pytest_plugin import checks, hang_report, memory, suite_options
from gpudoctor.pytest_plugin.item_watch import CallRecord, HangExpired
from gpudoctor.pytest_plugin.markers import LEAK_LIMIT, MEMORY_LIMIT, Plan


@dataclass(frozen=True)
class Judgement:
    """The failures of one test, and why its GPU memory markers went unchecked (if so)."""

    failures: tuple[checks.Failure, ...]
    not_checked: str | None  # e.g. "no NVML (no NVIDIA driver: libnvidia-ml.so.1 not found)"


def _memory(record: CallRecord, session_nvml: str | None) -> tuple[list[checks.Failure], str | None]:
    plan, final = record.plan, record.final
    if not plan.needs_gpu:
        return [], None
    if final is not None and final.get("nvml"):
        return [], f"no NVML ({final['nvml']})"
    if session_nvml is not None:  # known since an earlier test: this one was not sampled
        return [], f"no NVML ({session_nvml})"
    if final is None:
        return [], record.watcher_error or "GPU memory was not sampled"
    use = memory.analyse(final.get("rounds") or [], record.since, record.root, final.get("processes") or {})
    if use.hidden:
        return [], "NVML does not report per-process GPU memory here (MIG or WDDM)"
    notes = [n for n in final.get("notes") or [] if "PID namespace" in n]
    if notes and not use.processes:
        return [], notes[0]
    return checks.memory_failures(plan, use), None


def _unchecked_failure(plan: Plan, reason: str) -> checks.Failure:
    """Fail a test whose GPU memory markers could not be checked, when the run requires NVML."""
    names = [name for name, limit in ((MEMORY_LIMIT, plan.memory_limit), (LEAK_LIMIT, plan.leak_limit))
             if limit is not None]
    line = (f"{', '.join(names)} not checked: {reason}; this run requires GPU memory to be checked "
            f"(--gpudoctor-require-nvml or {suite_options.REQUIRE_NVML})")
    return checks.Failure(line, ("gpudoctor gpu_memory", line))


def judge(record: CallRecord, session_nvml: str | None = None, require_nvml: bool = False) -> Judgement:
    """Check everything the test's markers asked for.

    ``session_nvml`` is why NVML failed in an earlier test of the session (then this one
    was not sampled); ``require_nvml`` turns a marker that could not be checked into a failure.
    """
    failures: list[checks.Failure] = []
    plan, final = record.plan, record.final
    # The watcher process diagnosed the hang and sent the report's JSON document.
    hang = final.get("hang") if final is not None else None
    if plan.hang is not None and (hang or record.interrupted):
        killed = list(final.get("killed") or []) if final is not None else []
        diagnosis = Diagnosis.from_json(hang) if hang else Diagnosis(Verdict.UNKNOWN, None, record.watcher_error or "")
        failures.append(hang_report.hang_failure(plan.hang.seconds, diagnosis, killed,
                                                 list(record.stopped_pools), record.stuck))
    if plan.fork_safe is not None:
        fork = checks.fork_failure(plan.fork_safe, record.events, record.root)
        if fork is not None:
            failures.append(fork)
    found, not_checked = _memory(record, session_nvml)
    if not_checked is not None and require_nvml:
        found.append(_unchecked_failure(plan, not_checked))
    return Judgement(tuple(failures + found), not_checked)


def apply(report: pytest.TestReport, excinfo: pytest.ExceptionInfo[BaseException] | None,
          judgement: Judgement) -> None:
    """Turn a passed (or hang-interrupted) call report into a failure with our sections.

    A test that failed on its own keeps its own error; the evidence is added to it.
    """
    if not judgement.failures or report.skipped:
        return
    ours = excinfo is None or excinfo.errisinstance(HangExpired)
    for failure in judgement.failures:
        if failure.section is not None:
            report.sections.append(failure.section)
    if not ours and report.failed:
        return
    reasons = [f.reason for f in judgement.failures]
    more = f" (and {len(reasons) - 1} more, see below)" if len(reasons) > 1 else ""
    report.outcome = "failed"
    report.longrepr = "\n".join([reasons[0] + more, *(line for f in judgement.failures for line in f.brief)])
