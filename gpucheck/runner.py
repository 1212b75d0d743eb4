"""The runner of ``make gpu-check``: find the GPU, ask the interpreter what it holds, run
the checks in order, write the report.

Each check (a module of :mod:`gpucheck.parts`) runs in turn; one that raises, or that
cannot even be imported, becomes a failed part with the error and the others still
run. Exit status: 0 when no part failed (or there is no GPU to check), 1 when one
failed, 2 for a usage mistake.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from gpucheck import machine, report
from gpucheck.part import Context, PartResult

REPO = Path(__file__).resolve().parent.parent
DEFAULT_BUDGET = 480.0  # seconds: the whole run fits in one 10-minute command on the GPU machine
EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


@dataclass(frozen=True)
class Part:
    """One check as the runner knows it: its name, its place, and how to run it."""

    name: str
    order: float
    run: Callable[[Context], PartResult]


def _broken(name: str, error: str) -> Part:
    """A check module that cannot be imported: it runs last, as a failure that says why."""

    def run(ctx: Context) -> PartResult:
        return PartResult(name, "failed", [f"the check could not be loaded: {error}"], {"error": error})

    return Part(name, float("inf"), run)


def discover(package: str = "gpucheck.parts") -> list[Part]:
    """Import every module of ``package``; return its checks in ascending ORDER."""
    found: list[Part] = []
    root = importlib.import_module(package)
    for info in pkgutil.iter_modules(root.__path__):
        if info.name.startswith("_"):
            continue
        try:
            module: ModuleType = importlib.import_module(f"{package}.{info.name}")
            found.append(Part(module.NAME, float(module.ORDER), module.run))
        except Exception as error:  # a broken check is reported, never a crash of the runner
            found.append(_broken(info.name, f"{type(error).__name__}: {error}"))
    return sorted(found, key=lambda p: (p.order, p.name))


def select(parts: Sequence[Part], wanted: str | None) -> list[Part]:
    """Keep the parts named in ``wanted`` ("a,b"), in the runner's order; raise ValueError
    with a sentence naming the known parts for a name that is not one."""
    if wanted is None:
        return list(parts)
    names = [name.strip() for name in wanted.split(",") if name.strip()]
    known = [p.name for p in parts]
    unknown = [name for name in names if name not in known]
    if unknown or not names:
        raise ValueError(f"unknown part {', '.join(map(repr, unknown)) or '(none given)'} (--parts); "
                         f"known parts: {', '.join(known)}")
    return [p for p in parts if p.name in names]


def run_part(part: Part, ctx: Context) -> PartResult:
    """Run one check; an exception, or something that is not a PartResult, is a failed part."""
    started = time.monotonic()
    if ctx.seconds_left() <= 0:
        return PartResult(part.name, "skipped", ["not run: no time left of --budget"])
    try:
        result = part.run(ctx)
        if not isinstance(result, PartResult):
            raise TypeError(f"run() returned {type(result).__name__}, not a PartResult")
    except Exception as error:
        result = PartResult(part.name, "failed", [f"the check raised {type(error).__name__}: {error}"],
                            {"traceback": traceback.format_exc()})
    result.seconds = round(time.monotonic() - started, 2)
    return result


def ask_environment(python: str, repo: Path) -> dict[str, Any]:
    """gpudoctor's dependencies and the GPU frameworks under ``python``."""
    from gpucheck import environment

    deps = environment.dependencies(python, repo)
    return {"python": deps.python, "executable": python, "dependencies": deps.to_json(),
            "frameworks": environment.frameworks(python, str(repo))}


def parser() -> argparse.ArgumentParser:
    found = argparse.ArgumentParser(
        prog="python -m gpucheck",
        description="Run gpudoctor's GPU paths for real on this machine's NVIDIA GPU and write "
        "gpu-check.json and gpu-check.md. Without an NVIDIA GPU it says so and exits 0.")
    found.add_argument("--out", type=Path, default=Path("gpu-check"),
                       help="the report folder (default: gpu-check/)")
    found.add_argument("--parts", metavar="NAMES",
                       help="run only these checks, comma-separated (default: all)")
    found.add_argument("--python", default=sys.executable,
                       help="the interpreter that holds the GPU frameworks; every check's programs "
                       "run under it (default: this one)")
    found.add_argument("--budget", type=float, default=DEFAULT_BUDGET, metavar="S",
                       help=f"seconds the whole run may take (default: {DEFAULT_BUDGET:g})")
    return found


def _say(text: str) -> None:
    print(f"gpu-check: {text}", flush=True)


def check(args: argparse.Namespace, gpus: machine.Gpus, parts: Sequence[Part],
          ask: Callable[[str, Path], dict[str, Any]] = ask_environment) -> int:
    """Run the chosen checks on a machine with a GPU; write the report; return the exit status."""
    started = time.monotonic()
    try:
        chosen = select(parts, args.parts)
    except ValueError as error:
        _say(str(error))
        return EXIT_USAGE
    names = ", ".join(f"{d['name']} (GPU {d['index']})" for d in gpus.devices)
    _say(f"{names}; driver {gpus.driver_version}, CUDA {gpus.cuda_driver_version}")
    found = ask(args.python, REPO)
    _say(found["dependencies"]["sentence"])
    imports = [f"{n} {f.get('version')}" for n, f in found["frameworks"].items() if f.get("imports")]
    _say(f"frameworks under {args.python}: {', '.join(imports) or 'none'}")
    ctx = Context(out=args.out.resolve(), python=args.python, repo=REPO,
                  deadline=started + args.budget)
    results: list[PartResult] = []
    for number, part in enumerate(chosen, 1):
        _say(f"[{number}/{len(chosen)}] {part.name} ({ctx.seconds_left():.0f} s of the budget left)")
        results.append(run_part(part, ctx))
        _say(f"[{number}/{len(chosen)}] {part.name}: {results[-1].status} in {results[-1].seconds:.1f} s")
    doc = report.document(machine.facts(gpus), found, results)
    as_json, as_markdown = report.write(ctx.out, doc)
    print()
    print(report.table(results))
    print()
    _say(f"{'all checks passed' if doc['passed'] else 'a check failed'}; report: {as_json}, {as_markdown}")
    return EXIT_OK if doc["passed"] else EXIT_FAILED


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m gpucheck``."""
    args = parser().parse_args(argv)
    if args.budget <= 0:
        _say("--budget must be more than 0 seconds")
        return EXIT_USAGE
    gpus = machine.look()
    if gpus.cannot_tell:
        _say(f"cannot look for an NVIDIA GPU with {sys.executable}: {gpus.reason}")
        return EXIT_USAGE
    if gpus.reason is not None:
        _say(f"no NVIDIA GPU on this machine ({gpus.reason}); nothing to check")
        return EXIT_OK
    return check(args, gpus, discover())
