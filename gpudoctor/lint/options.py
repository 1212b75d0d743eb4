"""Command-line options of ``gpudoctor lint`` and ``gpudoctor rule``.

Import-light: ``gpudoctor lint --help`` must answer without importing libcst.
"""

from __future__ import annotations

import argparse
from typing import Any

from gpudoctor.lint.targets import PLATFORMS, TARGET_VERSIONS

OUTPUT_FORMATS = ("concise", "full", "json", "sarif", "github")


def _codes(value: str) -> list[str]:
    codes = [part.strip().upper() for part in value.split(",") if part.strip()]
    if not codes:  # ``--select=``: as ruff, an error rather than the defaults in disguise
        raise argparse.ArgumentTypeError("expected one or more rule codes or prefixes (e.g. GD1,GD201)")
    return codes


def add_lint_parser(sub: Any) -> argparse.ArgumentParser:
    """Add the ``lint`` subcommand."""
    parser: argparse.ArgumentParser = sub.add_parser(
        "lint",
        help="check Python files for GPU + multiprocessing hazards",
        description="Check Python files for ways GPU frameworks and process "
        "parallelism break each other. Never imports or runs the code.",
    )
    parser.add_argument("paths", nargs="*", metavar="PATH",
                        help="files or directories (default: .); - reads the source from stdin")
    parser.add_argument(
        "--stdin-filename", metavar="PATH",
        help="the path the source read from stdin has (for configuration, imports and messages)",
    )
    parser.add_argument(
        "--select", type=_codes, action="extend", metavar="CODES",
        help="only these rule codes or prefixes (comma-separated; ALL for every rule)",
    )
    parser.add_argument(
        "--ignore", type=_codes, action="extend", metavar="CODES",
        help="rule codes or prefixes to skip (comma-separated)",
    )
    parser.add_argument(
        "--extend-select", type=_codes, action="extend", metavar="CODES",
        help="rule codes or prefixes to add to the selection (comma-separated)",
    )
    parser.add_argument(
        "--target-version", choices=TARGET_VERSIONS,
        help="oldest Python the code runs on; decides the default start method "
        "(default: requires-python of the nearest pyproject.toml, else this interpreter)",
    )
    parser.add_argument(
        "--platform", choices=PLATFORMS,
        help="operating system the code runs on; decides the default start method (default: linux)",
    )
    parser.add_argument(
        "--output-format", choices=OUTPUT_FORMATS, default="concise",
        help="how findings are printed (default: concise)",
    )
    parser.add_argument(
        "-o", "--output-file", metavar="FILE",
        help="write the report to FILE instead of stdout; refused (exit 2, nothing written) when FILE is a "
        "file being linted or an existing .py, .pyi or .ipynb file",
    )
    parser.add_argument(
        "--statistics", action="store_true",
        help="print the number of findings per rule code instead of the findings (as JSON with "
        "--output-format json; refused with sarif, whose document has no place for them)",
    )
    parser.add_argument(
        "--force-exclude", action="store_true",
        help="apply the configured exclude patterns to files named on the command line too",
    )
    parser.add_argument(
        "--extend-exclude", "--exclude", dest="extend_exclude", type=_patterns, action="extend", metavar="PATTERNS",
        help="more paths to skip (comma-separated, gitignore syntax, relative to the project root), "
        "added to the configured ones",
    )
    parser.add_argument("--show-files", action="store_true", help="list the files that would be checked, and stop")
    parser.add_argument(
        "--show-settings", action="store_true",
        help="print the settings that apply (configuration file, root, target, rules), and stop",
    )
    parser.add_argument("--fix", action="store_true", help="apply safe fixes")
    parser.add_argument(
        "--unsafe-fixes", action="store_true",
        help="also apply (with --fix) or show (with --diff) fixes that may change behaviour",
    )
    parser.add_argument("--diff", action="store_true", help="print the fixes as a diff; change no file")
    parser.add_argument(
        "--add-noqa", action="store_true",
        help="add `# noqa: CODE` to each line with a finding, so that the next run is clean (adopting gpudoctor "
        "on existing code); the findings no line comment can suppress are listed. Not with --fix, --diff, stdin, "
        "--statistics, -o, --show-files or --show-settings",
    )
    parser.add_argument("--no-cache", action="store_true", help="do not read or write the result cache")
    parser.add_argument(
        "--cache-dir", metavar="DIR",
        help="where to keep the result cache (default: .gpudoctor_cache in the project root)",
    )
    parser.add_argument(
        "-j", "--jobs", type=_jobs, default=None, metavar="N",
        help="worker processes for large runs (default: the number of CPUs; 1: no workers); never more "
        "than the CPUs this process may use, nor than the files to analyse",
    )
    parser.add_argument(
        "--exit-zero", action="store_true", help="exit 0 even when there are findings",
    )
    quiet = parser.add_mutually_exclusive_group()
    quiet.add_argument(
        "-v", "--verbose", action="store_true",
        help="also say on stderr how the run went: files checked, linted, analysed (in how many "
        "worker processes) or reused from the cache, and the time taken",
    )
    quiet.add_argument(
        "-q", "--quiet", action="store_true",
        help="print the findings and nothing else (no summary, no fix hint)",
    )
    quiet.add_argument(
        "-s", "--silent", action="store_true",
        help="print no findings (errors still go to stderr; the exit code still says whether "
        "there were findings; -o still writes its file)",
    )
    parser.set_defaults(handler=_run_lint)
    return parser


def _patterns(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]


def _jobs(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be a positive whole number, not {value!r}")
    return number


def add_rule_parser(sub: Any) -> argparse.ArgumentParser:
    """Add the ``rule`` subcommand, which prints a rule's documentation."""
    parser: argparse.ArgumentParser = sub.add_parser(
        "rule", help="explain a lint rule", description="Print the documentation of a lint rule.",
    )
    parser.add_argument("code", nargs="?", metavar="CODE", help="rule code, e.g. GD101")
    parser.add_argument("--all", action="store_true", help="print every rule's documentation")
    parser.set_defaults(handler=_run_rule)
    return parser


def _run_lint(args: argparse.Namespace) -> int:
    import sys

    from gpudoctor.lint.runner import run_lint

    code = run_lint(args)
    workers = sys.modules.get("gpudoctor.lint.workers")  # (loaded only where workers may have run)
    if workers is not None:
        workers.stop_helpers()
    return code


def _run_rule(args: argparse.Namespace) -> int:
    from gpudoctor.lint.runner import run_rule

    return run_rule(args)
