"""Glue between the command line and the engine: settings in, report out, exit code."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gpudoctor.errors import GpudoctorError
from gpudoctor.lint import settings as S
from gpudoctor.lint.selection import build_selection


def build_settings(args: argparse.Namespace, paths: list[str]) -> S.Settings:
    """Resolve settings: command line first, then the nearest pyproject.toml, then defaults."""
    from gpudoctor.lint.rules.registry import all_rules

    start = Path(paths[0]) if paths else Path.cwd()
    pyproject = S.find_pyproject(start.resolve())
    root = pyproject.parent if pyproject else Path.cwd()
    if args.target_version:
        minor = S.parse_target_version(args.target_version, "--target-version")
    else:
        minor = _minor_from(pyproject) or S.running_minor()
    rules = all_rules()
    selection = build_selection(
        [r.code for r in rules],
        [r.code for r in rules if r.default_enabled],
        select=args.select, extend_select=args.extend_select, ignore=args.ignore,
    )
    return S.Settings(selection, minor, args.platform or "linux", root)


def _minor_from(pyproject: Path | None) -> int | None:
    if pyproject is None:
        return None
    data = S.read_pyproject(pyproject)
    project = data.get("project")
    spec = project.get("requires-python") if isinstance(project, dict) else None
    return S.minor_from_requires_python(spec) if isinstance(spec, str) else None


def run_lint(args: argparse.Namespace) -> int:
    """Run ``gpudoctor lint`` and return its exit code."""
    from gpudoctor.lint.discovery import discover
    from gpudoctor.lint.engine import lint_paths
    from gpudoctor.lint.reporters import get_reporter

    paths = list(args.paths) or ["."]
    settings = build_settings(args, paths)
    files = discover(paths)
    result = lint_paths(files, settings)
    sys.stdout.write(get_reporter(args.output_format)(result.findings))
    for message in result.internal_errors:
        print(f"gpudoctor: error: {message}", file=sys.stderr)
    if result.internal_errors:
        return 2
    if result.findings and not args.exit_zero:
        return 1
    return 0


def run_rule(args: argparse.Namespace) -> int:
    """Print one rule's documentation, or all of them."""
    from gpudoctor.lint.rules.registry import all_rules, rule_by_code

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
    return 0
