"""``gpudoctor probe``: the machine report and scenarios, or a supervised command and its diagnosis."""

from __future__ import annotations

import argparse
import json
import signal
import sys
from typing import Any

from gpudoctor.closed_stdout import reader_may_leave
from gpudoctor.errors import GpudoctorError
from gpudoctor.exit_codes import EXIT_OK, EXIT_PROBLEM, exit_for_signal


def _console() -> Any:
    from gpudoctor.probe.console import report_console

    return report_console()


def _print_json(document: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(document, indent=2, default=str) + "\n")
    sys.stdout.flush()


def _machine() -> dict[str, Any]:
    """The machine block of a supervised run's reports: NVML and package metadata only,
    never a framework import. Collected after the run, not beside it: reading a
    framework's facts can start an interpreter, which during the run would be taken for
    an orphan of the command's tree."""
    from gpudoctor.probe import machine

    return dict(machine.to_json(machine.collect())["machine"])


def supervise(command: list[str], args: argparse.Namespace) -> int:
    """Run ``command`` under supervision, print the diagnosis, return the exit code."""
    from gpudoctor.probe import capture, diagnose, live_view, render_run
    from gpudoctor.probe.defaults import HANG_AFTER_COMMAND
    from gpudoctor.probe.diagnosis import SCHEMA_VERSION
    from gpudoctor.probe.record import interrupted
    from gpudoctor.probe.supervise import Limits, Supervisor
    from gpudoctor.probe.verdicts import Verdict

    html = None
    if args.html:
        from gpudoctor.probe import html_report

        html = html_report.check_target(args.html)
    record = None
    if args.record:
        from gpudoctor.probe import node_record

        record = node_record.check_directory(args.record)
    limits = Limits(
        timeout=args.timeout,
        hang_after=args.hang_after if args.hang_after is not None else HANG_AFTER_COMMAND,
        grace=args.grace,
        memory_limit=args.memory_limit,
        output_limit=args.output_limit,
        sample_interval=args.sample_interval,
        native_stacks=args.native_stacks,
        max_processes=args.max_processes,
        crash_loop=args.crash_loop,
    )
    # With --json, stdout carries only the JSON document: the command's own output
    # is shown on stderr instead.
    echo_out = sys.stderr.buffer if args.json else sys.stdout.buffer
    # The view is closed (a live region erased) before anything is printed on stdout.
    with live_view.opened(args.quiet) as view:
        if view is not None:
            echo_out = view.echo(echo_out, 2 if args.json else 1)
        echo_err = view.echo(sys.stderr.buffer, 2) if view else sys.stderr.buffer
        # Both to one terminal (or one file): whole lines, so neither cuts the other's.
        echo_out, echo_err = capture.whole_lines(echo_out, echo_err)
        hold = None
        if record is not None:
            from gpudoctor.probe import node_record

            hold = node_record.hold(record)
        supervisor = Supervisor(command, limits, echo_out, echo_err, view, hold=hold)
        run = supervisor.run()
        result = diagnose.diagnose(run)
        if view is not None:
            view.verdict(f"gpudoctor: verdict {result.verdict} after {run.duration:.1f} s ({run.stop_reason})")
    described = _machine() if args.json or html is not None or record is not None else None
    if record is not None:  # first: a reader of stdout that leaves must not cost the node's record
        from gpudoctor.probe import node_record

        written = node_record.write(record, node_record.build(run, result, render_run.to_json(run, result, described)))
        node_record.clear_mark(record)
    # A reader of stdout that left (``| head -1``) ends the printing, never the run: the
    # HTML report is still written and the exit status is the verdict's.
    with reader_may_leave():
        if args.json:
            _print_json(render_run.to_json(run, result, described))
        else:
            render_run.render(run, result, _console())
    if html is not None:
        document = {"schema_version": SCHEMA_VERSION, "machine": described,
                    "run": render_run.to_json(run, result)}
        html_report.write(html, html_report.command_page(document))
        if not args.json:
            with reader_may_leave():
                _console().print(f"HTML report: {html}")
    if record is not None and not args.json:
        with reader_may_leave():
            _console().print(f"Record: {written} (gpudoctor report {record})")
    # A signal to gpudoctor from outside the tree (even one that came while it dumped the
    # stacks of a hang) is what ended the run for the user: the shell's convention for it.
    # One the program sent gpudoctor itself is part of the diagnosis (its verdict's status).
    if interrupted(run):
        return exit_for_signal(run.signal_received or signal.SIGINT)
    return EXIT_OK if result.verdict == Verdict.OK else EXIT_PROBLEM


