"""Check: real failing programs (``gpucheck/scripts``) under ``gpudoctor probe -- python
SCRIPT``, and what the diagnosis says about each.

Each script fails the way its docstring says. The check runs it supervised, with NVML
sampling and an HTML page, and tests named expectations against the JSON document:
the verdict, the cause, that the explanation names the framework and the fix, and for
the out-of-memory script that NVML's per-process GPU memory is cited in the
explanation, carried per process in the JSON, and shown as one "peak GPU" cell per
process in the HTML page. The three that take little GPU memory run side by side; the
one that fills the GPU runs alone after them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpucheck import children, environment, probe_runs
from gpucheck.part import Context, PartResult, Status

NAME = "scripts"
ORDER = 50

HERE = Path(__file__).resolve().parent.parent / "scripts"


@dataclass(frozen=True)
class Script:
    """A failing program and what the probe must say about it."""

    file: str
    needs: str  # the framework, as gpucheck.environment names it
    verdicts: tuple[str, ...]  # the command's verdicts that count as the failure seen
    cause: str  # the cause kind the diagnosis must name
    framework_words: tuple[str, ...]  # one of them must appear in the explanation
    fix_words: tuple[str, ...]  # one of them must appear on the explanation's "Fix:" line
    oom: bool = False  # per-process GPU memory must be cited (JSON, explanation, HTML)
    hang_after: float = 10.0
    timeout: float = 150.0


SCRIPTS = (
    Script("torch_fork_pool.py", "torch", ("crashed", "failed"), "fork-after-init",
           ("PyTorch",), ("spawn",)),
    Script("jax_fork_hang.py", "jax", ("hung",), "fork-after-init", ("JAX",), ("spawn",)),
    Script("cupy_arrays_to_fork.py", "cupy", ("hung", "crashed", "failed"), "fork-after-init",
           ("CuPy",), ("spawn",)),
    Script("jax_two_process_oom.py", "jax", ("oom",), "gpu-oom", ("JAX",),
           ("XLA_PYTHON_CLIENT_PREALLOCATE", "XLA_PYTHON_CLIENT_MEM_FRACTION"), oom=True),
)

# The processes table of the HTML page: a row's pid, then its peak RSS and peak GPU cells.
_ROW = re.compile(r'<tr><td title="[^"]*">(\d+)</td>.*?<td class="nowrap">[^<]*</td>'
                  r'<td class="nowrap">([^<]*)</td>', re.DOTALL)


def html_gpu_cells(html: str) -> dict[int, str]:
    """The "peak GPU" cell of each process row of the page, by pid (empty cells left out)."""
    return {int(pid): cell for pid, cell in _ROW.findall(html) if cell.strip()}


def _expectation(name: str, ok: bool, detail: str) -> dict[str, Any]:
    return {"expectation": name, "ok": ok, "detail": detail}


def _fix_line(explanation: str) -> str:
    return next((line for line in explanation.splitlines() if line.startswith("Fix:")), "")


def check(script: Script, document: Mapping[str, Any], html: str | None) -> list[dict[str, Any]]:
    """Test the script's expectations against the probe's document (and HTML page)."""
    explanation = document.get("explanation") or ""
    causes = document.get("causes") or []
    kinds = [c.get("kind") for c in causes]
    verdict = document.get("verdict")
    fix = _fix_line(explanation) or " ".join(c.get("fix") or "" for c in causes)
    found = [
        _expectation("verdict", verdict in script.verdicts,
                     f"verdict {verdict}; expected {' or '.join(script.verdicts)}"),
        _expectation("cause", script.cause in kinds,
                     f"causes named: {', '.join(map(str, kinds)) or 'none'}; expected {script.cause}"),
        _expectation("names the framework", any(w in explanation for w in script.framework_words),
                     f"explanation mentions {' or '.join(script.framework_words)}"),
        _expectation("names the fix", any(w in fix for w in script.fix_words),
                     f"fix: {fix.strip()[:200] or 'none'}; expected it to mention {' or '.join(script.fix_words)}"),
    ]
    if script.oom:
        held = {int(p["pid"]): p.get("gpu_memory_peak") for p in document.get("processes") or []
                if any(v for v in (p.get("gpu_memory_peak") or {}).values())}
        found.append(_expectation("per-process GPU memory in the JSON", len(held) >= 2,
                                  f"{len(held)} process(es) with a GPU memory peak: {held}"))
        cited = [line.strip() for line in explanation.splitlines()
                 if "held by this command" in line or " alone held " in line]
        found.append(_expectation("per-process GPU memory in the explanation",
                                  bool(cited) and all(f"pid {pid}" in " ".join(cited) for pid in held),
                                  " / ".join(cited) or "no line cites per-process GPU memory"))
        cells = html_gpu_cells(html or "")
        found.append(_expectation("one GPU memory cell per process in the HTML",
                                  bool(held) and set(cells) == set(held),
                                  f"HTML peak GPU cells for pids {sorted(cells)}; JSON peaks for {sorted(held)}"))
    return found


def _run_one(ctx: Context, folder: Path, script: Script) -> dict[str, Any]:
    label = script.file.removesuffix(".py")
    args = ["--hang-after", f"{script.hang_after:g}", "--timeout", f"{script.timeout:g}",
            "--", ctx.python, str(HERE / script.file)]
    done = probe_runs.probe(ctx, folder, label, args, timeout=script.timeout + 60)
    result: dict[str, Any] = {"script": script.file, "command": list(done.finished.command),
                              "probe_exit_status": done.finished.returncode, "seconds": done.finished.seconds}
    if done.document is None:
        result["expectations"] = [_expectation("a probe report", False, done.problem or "")]
        return result
    html = done.html_path.read_text(errors="replace") if done.html_path.exists() else None
    result["verdict"] = done.document.get("verdict")
    result["explanation"] = done.document.get("explanation")
    result["expectations"] = check(script, done.document, html)
    if html is None:
        result["expectations"].append(_expectation("an HTML page", False, f"{done.html_path.name} not written"))
    return result


def run(ctx: Context) -> PartResult:
    folder = ctx.folder(NAME)
    imports = environment.importable(ctx.python, ctx.repo)
    runnable = [s for s in SCRIPTS if s.needs in imports]
    small = [s for s in runnable if not s.oom]
    results = children.in_parallel(lambda s: _run_one(ctx, folder, s), small, len(small))
    results += [_run_one(ctx, folder, s) for s in runnable if s.oom]
    lines: list[str] = []
    failed = False
    for r in results:
        bad = [e for e in r["expectations"] if not e["ok"]]
        failed = failed or bool(bad)
        verdict = r.get("verdict", "no report")
        lines.append(f"{r['script']}: {verdict}; {len(r['expectations']) - len(bad)} of "
                     f"{len(r['expectations'])} expectations hold"
                     + "".join(f"; NOT {e['expectation']} ({e['detail']})" for e in bad))
    skipped = [f"{s.file}: not run, {s.needs} does not import under --python" for s in SCRIPTS
               if s not in runnable]
    status: Status = "failed" if failed else ("passed" if results else "skipped")
    head = f"{len(results)} script(s) run under gpudoctor probe" + ("" if not skipped else f", {len(skipped)} not run")
    return PartResult(NAME, status, [head, *lines, *skipped], {"scripts": results})
