"""Check the knowledge tables against a real driver: what each API really initializes.

For every PyTorch, JAX, CuPy and Numba CUDA entry (gpucheck/truth/invocations.py), a
fresh child imports the framework, calls the API and reads, from inside itself, whether
the CUDA driver is initialized and whether it holds a context
(gpucheck/truth/init_probe.py); gpucheck/truth/levels.py compares that with the entry's
effect. Children run concurrently, each under a timeout, all within a wall-time budget.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass
from typing import Any

from gpucheck import children
from gpucheck.part import Context, PartResult, Status
from gpucheck.truth import levels
from gpucheck.truth.invocations import FRAMEWORKS, IMPORT_ONLY, TABLE, FrameworkSetup, Invocation, NotExercised
from gpudoctor.knowledge.table import INERT

NAME = "truth_table"
ORDER = 90  # last: the longest check (up to BUDGET), the one to give a command of its own
BUDGET = 180.0  # seconds of wall time for all children (torch alone imports in seconds)
CHILD_TIMEOUT = 90.0
WORKERS = 8


@dataclass(frozen=True)
class Job:
    """One child to run: a framework, a call, and the effect the table gives it."""

    framework: FrameworkSetup
    key: str
    call: str
    setup: str
    effect: str

    def spec(self) -> str:
        return json.dumps({"imports": self.framework.imports, "setup": self.setup, "call": self.call,
                           "distributions": list(self.framework.distributions)})


def _effects(framework: str) -> dict[str, str]:
    from gpudoctor.knowledge.registry import BY_NAME

    return {api.pattern: api.effect for api in BY_NAME[framework].table}


def jobs(frameworks: tuple[FrameworkSetup, ...] = FRAMEWORKS) -> tuple[list[Job], list[dict[str, str]]]:
    """Every child to run, baselines first, and the entries not exercised (with why)."""
    baselines = [Job(fw, IMPORT_ONLY, "", "", INERT) for fw in frameworks]
    per_framework: list[list[Job]] = []
    skipped: list[dict[str, str]] = []
    for fw in frameworks:
        effects = _effects(fw.name)
        mine: list[Job] = []
        for entry in TABLE[fw.name]:
            if isinstance(entry, NotExercised):
                skipped.append({"framework": fw.name, "pattern": entry.pattern, "effect": effects[entry.pattern],
                                "reason": entry.reason})
                continue
            assert isinstance(entry, Invocation)
            mine.append(Job(fw, entry.key, entry.call, entry.setup, entry.expect or effects[entry.pattern]))
        per_framework.append(mine)
    # Interleave the frameworks so that a slow import does not bunch up at the end.
    interleaved = [job for group in _zip_longest(per_framework) for job in group]
    return baselines + interleaved, skipped


def _zip_longest(groups: list[list[Job]]) -> list[list[Job]]:
    longest = max((len(group) for group in groups), default=0)
    return [[group[i] for group in groups if i < len(group)] for i in range(longest)]


def importable(ctx: Context, frameworks: tuple[FrameworkSetup, ...]) -> dict[str, bool]:
    """Which frameworks ``ctx.python`` can find, asked of one short child (nothing imported)."""
    roots = {fw.name: fw.module for fw in frameworks}
    code = ("import importlib.util, json, sys; roots = json.loads(sys.argv[1]); "
            "print(json.dumps({n: importlib.util.find_spec(m) is not None for n, m in roots.items()}))")
    result = children.run([ctx.python, "-c", code, json.dumps(roots)], timeout=60, env=children.environment(ctx.repo))
    report = result.report or {}
    return {name: bool(report.get(name)) for name in roots}


def execute(ctx: Context, todo: list[Job], budget: float = BUDGET, workers: int = WORKERS,
            child_timeout: float = CHILD_TIMEOUT) -> list[levels.Row]:
    """Run every job's child; a job whose turn comes after the budget is spent is not run."""
    deadline = time.monotonic() + max(0.0, min(budget, ctx.seconds_left() - 15))

    def one(job: Job) -> levels.Row:
        left = deadline - time.monotonic()
        if left < 5:
            return levels.Row(job.framework.name, job.key, job.call, job.effect, levels.EXPECTED[job.effect],
                              levels.NOT_RUN, detail="the time budget was spent before its turn")
        env = children.environment(ctx.repo, dict(job.framework.env))
        result = children.run([ctx.python, "-m", "gpucheck.truth.init_probe", job.spec()],
                           timeout=min(child_timeout, left), env=env, cwd=ctx.repo)
        failure = None if result.report is not None else result.describe()
        return levels.judge(job.framework.name, job.key, job.call, job.effect, result.report, failure)

    return children.in_parallel(one, todo, min(workers, os.cpu_count() or 1))


