"""Glue between the command line and the engine: settings in, report out, exit code."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from gpudoctor.errors import GpudoctorError
from gpudoctor.lint import settings as S
from gpudoctor.lint.paths import real_path
from gpudoctor.lint.selection import build_selection

if TYPE_CHECKING:
    from gpudoctor.lint.engine import LintResult


def _common_folder(paths: list[str]) -> Path:
    """The deepest folder holding every path: where the configuration is looked for, so
    that it does not depend on the order of the paths (nor on the working directory)."""
    import os

    if not paths:
        return Path.cwd()
    resolved = [str(real_path(Path(p))) for p in paths]
    folders = [p if os.path.isdir(p) else os.path.dirname(p) for p in resolved]
    return Path(os.path.commonpath(folders))


def build_settings(args: argparse.Namespace, paths: list[str]) -> S.Settings:
    """Resolve settings: command line first, then the nearest pyproject.toml, then defaults."""
    from gpudoctor.lint.config import FileConfig, parse_table
    from gpudoctor.lint.rules._registry import all_rules

    rules = all_rules()
    known = [r.code for r in rules]
    pyproject, document, nearest, nearest_document = S.find_config(_common_folder(paths))
    config = parse_table(document, pyproject, known) if pyproject else FileConfig()
    # The project (imports, the cache) is the nearest pyproject.toml's; a package of a
    # monorepo keeps its own root and requires-python under the repository's configuration.
    root = nearest.parent if nearest else Path.cwd()
    project = parse_table(nearest_document, nearest, known) if nearest and nearest != pyproject else config
    if args.target_version:
        minor = S.parse_target_version(args.target_version, "--target-version")
    elif config.target_version:
        minor = S.parse_target_version(config.target_version, config.origin)
    else:
        spec = project.requires_python or config.requires_python
        minor = (S.minor_from_requires_python(spec) if spec else None) or S.running_minor()
    # Two layers, as in ruff: the file's select/extend-select/ignore, then the command line's.
    from_file = build_selection(known, [r.code for r in rules if r.default_enabled],
                                select=config.select, extend_select=config.extend_select,
                                ignore=config.ignore, origin=config.origin)
    selection = build_selection(known, sorted(from_file.enabled), select=args.select,
                                extend_select=args.extend_select, ignore=args.ignore)
    return S.Settings(selection, minor, args.platform or config.platform or "linux", root,
                      exclude=config.exclude + tuple(getattr(args, "extend_exclude", None) or ()),
                      per_file_ignores=config.per_file_ignores,
                      config_file=pyproject if config.path is not None else None,
                      config_root=pyproject.parent if pyproject else None)


def run_lint(args: argparse.Namespace) -> int:
    """Run ``gpudoctor lint`` and return its exit code."""
    from gpudoctor.lint.discovery import discover
    from gpudoctor.lint.engine import lint_paths
    from gpudoctor.lint.patterns import check as check_patterns
    from gpudoctor.lint.reporters import get_reporter, statistics
    from gpudoctor.lint.reporters.printable import printable

    started = time.perf_counter()
    paths = list(args.paths) or (["-"] if args.stdin_filename else ["."])
    contents: dict[Path, bytes] = {}
    if args.stdin_filename and "-" not in paths:  # as ruff: stdin wins over the paths
        for path in paths:
            print(f"gpudoctor: warning: ignoring {path} in favour of standard input", file=sys.stderr)
        paths = ["-"]
    if "-" in paths:  # the source comes from stdin, as an editor sends an unsaved buffer
        if len(paths) > 1 or args.fix or args.diff:
            raise GpudoctorError("- (stdin) is linted alone, without --fix or --diff")
        named = Path(args.stdin_filename or "stdin.py")
        contents[real_path(named)] = sys.stdin.buffer.read()
        paths = [str(named)]
    # Checked here, before any file is walked: a bad pattern is a usage error (see config.py).
    check_patterns(getattr(args, "extend_exclude", None) or (), "--extend-exclude")
    settings = build_settings(args, paths)
    missing: list[str] = []  # reported, and the other paths still linted (exit 2 at the end)
    skipped: list[str] = []
    if contents:
        named = Path(paths[0])
        from gpudoctor.lint.discovery import in_default_excludes

        skip = args.force_exclude and (settings.excluded(named) or in_default_excludes(named, settings.project_root))
        files = [] if skip else [named]
    else:
        files = discover(paths, settings.excluded, force_exclude=args.force_exclude, missing=missing,
                         skipped=skipped, root=settings.project_root)
    for message in missing:
        print(f"gpudoctor: error: {message}", file=sys.stderr)
    for message in skipped:
        print(f"gpudoctor: warning: {message}", file=sys.stderr)
    if not files and not missing and not args.silent:
        print("gpudoctor: warning: no Python files found under the given paths", file=sys.stderr)
    if args.show_settings:
        _write(_settings_text(settings), args.output_file)
        return 2 if missing else 0
    if args.show_files:
        _write("".join(f"{printable(str(path))}\n" for path in files), args.output_file)
        return 2 if missing else 0
    jobs = args.jobs or _cpus()
    cache = None if args.no_cache or contents else _cache(settings, args.cache_dir)
    result = lint_paths(files, settings, cache=cache, jobs=jobs, contents=contents,
                        project_files=files if not contents and _names_root(paths, settings.project_root) else None)
    if args.diff:
        return _show_diff(result.findings, args.unsafe_fixes, args.quiet, args.silent, args.output_file,
                          root=settings.project_root)
    if args.fix:
        result = _fix(result, files, settings, args.unsafe_fixes, cache, jobs, talk=not (args.quiet or args.silent))
    # "All checks passed!" only when something was checked, every path was found and every
    # file analysed.
    summary = not args.quiet and (bool(result.findings) or (bool(files) and not missing
                                                            and not result.internal_errors))
    if args.statistics and args.output_format == "json":
        from gpudoctor.lint.reporters import statistics_json

        text = statistics_json(result.findings)
    elif args.statistics:
        text = statistics(result.findings)
    elif args.output_format == "full":
        from gpudoctor.lint.reporters.full import render

        text = render(result.findings, color=_use_color(args.output_file), with_summary=summary,
                      sources=_stdin_source(contents, paths))
    elif args.output_format == "concise":
        from gpudoctor.lint.reporters.concise import render as render_concise

        text = render_concise(result.findings, with_summary=summary, color=_use_color(args.output_file))
    else:
        text = get_reporter(args.output_format)(result.findings)
    if args.output_format in ("concise", "full") and not (args.statistics or args.quiet or contents):
        text += _fix_hint(result.findings, args)
    if not args.silent or args.output_file is not None:
        _write(text, args.output_file)
    for message in result.warnings:
        print(f"gpudoctor: warning: {message}", file=sys.stderr)
    if args.verbose:
        print(f"gpudoctor: {_account(result, time.perf_counter() - started)}", end="", file=sys.stderr)
    for message in result.internal_errors:
        print(f"gpudoctor: error: {message}", file=sys.stderr)
    if result.internal_errors or missing:
        return 2
    if result.findings and not args.exit_zero:
        return 1
    return 0


def _names_root(paths: list[str], root: Path) -> bool:
    """Does a path name the project's root folder (or one above it)? Its files are then all
    discovered: the whole project, with no other file to analyse for context."""
    import os

    for path in paths:
        if os.path.isdir(path) and real_path(root).is_relative_to(real_path(Path(path))):
            return True
    return False


def _account(result: LintResult, seconds: float) -> str:
    """What --verbose says of a run: where each linted file's findings came from."""
    def files(count: int) -> str:
        return f"{count} file{'s' if count != 1 else ''}"

    where = (f"in {result.workers} worker process{'es' if result.workers != 1 else ''}" if result.workers
             else "in this process")
    skipped = result.files_checked - result.analysed - result.cached
    context = (f"; {files(result.context)} importing them analysed for context "
               f"({result.context - result.context_analysed} from the cache)" if result.context else "")
    return (f"{files(result.files_checked)} checked: {result.analysed} analysed {where}, {result.cached} "
            f"from the cache, {skipped} without anything the rules look at{context}; {seconds:.2f} s\n")


