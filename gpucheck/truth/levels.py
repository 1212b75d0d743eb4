"""Hold one child's observed CUDA state against what the knowledge table says.

Levels, lowest first: "none" (the driver is not initialized), "driver" (``cuInit`` ran,
no context), "context" (this process holds a CUDA context). The table's effects map to
them: INERT → none, DRIVER_INIT → driver, RUNTIME_INIT and GPU_OBJECT → context. An
entry with a condition (ON_CUDA, ON_NO_ARGUMENTS) is called with the condition holding,
so its effect applies; a variant where it does not hold expects INERT
(``Invocation.expect``).

What the linter decides rests on one line: initialized or not (a fork child of a process
whose driver is initialized cannot use CUDA, whether or not it also holds a context). So a
row whose table and observation fall on opposite sides of that line *disagrees* (a missed
init, or a false alarm); a row where both say initialized but differ on how far is a
*level* row: the findings hold, the wording of how far initialization went does not.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpucheck.truth.init_probe import level as observed_level
from gpudoctor.knowledge.table import DRIVER_INIT, GPU_OBJECT, INERT, RUNTIME_INIT

LEVELS = ("none", "driver", "context")
EXPECTED = {INERT: "none", DRIVER_INIT: "driver", RUNTIME_INIT: "context", GPU_OBJECT: "context"}

# Verdicts of one row.
AGREE, LEVEL, DISAGREE, INCONCLUSIVE = "agree", "level", "disagree", "inconclusive"
ERROR, CRASH, TIMEOUT, NOT_RUN, NO_DRIVER, NOT_IMPORTABLE = (
    "error", "crash", "timeout", "not-run", "no-driver", "not-importable")


@dataclass(frozen=True)
class Row:
    """The verdict on one invocation."""

    framework: str
    key: str  # the pattern, and the variant's label
    call: str
    effect: str
    expected: str
    verdict: str
    observed: str | None = None
    prior: str | None = None  # the level before the call (after the import and the setup)
    version: str | None = None
    detail: str = ""
    evidence: dict[str, Any] = field(default_factory=dict)

    def sentence(self) -> str:
        """One line for the report."""
        where = f" ({self.version})" if self.version else ""
        text = f"{self.key}: `{self.call}` — table says {self.effect} ({self.expected})"
        if self.observed is not None:
            text += f", observed {self.observed}"
        text += where
        return text + (f"; {self.detail}" if self.detail else "")


def _rank(level: str | None) -> int:
    return LEVELS.index(level) if level in LEVELS else -1


def versions(report: dict[str, Any]) -> str | None:
    """"torch 2.11.0" from a child's ``versions`` mapping."""
    found = report.get("versions") or {}
    return ", ".join(f"{name} {version}" for name, version in found.items()) or None


def judge(framework: str, key: str, call: str, effect: str, report: dict[str, Any] | None,
          failure: str | None = None) -> Row:
    """Compare one child's report (None: it crashed or timed out, ``failure`` says how)."""
    expected = EXPECTED[effect]
    base: dict[str, Any] = dict(framework=framework, key=key, call=call, effect=effect, expected=expected)
    if report is None:
        verdict = TIMEOUT if failure and failure.startswith("timed out") else CRASH
        return Row(**base, verdict=verdict, detail=failure or "")
    version = versions(report)
    if "import_error" in report:
        return Row(**base, verdict=NOT_IMPORTABLE, detail=report["import_error"], version=version)
    final = report.get("after_call") or report.get("after_setup") or report.get("after_import") or {}
    observed = observed_level(final) if final else None
    if final and final.get("driver") is None:
        return Row(**base, verdict=NO_DRIVER, detail=final.get("reason", ""), version=version)
    prior_state = report.get("after_setup") or report.get("after_import") or {}
    prior = observed_level(prior_state) if prior_state else None
    evidence = {step: report[step] for step in ("after_import", "after_setup", "after_call") if step in report}
    rest: dict[str, Any] = dict(observed=observed, prior=prior, version=version, evidence=evidence)
    error = report.get("error")
    if error:
        where = "the setup" if error.get("step") == "after_setup" else "the call"
        return Row(**base, **rest, verdict=ERROR, detail=f"{where} raised {error['type']}: {error['message']}")
    if call and "after_call" in report and _rank(prior) > 0 and _rank(prior) >= _rank(expected):
        return Row(**base, **rest, verdict=INCONCLUSIVE,
                   detail=f"the import or setup already reached {prior}: the call cannot be told apart")
    if observed == expected:
        return Row(**base, **rest, verdict=AGREE)
    if _rank(observed) > 0 and _rank(expected) > 0:
        direction = ("a context where the table says only the driver" if _rank(observed) > _rank(expected)
                     else "only the driver where the table says a context")
        return Row(**base, **rest, verdict=LEVEL,
                   detail=f"{direction}: initialized either way, the findings hold")
    direction = ("the table claims less than happens (a missed init)" if _rank(observed) > _rank(expected)
                 else "the table claims more than happens (a false alarm)")
    return Row(**base, **rest, verdict=DISAGREE, detail=direction)
