"""``gpudoctor lint`` from the command line to the exit code, in four stages:

1. inputs (inputs.py): the paths or stdin, the settings that apply, the files found;
2. execution (execution.py): lint them, then apply or preview the fixes (or add noqa
   comments, ``--add-noqa``);
3. presentation (reporters): ``render(findings, options)`` for every output format;
4. the exit code (``exit_code``), from what the run found and what went wrong.

What the user reads on stderr is said here, in the order things happen.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from gpudoctor.errors import GpudoctorError
from gpudoctor.exit_codes import EXIT_ERROR, EXIT_FINDINGS, EXIT_OK
from gpudoctor.lint.inputs import STDIN, LintInputs, gather
from gpudoctor.output_file import SOURCE_SUFFIXES

if TYPE_CHECKING:
    from gpudoctor.lint.engine import LintResult
    from gpudoctor.lint.findings import Finding
    from gpudoctor.lint.reporters import ReportOptions

__all__ = ["exit_code", "report_options", "run_lint", "run_rule"]


def exit_code(findings: bool, errors: bool = False, exit_zero: bool = False) -> int:
    """The status of a lint run: an error (a missing path, a file that could not be
    analysed) wins over findings; --exit-zero forgives the findings, never an error."""
    if errors:
        return EXIT_ERROR
    if findings and not exit_zero:
        return EXIT_FINDINGS
    return EXIT_OK


def run_lint(args: argparse.Namespace) -> int:
    """Run ``gpudoctor lint`` and return its exit code."""
    started = time.perf_counter()
    if args.statistics and args.output_format == "sarif":
        # Counts in text would leave no SARIF document to parse, and SARIF has no place for them.
        raise GpudoctorError("--statistics cannot be combined with --output-format sarif (a SARIF "
                             "document has no place for counts; use --output-format json to get them as JSON)")
    _check_add_noqa(args)
    inputs = gather(args)
    _check_output_file(args.output_file, inputs)
    _say_input_problems(inputs, silent=args.silent)
    if args.show_settings or args.show_files:
        from gpudoctor.lint.reporters.printable import printable
        from gpudoctor.lint.reporters.run_info import settings_text

        _write(settings_text(inputs.settings) if args.show_settings
               else "".join(f"{printable(str(path))}\n" for path in inputs.files), args.output_file)
        return exit_code(findings=False, errors=bool(inputs.missing))
    from gpudoctor.lint import execution

    run = execution.prepare(inputs, args.jobs, args.no_cache, args.cache_dir)
    result = execution.lint(inputs, run)
    if args.diff:
        return _show_diff(result.findings, args, root=inputs.settings.project_root)
    if args.add_noqa:
        # No report: what was written, and what could not be, is said on stderr.
        left = execution.add_noqa(result, inputs, talk=not (args.quiet or args.silent), listing=not args.silent)
        _say_how_it_went(result, args.verbose, started)
        return exit_code(findings=bool(left), errors=bool(result.internal_errors or inputs.missing),
                         exit_zero=args.exit_zero)
    if args.fix:
        result = execution.fix(result, inputs, run, args.unsafe_fixes, talk=not (args.quiet or args.silent))
    from gpudoctor.lint.reporters import render

    if not args.silent or args.output_file is not None:
        _write(render(result.findings, report_options(args, inputs, result)), args.output_file)
    _say_how_it_went(result, args.verbose, started)
    return exit_code(findings=bool(result.findings), errors=bool(result.internal_errors or inputs.missing),
                     exit_zero=args.exit_zero)


def _say_how_it_went(result: LintResult, verbose: bool, started: float) -> None:
    """The run's warnings, its account (-v) and the files it could not analyse, on stderr."""
    for message in result.warnings:
        print(f"gpudoctor: warning: {message}", file=sys.stderr)
    if verbose:
        from gpudoctor.lint.reporters.run_info import account

        print(f"gpudoctor: {account(result, time.perf_counter() - started)}", end="", file=sys.stderr)
    for message in result.internal_errors:
        print(f"gpudoctor: error: {message}", file=sys.stderr)


# What --add-noqa cannot be combined with (as ruff): it writes the files and prints no
# report, so neither stdin nor a report's options have a meaning with it.
_NOT_WITH_ADD_NOQA = (("fix", "--fix"), ("diff", "--diff"), ("stdin_filename", "--stdin-filename"),
                      ("statistics", "--statistics"), ("output_file", "--output-file"),
                      ("show_files", "--show-files"), ("show_settings", "--show-settings"))


def _check_add_noqa(args: argparse.Namespace) -> None:
    """Refuse --add-noqa with an option it cannot honour, before anything is read."""
    if not args.add_noqa:
        return
    for name, option in _NOT_WITH_ADD_NOQA:
        if getattr(args, name):
            raise GpudoctorError(f"--add-noqa cannot be combined with {option}")
    if STDIN in args.paths:
        raise GpudoctorError("--add-noqa cannot be combined with - (stdin): it writes the files it names")


