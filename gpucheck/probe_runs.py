"""Run ``python -m gpudoctor probe`` as a child of the check and read back its JSON document.

Shared by the checks that drive the probe (scenarios, supervised scripts): the child
runs under the interpreter with the frameworks, from the clone, and its document is
kept next to its HTML page in the check's folder.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpucheck import children
from gpucheck.part import Context

_LEAST = 5.0  # seconds: less than this left of the budget, a probe run is not started


@dataclass(frozen=True)
class ProbeRun:
    """One probe child: its document (None when it printed none), its exit status, and where
    its files are."""

    label: str
    document: dict[str, Any] | None
    finished: children.Finished
    json_path: Path
    html_path: Path
    not_started: str | None = None  # why the child was not even started

    @property
    def problem(self) -> str | None:
        """Why there is no document to judge, or None."""
        if self.document is not None:
            return None
        if self.not_started:
            return self.not_started
        if self.finished.timed_out:
            return f"gpudoctor probe did not end within {self.finished.seconds:.0f} s"
        return f"gpudoctor probe printed no JSON (exit status {self.finished.returncode}): {self.finished.tail(3)}"


def read_document(stdout: str) -> dict[str, Any] | None:
    """The JSON document gpudoctor printed on stdout, or None."""
    try:
        found = json.loads(stdout)
    except ValueError:
        return None
    return found if isinstance(found, dict) else None


def probe(ctx: Context, folder: Path, label: str, args: Sequence[str], timeout: float,
          env: dict[str, str] | None = None) -> ProbeRun:
    """Run ``python -m gpudoctor probe --json --html FOLDER/LABEL.html ARGS`` within the run's
    deadline; keep its stdout as FOLDER/LABEL.json and its stderr as FOLDER/LABEL.stderr.txt."""
    html = folder / f"{label}.html"
    as_json = folder / f"{label}.json"
    command = [ctx.python, "-m", "gpudoctor", "probe", "--json", "--html", str(html), *args]
    if ctx.seconds_left() < _LEAST:
        return ProbeRun(label, None, children.Finished(tuple(command), None, "", "", 0.0), as_json, html,
                        "not started: no time left of --budget")
    finished = children.run(command, timeout=min(timeout, ctx.seconds_left()),
                            env=children.environment(ctx.repo, env), cwd=ctx.repo)
    as_json.write_text(finished.stdout)
    if finished.stderr.strip():
        (folder / f"{label}.stderr.txt").write_text(finished.stderr)
    return ProbeRun(label, read_document(finished.stdout), finished, as_json, html)


def gpu_facts(document: dict[str, Any]) -> dict[str, Any]:
    """The machine block's GPU facts: driver, CUDA, and per device name, memory, MIG, compute mode."""
    nvml = (document.get("machine") or {}).get("nvml") or {}
    return {
        "nvml_available": nvml.get("available"),
        "nvml_reason": nvml.get("reason"),
        "driver_version": nvml.get("driver_version"),
        "cuda_driver_version": nvml.get("cuda_driver_version"),
        "devices": [{"index": d.get("index"), "name": d.get("name"),
                     "memory_total": (d.get("memory") or {}).get("total"),
                     "mig_mode": d.get("mig_mode"), "compute_mode": d.get("compute_mode"),
                     "persistence_mode": d.get("persistence_mode"),
                     "processes_reason": d.get("processes_reason"), "notes": d.get("notes")}
                    for d in nvml.get("devices") or []],
    }