def _stdin_source(contents: dict[Path, bytes], paths: list[str]) -> dict[str, str]:
    """The text read from stdin, under the name its findings show (for the code frames)."""
    from gpudoctor.lint.analysis.reading import decode

    out = {}
    for path, data in contents.items():
        text = decode(path, data)
        if isinstance(text, str):
            out[paths[0]] = text
    return out


def _settings_text(settings: S.Settings) -> str:
    """What --show-settings prints: where each setting came from is the point."""
    from gpudoctor.lint.reporters.printable import printable

    lines = [
        f"configuration: {printable(str(settings.config_file)) if settings.config_file else 'none (defaults)'}",
        f"project root: {printable(str(settings.project_root))}",
        f"target: Python 3.{settings.target_minor} on {settings.platform} "
        f"(default start method: {settings.default_start_method})",
        f"rules: {', '.join(sorted(settings.selection.enabled)) or 'none'}",
        f"exclude: {', '.join(settings.exclude) or 'the default folders only'}",
    ]
    lines.extend(f"per-file-ignores: {pattern} = {', '.join(codes)}" for pattern, codes in settings.per_file_ignores)
    return "".join(f"{line}\n" for line in lines)


def _show_diff(findings: list, unsafe: bool, quiet: bool = False, silent: bool = False,  # type: ignore[type-arg]
               output_file: str | None = None, root: Path | None = None) -> int:
    """Print the fixes as a diff, or write it to ``output_file`` (-q: and nothing else;
    -s: nothing); exit 1 if any."""
    from gpudoctor.lint.fixes import apply

    fix_plan = apply.plan(findings, unsafe, root)
    if not silent or output_file is not None:
        _write(apply.diff(fix_plan), output_file)
    _say_refused(fix_plan.refused)
    if quiet or silent:
        return 1 if fix_plan.texts else 0
    noun = "fix" if len(fix_plan.fixed) == 1 else "fixes"
    if fix_plan.fixed:
        print(f"Would fix {len(fix_plan.fixed)} finding{'s' if len(fix_plan.fixed) != 1 else ''} "
              f"({len(fix_plan.texts)} file{'s' if len(fix_plan.texts) != 1 else ''}) with the {noun} above.",
              file=sys.stderr)
    else:
        from gpudoctor.lint.fixes.apply import eligible

        hidden = 0 if unsafe else sum(1 for f in findings if eligible(f, unsafe=True) and not eligible(f, unsafe=False))
        print("No fix to show" + (f": {hidden} unsafe fix{'es' if hidden != 1 else ''} hidden, "
                                  "add `--unsafe-fixes` to see them." if hidden else "."), file=sys.stderr)
    return 1 if fix_plan.texts else 0