def report_options(args: argparse.Namespace, inputs: LintInputs, result: LintResult) -> ReportOptions:
    """How the command line asks for the findings to be shown."""
    from gpudoctor.lint.reporters import ReportOptions

    # "All checks passed!" only when something was checked, every path was found and every
    # file analysed.
    summary = not args.quiet and (bool(result.findings) or (bool(inputs.files) and not inputs.missing
                                                            and not result.internal_errors))
    return ReportOptions(
        output_format=args.output_format,
        statistics=args.statistics,
        summary=summary,
        color=_use_color(args.output_file),
        sources=_stdin_source(inputs) if args.output_format == "full" else {},
        # Not for stdin: an editor shows the findings of a buffer that --fix cannot write.
        fix_hint=not (args.quiet or inputs.from_stdin),
        fixing=args.fix,
        unsafe_fixes=args.unsafe_fixes,
    )




def _check_output_file(output_file: str | None, inputs: LintInputs) -> None:
    """Refuse an ``-o`` that would write the report over source code, before anything is
    written: a file being linted (named by its own path, or through a link, or as
    ``--stdin-filename``), or any existing ``.py``, ``.pyi`` or ``.ipynb`` file."""
    import os

    if output_file is None:
        return
    from gpudoctor.lint.reporters.printable import printable

    try:
        # Resolved as the writer goes: folders made as needed (``new/../m.py`` is ``m.py``).
        named = _with_real_folder(output_file)
        linted = {way for path in [*inputs.files, *inputs.contents]
                  for way in (os.path.realpath(path), _with_real_folder(str(path)))}
        if {named, os.path.realpath(output_file)} & linted:
            raise GpudoctorError(f"--output-file {printable(output_file)}: refusing to write the report over a "
                                 "file being linted")
    except OSError:  # no working folder to resolve a relative path from: the write says why
        return
    if os.path.isfile(named) and os.path.splitext(named)[1].lower() in SOURCE_SUFFIXES:
        raise GpudoctorError(f"--output-file {printable(output_file)}: refusing to write the report over an "
                             "existing Python source file (.py, .pyi, .ipynb)")


def _with_real_folder(path: str) -> str:
    """``path`` with its folder resolved and its own name kept (a link there is replaced
    by the report, not written through: see gpudoctor.output_file)."""
    import os

    absolute = os.path.abspath(path)
    return os.path.join(os.path.realpath(os.path.dirname(absolute)), os.path.basename(absolute))


def _say_input_problems(inputs: LintInputs, silent: bool) -> None:
    """Say which paths were not found or left out, or that there was nothing to lint."""
    for message in inputs.missing:
        print(f"gpudoctor: error: {message}", file=sys.stderr)
    for message in inputs.skipped:
        print(f"gpudoctor: warning: {message}", file=sys.stderr)
    if not inputs.files and not inputs.missing and not silent:
        print("gpudoctor: warning: no Python files found under the given paths", file=sys.stderr)


def _stdin_source(inputs: LintInputs) -> dict[str, str]:
    """The text read from stdin, under the name its findings show (for the code frames)."""
    from gpudoctor.lint.frontend.reading import decode

    out = {}
    for path, data in inputs.contents.items():
        text = decode(path, data)
        if isinstance(text, str):
            out[inputs.paths[0]] = text
    return out


def _show_diff(findings: list[Finding], args: argparse.Namespace, root: Path | None) -> int:
    """Print the fixes as a diff, or write it to -o's file (-q: and nothing else; -s:
    nothing); exit 1 if a file would change."""
    from gpudoctor.lint.execution import preview, say_no_fix, say_refused

    shown = preview(findings, args.unsafe_fixes, root)
    if not args.silent or args.output_file is not None:
        _write(shown.diff, args.output_file)
    say_refused(shown.refused)
    if not (args.quiet or args.silent):
        say_no_fix(findings)
        print(shown.summary, file=sys.stderr)
    return exit_code(findings=shown.changes)


def _use_color(output_file: str | None) -> bool:
    """Colour only for a terminal, and never when NO_COLOR is set (no-color.org)."""
    import os

    if output_file is not None or os.environ.get("NO_COLOR"):
        return False
    return bool(os.environ.get("FORCE_COLOR")) or sys.stdout.isatty()


def _write(text: str, output_file: str | None) -> None:
    if output_file is None:
        sys.stdout.write(text)
        return
    from gpudoctor.output_file import write_text_file

    target = Path(output_file)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        write_text_file(target, text)
    except OSError as exc:
        raise GpudoctorError(f"cannot write {output_file}: {exc.strerror or exc}") from exc


def run_rule(args: argparse.Namespace) -> int:
    """Print one rule's documentation, or all of them."""
    from gpudoctor.lint.rules._registry import all_rules, rule_by_code

    if args.all:
        chosen = list(all_rules())
    elif args.code:
        rule = rule_by_code(args.code)
        if rule is None:
            raise GpudoctorError(f"unknown rule code {args.code!r} (see `gpudoctor rule --all`)")
        chosen = [rule]
    else:
        raise GpudoctorError("name a rule code (e.g. `gpudoctor rule GD101`) or pass --all")
    for rule in chosen:
        print(f"# {rule.code} {rule.name}\n\n{rule.summary}.\n\n{rule.documentation()}\n")
    return EXIT_OK
