"""Write what a ``make gpu-check`` run found: ``gpu-check.json`` for programs, ``gpu-check.md``
for people (the seed of docs/gpu-validation.md), and the table printed at the end."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from gpucheck.part import PartResult

JSON_NAME = "gpu-check.json"
MARKDOWN_NAME = "gpu-check.md"


def table(results: Sequence[PartResult]) -> str:
    """One line per part: name, status, seconds, the first line of its summary."""
    width = max([len(r.name) for r in results] + [4])
    lines = [f"{'part'.ljust(width)}  status   seconds  summary"]
    for r in results:
        first = r.summary[0] if r.summary else ""
        lines.append(f"{r.name.ljust(width)}  {r.status.ljust(7)}  {r.seconds:7.1f}  {first}")
    return "\n".join(lines)


def document(machine: dict[str, Any], environment: dict[str, Any],
             results: Sequence[PartResult]) -> dict[str, Any]:
    """The JSON document: the machine, the interpreter's packages, every part's result."""
    return {
        "machine": machine,
        "environment": environment,
        "passed": not any(r.status == "failed" for r in results),
        "parts": [asdict(r) for r in results],
    }


def _version(found: dict[str, Any]) -> str:
    if not found.get("imports"):
        return f"does not import ({found.get('error') or 'not installed'})"
    extra = [f"{key} {value}" for key, value in found.items()
             if key not in ("imports", "version", "seconds", "error") and value]
    return " ".join(filter(None, [found.get("version"), f"({', '.join(map(str, extra))})" if extra else ""]))


def markdown(doc: dict[str, Any]) -> str:
    """The readable summary: the machine, then each part with its lines."""
    machine, environment = doc["machine"], doc["environment"]
    devices = ", ".join(f"GPU {d['index']}: {d['name']}" for d in machine.get("devices", [])) or "none"
    lines = [
        "# gpudoctor on a real GPU (`make gpu-check`)",
        "",
        f"- date: {machine.get('date')}",
        f"- GPUs: {devices}",
        f"- driver {machine.get('driver_version')}, CUDA (driver) {machine.get('cuda_driver_version')}",
        f"- Python: {environment.get('python')} ({environment.get('executable')})",
        f"- gpudoctor's dependencies: {environment.get('dependencies', {}).get('sentence', 'not checked')}",
        "",
        "| framework | version under --python |",
        "|---|---|",
    ]
    for name, found in environment.get("frameworks", {}).items():
        lines.append(f"| {name} | {_version(found)} |")
    lines += ["", "| part | status | seconds | summary |", "|---|---|---|---|"]
    for part in doc["parts"]:
        first = part["summary"][0] if part["summary"] else ""
        lines.append(f"| {part['name']} | {part['status']} | {part['seconds']:.1f} | {first} |")
    for part in doc["parts"]:
        lines += ["", f"## {part['name']}: {part['status']}", ""]
        lines += [f"- {line}" for line in part["summary"]] or ["- (no summary)"]
    return "\n".join(lines) + "\n"


def write(out: Path, doc: dict[str, Any]) -> tuple[Path, Path]:
    """Write both files into ``out``; return their paths."""
    out.mkdir(parents=True, exist_ok=True)
    as_json = out / JSON_NAME
    as_json.write_text(json.dumps(doc, indent=2, default=str) + "\n")
    as_markdown = out / MARKDOWN_NAME
    as_markdown.write_text(markdown(doc))
    return as_json, as_markdown
