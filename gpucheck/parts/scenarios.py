"""Check: every probe scenario whose frameworks import under ``--python`` runs both variants
on the GPU, with NVML sampling, and ends with a status its ``expect`` declares.

One ``gpudoctor probe --json --html --scenario NAME`` child per scenario. Scenarios
that take little GPU memory run side by side; the ones that fill the GPU on purpose
(GD401) or whose framework reserves most of it on start (JAX preallocates 75%,
TensorFlow's CUDA build nearly all) must not meet each other: JAX's run one after
another beside the small ones, and the memory-filling ones (and a CUDA TensorFlow's)
run alone at the end. The machine report (``probe --no-scenarios``) comes first.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from gpucheck import children, environment, probe_runs
from gpucheck.part import Context, PartResult, Status

NAME = "scenarios"
ORDER = 40

SCENARIO_TIMEOUT = 60.0  # one variant; a hung one is stopped after the probe's --hang-after
_SIDE_BY_SIDE = 6


@dataclass(frozen=True)
class Planned:
    """A scenario and the way it is run: "together" (side by side), "in-turn" (one after
    another, beside the others), "alone" (nothing else on the GPU), or "not-run"."""

    name: str
    rule: str
    needs: tuple[str, ...]
    how: str
    why: str = ""


def plan(catalogue: Iterable[Any], imports: set[str], tensorflow_cuda: bool | None) -> list[Planned]:
    """Decide for each scenario whether and how it runs, from what imports under --python."""
    found = []
    for s in catalogue:
        missing = [n for n in s.needs if n not in imports]
        if missing:
            found.append(Planned(s.name, s.rule, s.needs, "not-run",
                                 f"{', '.join(missing)} does not import under --python"))
        elif s.rule == "GD401" or ("tensorflow" in s.needs and tensorflow_cuda is not False):
            found.append(Planned(s.name, s.rule, s.needs, "alone"))
        elif "jax" in s.needs:
            found.append(Planned(s.name, s.rule, s.needs, "in-turn"))
        else:
            found.append(Planned(s.name, s.rule, s.needs, "together"))
    return found


def verdicts(document: Mapping[str, Any] | None, name: str, problem: str | None = None) -> list[dict[str, Any]]:
    """One row per variant of ``name``: its status, what the scenario expects, and whether
    they agree (``as_expected``: None for a variant the probe skipped).

    A document without the scenario (the probe failed) gives one row per variant with
    status "error" and the problem as the reason.
    """
    entries = [e for e in (document or {}).get("scenarios") or [] if e.get("name") == name]
    if not entries:
        why = problem or "the probe's report has no result for this scenario"
        return [{"scenario": name, "variant": v, "status": "error", "expected": [], "as_expected": False,
                 "reason": why} for v in ("unsafe", "safe")]
    rows = []
    for e in entries:
        expected = list(e.get("expected") or [])
        status = e.get("status")
        agrees = None if status == "skipped" else status in expected
        rows.append({"scenario": name, "variant": e.get("variant"), "status": status,
                     "expected": expected, "as_expected": agrees, "reason": e.get("reason"),
                     "duration_s": e.get("duration_s"), "rule": e.get("rule"),
                     "causes": [c.get("kind") for c in e.get("causes") or []],
                     "gpu_memory_peak": {str(p.get("pid")): p.get("gpu_memory_peak")
                                         for p in e.get("processes") or [] if p.get("gpu_memory_peak")}})
    return rows


def judge(rows: list[dict[str, Any]], planned: list[Planned]) -> tuple[Status, list[str]]:
    """The part's status and summary from every variant's row."""
    wrong = [r for r in rows if r["as_expected"] is False]
    ran = [r for r in rows if r["as_expected"] is not None]
    skipped = [r for r in rows if r["as_expected"] is None]
    not_run = [p for p in planned if p.how == "not-run"]
    lines = [f"{len(ran) - len(wrong)} of {len(ran)} variants ended as their scenario expects"
             + (f"; {len(wrong)} did not" if wrong else "")]
    lines += [f"{r['scenario']} {r['variant']}: {r['status']}, expected {' or '.join(r['expected']) or '?'} "
              f"— {r['reason']}" for r in wrong]
    lines += [f"{r['scenario']} {r['variant']}: skipped by the probe — {r['reason']}" for r in skipped]
    lines += [f"{p.name}: not run — {p.why}" for p in not_run]
    status: Status = "failed" if wrong or not ran else "passed"
    return status, lines


def run(ctx: Context) -> PartResult:
    from gpudoctor.probe import scenarios

    folder = ctx.folder(NAME)
    machine = probe_runs.probe(ctx, folder, "machine", ["--no-scenarios"], timeout=180)
    facts = probe_runs.gpu_facts(machine.document or {})
    tf = ((machine.document or {}).get("machine") or {}).get("frameworks", {}).get("tensorflow") or {}
    imports = environment.importable(ctx.python, ctx.repo)
    planned = plan(scenarios.catalogue(), imports, tf.get("cuda_build") if tf.get("installed") else None)
    timeout = 2 * (SCENARIO_TIMEOUT + 10) + 60

    def one(name: str) -> list[dict[str, Any]]:
        done = probe_runs.probe(ctx, folder, name, ["--scenario", name, "--scenario-timeout",
                                                    f"{SCENARIO_TIMEOUT:g}"], timeout)
        return verdicts(done.document, name, done.problem)

    def in_turn(names: list[str]) -> list[dict[str, Any]]:
        return [row for name in names for row in one(name)]

    together = [p.name for p in planned if p.how == "together"]
    turn = [p.name for p in planned if p.how == "in-turn"]
    # The JAX scenarios go one after another as one job beside the small ones.
    jobs: list[list[str]] = [[name] for name in together] + ([turn] if turn else [])
    rows = [row for found in children.in_parallel(in_turn, jobs, _SIDE_BY_SIDE) for row in found]
    for p in planned:
        if p.how == "alone":
            rows += one(p.name)
    order = {p.name: i for i, p in enumerate(planned)}
    rows.sort(key=lambda r: (order.get(r["scenario"], 0), r["variant"] != "unsafe"))
    status, lines = judge(rows, planned)
    if machine.problem:
        status, lines = "failed", [f"machine report: {machine.problem}", *lines]
    gpus = ", ".join(f"{d['name']} (MIG {d['mig_mode']}, compute mode {d['compute_mode']})"
                     for d in facts["devices"]) or "no device in the probe's report"
    lines.append(f"probe machine report: {gpus}; driver {facts['driver_version']}, "
                 f"CUDA {facts['cuda_driver_version']}")
    data = {"machine": facts, "plan": [vars(p) for p in planned], "variants": rows,
            "files": sorted(path.name for path in folder.iterdir())}
    return PartResult(NAME, status, lines, data)
