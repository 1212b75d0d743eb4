"""``gpudoctor probe`` without a command: the machine report, then the scenarios.

Exit status: 0 when every safe variant that ran ended ``ok`` and no variant ended
in ``error``; 1 otherwise. An unsafe variant that hangs, crashes or runs out of
memory is the demonstration working, not a problem of the machine; a safe
variant that fails is one (or a scenario that does not fit this machine), and
so is a variant the probe could not judge.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from gpudoctor.closed_stdout import reader_may_leave
from gpudoctor.errors import GpudoctorError
from gpudoctor.exit_codes import EXIT_OK, EXIT_PROBLEM, exit_for_signal
from gpudoctor.probe import scenarios
from gpudoctor.probe.defaults import HANG_AFTER_SCENARIO
from gpudoctor.probe.scenario_run import Settings, VariantResult

if TYPE_CHECKING:
    from rich.console import Console

    from gpudoctor.probe.machine import MachineReport


# A scenario that leaks memory must not take the machine down with it.
_MEMORY_BUDGET = 8 << 30


def _console() -> Console:
    from gpudoctor.probe.console import report_console

    return report_console()


def _write_json(document: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(document, indent=2, default=str) + "\n")
    sys.stdout.flush()  # here, where a reader that left is noticed, not at the interpreter's exit


def settings(args: argparse.Namespace, available_memory: int) -> Settings:
    """Build the sandbox settings of the scenario runs from the command line."""
    budget = args.memory_limit or min(_MEMORY_BUDGET, int(available_memory * 0.8))
    return Settings(
        timeout=args.scenario_timeout,
        hang_after=args.hang_after if args.hang_after is not None else HANG_AFTER_SCENARIO,
        grace=args.grace,
        memory_limit=budget,
        output_limit=args.output_limit,
        sample_interval=args.sample_interval,
        native_stacks=args.native_stacks,
    )


class _Interrupted(Exception):
    """A signal stopped gpudoctor during a scenario: stop the rest too."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def run_all(chosen: list[scenarios.Scenario], report: MachineReport, args: argparse.Namespace) -> list[VariantResult]:
    """Run both variants of every chosen scenario that can run here; skip the others.

    On stderr (unless ``--quiet``): a line before each variant starts and one with its
    status after it, and between them the live view of its processes on a terminal.
    """
    from gpudoctor.probe import live_view, render_scenarios, scenario_run

    gpu = scenario_run.gpu_missing(report.nvml)
    plan = [(s, scenario_run.why_skipped(s, report.frameworks, gpu)) for s in chosen]
    total = sum(2 for _, why in plan if why is None)
    setup = settings(args, report.host.memory_available)
    results: list[VariantResult] = []
    with live_view.opened(args.quiet, announce=False) as view:
        for scenario, why in plan:
            for variant in scenarios.VARIANTS:
                if why is not None:
                    results.append(scenario_run.skipped(scenario, variant, why))
                    continue
                place = f"[{len([r for r in results if r.status != 'skipped']) + 1}/{total}]"
                if view is not None:
                    view.line(render_scenarios.before_line(place, scenario, variant, setup.timeout))
                result = scenario_run.run_variant(scenario, variant, setup, view)
                if result.interrupted_by is not None:
                    raise _Interrupted(result.interrupted_by)
                results.append(result)
                if view is not None:
                    view.line(render_scenarios.after_line(place, result))
    return results


def exit_code(results: list[VariantResult]) -> int:
    """Return 1 when a safe variant failed or a variant could not be judged, else 0."""
    for result in results:
        if result.status == "error" or (result.variant == "safe" and result.status not in ("ok", "skipped")):
            return EXIT_PROBLEM
    return EXIT_OK


def document(report: MachineReport, results: list[VariantResult] | None) -> dict[str, Any]:
    """Return the JSON document: the machine, and the scenarios when they ran."""
    from gpudoctor.probe import machine, scenario_run
    from gpudoctor.probe.diagnosis import SCHEMA_VERSION

    found: dict[str, Any] = {"schema_version": SCHEMA_VERSION, **machine.to_json(report)}
    if results is not None:
        found["scenarios"] = [scenario_run.to_json(r) for r in results]
    return found


def list_scenarios(args: argparse.Namespace) -> int:
    """Print the scenario catalogue and whether each can run on this machine."""
    from gpudoctor.probe import frameworks, nvml, scenario_run

    found = frameworks.report()
    gpu = scenario_run.gpu_missing(nvml.report())
    rows = [(s, scenario_run.why_skipped(s, found, gpu)) for s in scenarios.catalogue()]
    if args.json:
        listed = [{"name": s.name, "rule": s.rule, "rule_name": s.rule_name, "summary": s.summary,
                   "needs": list(s.needs), "gpu": s.gpu, "unsafe": s.unsafe, "safe": s.safe,
                   "runs_here": why is None, "skip_reason": why} for s, why in rows]
        with reader_may_leave():
            _write_json({"scenarios": listed})
        return EXIT_OK
    from rich.markup import escape

    console = _console()
    width = max(len(s.name) for s, _ in rows)
    with reader_may_leave():
        for s, why in rows:
            where = "[green]runs here[/]" if why is None else f"[dim]skipped here: {escape(why)}[/]"
            console.print(f"{s.name.ljust(width)}  {s.rule} {s.rule_name.ljust(31)} {where}")
            console.print(f"{' ' * width}  {escape(s.summary)}", style="dim")
    return EXIT_OK


def run(args: argparse.Namespace) -> int:
    """Report the machine, run the scenarios, print and write the reports; return the exit code."""
    from gpudoctor.probe import html_report, machine

    if args.list_scenarios:
        return list_scenarios(args)
    if args.no_scenarios and args.scenario:
        raise GpudoctorError("--scenario and --no-scenarios contradict each other")
    chosen = None if args.no_scenarios else scenarios.select(args.scenario)
    html = html_report.check_target(args.html) if args.html else None
    report = machine.collect()
    console = None
    if not args.json:
        from gpudoctor.probe.render_machine import render

        console = _console()
        # A reader of stdout that left (``| head -1``) ends the printing, never the run: the
        # scenarios still run, the HTML report is written and the status is theirs.
        with reader_may_leave():
            render(report, console)
            console.print()
    try:
        results = None if chosen is None else run_all(chosen, report, args)
    except _Interrupted as stop:
        return exit_for_signal(stop.signum)
    doc = document(report, results)
    with reader_may_leave():
        if args.json:
            _write_json(doc)
        elif results is not None and console is not None:
            from gpudoctor.probe import render_scenarios

            render_scenarios.render(results, console)
    if html is not None:
        html_report.write(html, html_report.scenarios_page(doc))
        if console is not None and not args.json:
            with reader_may_leave():
                console.print(f"\nHTML report: {html}")
    return EXIT_OK if results is None else exit_code(results)