def attach_to(pids: list[int], args: argparse.Namespace) -> int:
    """Explain the running trees under ``pids`` (never stopped nor signalled); return the exit code."""
    from gpudoctor.probe import attach, live_view, render_run
    from gpudoctor.probe.diagnosis import SCHEMA_VERSION
    from gpudoctor.probe.live_snapshot import attached_snapshot
    from gpudoctor.probe.verdicts import Verdict

    html = None
    if args.html:
        from gpudoctor.probe import html_report

        html = html_report.check_target(args.html)
    title = f"pid {', '.join(map(str, dict.fromkeys(pids)))}"
    with live_view.opened(args.quiet, announce=False) as view:
        watching = None
        if view is not None:
            window = attach.watch_window(args.watch, args.timeout)

            def watching(observed: dict[int, attach.Observed], elapsed: float) -> None:
                view.show(attached_snapshot(title, observed, elapsed, window))

        found = attach.examine(pids, args.watch, args.native_stacks,
                               progress=view.line if view is not None else None, watching=watching,
                               timeout=args.timeout)
        if view is not None:
            view.done()
            view.verdict(f"gpudoctor: verdict {found.diagnosis.verdict} after watching {found.run.duration:.1f} s")
    described = _machine() if args.json or html is not None else None
    document = render_run.to_json(found.run, found.diagnosis, described)
    document["attached"] = {"pids": list(found.roots), "watch": found.watch,
                            "processes": [seen.to_json() for seen in found.observed]}
    with reader_may_leave():  # as for a supervised command
        if args.json:
            _print_json(document)
        else:
            render_run.render(found.run, found.diagnosis, _console())
    if html is not None:
        from gpudoctor.probe import html_report

        page = {"schema_version": SCHEMA_VERSION, "machine": described, "run": document}
        html_report.write(html, html_report.command_page(page))
        if not args.json:
            with reader_may_leave():
                _console().print(f"HTML report: {html}")
    # Idle is no problem found: nothing shows a hang (the explanation says what would).
    return EXIT_OK if found.diagnosis.verdict in (Verdict.OK, Verdict.IDLE) else EXIT_PROBLEM


def run(args: argparse.Namespace) -> int:
    """Dispatch ``gpudoctor probe``: no command means the machine report and the scenarios."""
    command = list(args.command or [])
    dashed = bool(command) and command[0] == "--"
    if dashed:
        command = command[1:]
    if args.record and not command:
        raise GpudoctorError("--record needs a command after '--' (gpudoctor probe --record DIR -- COMMAND ...)")
    if args.pid:
        if command:
            raise GpudoctorError("--pid cannot be combined with a command after '--': attach to a running "
                                 "process, or run a new one under supervision")
        for flag, given in (("--scenario", args.scenario), ("--no-scenarios", args.no_scenarios),
                            ("--list-scenarios", args.list_scenarios)):
            if given:
                raise GpudoctorError(f"{flag} cannot be combined with --pid")
        return attach_to(args.pid, args)
    if not command:
        if dashed:
            raise GpudoctorError("no command given after '--' (gpudoctor probe -- COMMAND ...)")
        from gpudoctor.probe import scenario_command

        return scenario_command.run(args)
    for flag, given in (("--scenario", args.scenario), ("--no-scenarios", args.no_scenarios),
                        ("--list-scenarios", args.list_scenarios)):
        if given:
            raise GpudoctorError(f"{flag} cannot be combined with a command after '--'")
    return supervise(command, args)