FAILING = (levels.DISAGREE, levels.ERROR, levels.CRASH, levels.TIMEOUT, levels.NOT_RUN)


def summarize(rows: list[levels.Row], skipped: list[dict[str, str]]) -> tuple[Status, list[str], dict[str, Any]]:
    """The status, the report's lines and the data of a finished table."""
    counts: dict[str, int] = {}
    for row in rows:
        counts[row.verdict] = counts.get(row.verdict, 0) + 1
    ran = [row for row in rows if row.verdict not in (levels.NOT_IMPORTABLE, levels.NO_DRIVER)]
    data: dict[str, Any] = {
        "counts": counts,
        "versions": {row.framework: row.version for row in rows if row.version},
        "rows": [{k: v for k, v in asdict(row).items() if k != "evidence"} for row in rows],
        "not_exercised": skipped,
    }
    if not ran:
        reasons = sorted({f"{row.framework}: {row.detail}" for row in rows})
        return "skipped", ["no framework could be exercised: " + "; ".join(reasons)[:600]], data
    order = ", ".join(f"{counts[v]} {v}" for v in (levels.AGREE, *FAILING, levels.LEVEL, levels.INCONCLUSIVE,
                                                     levels.NOT_IMPORTABLE, levels.NO_DRIVER) if counts.get(v))
    lines = [f"{len(rows)} calls in fresh processes: {order}; {len(skipped)} entries not exercised"]
    for verdict in FAILING:
        # A missed init (the linter stays silent where a fork will break) before a false alarm.
        chosen = sorted((row for row in rows if row.verdict == verdict), key=lambda row: "claims more" in row.detail)
        lines += [f"{verdict}: {row.sentence()}" for row in chosen]
    lines += [f"{verdict}: {row.sentence()}" for verdict in (levels.LEVEL, levels.INCONCLUSIVE)
              for row in rows if row.verdict == verdict]
    absent = sorted({row.framework for row in rows if row.verdict == levels.NOT_IMPORTABLE})
    if absent:
        lines.append("not importable here (skipped): " + ", ".join(absent))
    status: Status = "failed" if any(row.verdict in FAILING for row in rows) else "passed"
    return status, lines, data


def run(ctx: Context) -> PartResult:
    """Run the whole table under ``ctx``."""
    start = time.monotonic()
    found = importable(ctx, FRAMEWORKS)
    present = tuple(fw for fw in FRAMEWORKS if found[fw.name])
    if not present:
        return PartResult(NAME, "skipped", [f"none of {', '.join(found)} is importable by {ctx.python}"],
                          {"importable": found}, time.monotonic() - start)
    todo, skipped = jobs(present)
    rows = execute(ctx, todo)
    rows += [levels.Row(fw.name, IMPORT_ONLY, "", INERT, "none", levels.NOT_IMPORTABLE,
                        detail=f"not importable by {ctx.python}") for fw in FRAMEWORKS if not found[fw.name]]
    status, lines, data = summarize(rows, skipped)
    data["importable"] = found
    folder = ctx.folder(NAME)
    (folder / "rows.json").write_text(json.dumps([asdict(row) for row in rows], indent=1) + "\n")
    return PartResult(NAME, status, lines, data, time.monotonic() - start)