def _fix(result, files, settings, unsafe: bool, cache, jobs: int, talk: bool = True):  # type: ignore[no-untyped-def]
    """Apply fixes, then lint again so that what is reported is what is left (``talk``:
    say how many were fixed)."""
    from gpudoctor.lint.engine import lint_paths
    from gpudoctor.lint.fixes import apply

    fix_plan = apply.plan(result.findings, unsafe, settings.project_root)
    apply.write(fix_plan)
    _say_refused(fix_plan.refused)
    if fix_plan.texts and talk:
        print(f"Fixed {len(fix_plan.fixed)} finding{'s' if len(fix_plan.fixed) != 1 else ''} "
              f"in {len(fix_plan.texts)} file{'s' if len(fix_plan.texts) != 1 else ''}.", file=sys.stderr)
    if fix_plan.texts:
        return lint_paths(files, settings, cache=cache, jobs=jobs)
    return result


def _say_refused(refused: list[tuple[str, str]]) -> None:
    from gpudoctor.lint.reporters.printable import printable

    for path, reason in refused:
        print(f"gpudoctor: not fixing {printable(path)}: {reason}", file=sys.stderr)


def _cpus() -> int:
    import os

    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _cache(settings: S.Settings, folder: str | None):  # type: ignore[no-untyped-def]
    """The result cache for these settings (only what changes the analysis is in its key),
    or None when there is no folder gpudoctor may use for it (the cache has said why)."""
    from gpudoctor.lint.cache import Cache

    key = f"py3{settings.target_minor}|{settings.platform}|{settings.project_root.resolve()}"
    cache = Cache(settings.project_root, key, Path(folder) if folder else None)
    return cache if cache.usable else None


def _fix_hint(findings: list, args: argparse.Namespace) -> str:  # type: ignore[type-arg]
    from gpudoctor.lint.fixes.apply import eligible

    findings = [f for f in findings if f.site.cell is None]  # a notebook's are not applied
    safe = sum(1 for f in findings if eligible(f, unsafe=False))
    hidden = sum(1 for f in findings if eligible(f, unsafe=True)) - safe
    lines = []
    if safe and not args.fix:
        lines.append(f"{safe} fixable with `--fix`.")
    if hidden and not args.unsafe_fixes:
        lines.append(f"No safe fix; {hidden} unsafe fix{'es' if hidden != 1 else ''} hidden: "
                     "preview with `--diff --unsafe-fixes`, apply with `--fix --unsafe-fixes` "
                     "(may change behaviour)." if not safe else
                     f"{hidden} more fixable with `--fix --unsafe-fixes` (may change behaviour; "
                     "preview with `--diff --unsafe-fixes`).")
    elif hidden and not args.fix:
        lines.append(f"{hidden} fixable with `--fix --unsafe-fixes`.")
    return "".join(line + "\n" for line in lines)


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
    return 0
