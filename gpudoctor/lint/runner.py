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
    from gpudoctor.lint.config import FileConfig, parse_table
    from gpudoctor.lint.rules.registry import all_rules

    rules = all_rules()
    known = [r.code for r in rules]
    start = Path(paths[0]) if paths else Path.cwd()
    pyproject = S.find_pyproject(start.resolve())
    config = parse_table(S.read_pyproject(pyproject), pyproject, known) if pyproject else FileConfig()
    root = pyproject.parent if pyproject else Path.cwd()
    if args.target_version:
        minor = S.parse_target_version(args.target_version, "--target-version")
    elif config.target_version:
        minor = S.parse_target_version(config.target_version, config.origin)
    else:
        spec = config.requires_python
        minor = (S.minor_from_requires_python(spec) if spec else None) or S.running_minor()
    # Two layers, as in ruff: the file's select/extend-select/ignore, then the command line's.
    from_file = build_selection(known, [r.code for r in rules if r.default_enabled],
                                select=config.select, extend_select=config.extend_select,
                                ignore=config.ignore, origin=config.origin)
    selection = build_selection(known, sorted(from_file.enabled), select=args.select,
                                extend_select=args.extend_select, ignore=args.ignore)
    return S.Settings(selection, minor, args.platform or config.platform or "linux", root,
                      exclude=config.exclude, per_file_ignores=config.per_file_ignores)


def run_lint(args: argparse.Namespace) -> int:
    """Run ``gpudoctor lint`` and return its exit code."""
    from gpudoctor.lint.discovery import discover
    from gpudoctor.lint.engine import lint_paths
    from gpudoctor.lint.reporters import get_reporter, statistics

    paths = list(args.paths) or ["."]
    settings = build_settings(args, paths)
    files = discover(paths, settings.excluded, force_exclude=args.force_exclude)
    result = lint_paths(files, settings)
    text = statistics(result.findings) if args.statistics else get_reporter(args.output_format)(result.findings)
    _write(text, args.output_file)
    for message in result.internal_errors:
        print(f"gpudoctor: error: {message}", file=sys.stderr)
    if result.internal_errors:
        return 2
    if result.findings and not args.exit_zero:
        return 1
    return 0


def _write(text: str, output_file: str | None) -> None:
    if output_file is None:
        sys.stdout.write(text)
        return
    target = Path(output_file)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        temporary = target.with_name(f".{target.name}.tmp")
        temporary.write_text(text, encoding="utf-8")
        temporary.replace(target)
    except OSError as exc:
        raise GpudoctorError(f"cannot write {output_file}: {exc.strerror or exc}") from exc


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
