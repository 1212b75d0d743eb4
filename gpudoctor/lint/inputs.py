"""What ``gpudoctor lint`` is asked to check: the source (files, or stdin), the settings
that apply to it, and the files found under the given paths.

The first stage of a run (inputs, execution, presentation, exit code: see runner.py).
Nothing here lints or prints findings; what it cannot find is returned as data
(``missing``, ``skipped``) so that the runner reports it once, in order, and still
lints the rest.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from gpudoctor.errors import GpudoctorError
from gpudoctor.lint import settings as S
from gpudoctor.lint.paths import real_path
from gpudoctor.lint.reporters.printable import printable
from gpudoctor.lint.selection import build_selection

if TYPE_CHECKING:
    from gpudoctor.lint.config import FileConfig

STDIN = "-"


@dataclass(frozen=True)
class LintInputs:
    """The paths as given (stdin's source under the name it is linted as), the settings,
    the files to lint, and what could not be linted."""

    paths: list[str]
    # Source read from stdin, by the real path of the name it is linted as (empty: none).
    contents: dict[Path, bytes]
    settings: S.Settings
    files: list[Path]
    missing: list[str]  # "PATH: no such file or directory": exit 2 at the end
    skipped: list[str]  # a path left out on purpose (a warning)

    @property
    def from_stdin(self) -> bool:
        return bool(self.contents)


def _common_folder(paths: list[str]) -> Path:
    """The deepest folder holding every path: where the configuration is looked for, so
    that it does not depend on the order of the paths (nor on the working directory)."""
    import os

    if not paths:
        return Path.cwd()
    # The folder a file is in, links in it resolved: a file that is a link to another
    # project's file is still linted in the project it lies in (its folder's settings).
    folders = []
    for path in paths:
        absolute = os.path.abspath(path)
        folders.append(str(real_path(absolute if os.path.isdir(absolute) else os.path.dirname(absolute))))
    return Path(os.path.commonpath(folders))


# Besides pyproject.toml (settings.find_config), what marks the root of a project.
PROJECT_MARKERS = ("setup.cfg", "setup.py", ".git")


def _marked_project(start: Path) -> Path | None:
    """The nearest folder at or above ``start`` holding one of PROJECT_MARKERS (a ``.git``
    may be a file: a worktree's), or None."""
    import os

    for folder in (start, *start.parents):
        if any(os.path.lexists(folder / marker) for marker in PROJECT_MARKERS):
            return folder
    return None


def _working_folder() -> Path | None:
    """The working folder, or None when it is gone (deleted under this process)."""
    try:
        return Path.cwd()
    except OSError:
        return None


def _check_working_folder(args: argparse.Namespace, paths: list[str]) -> None:
    """Raise when the working folder is gone and the run needs it: a relative path names
    nothing then. Absolute paths are linted as usual (the project found from them)."""
    import os

    if _working_folder() is not None:
        return
    named = [*paths, getattr(args, "cache_dir", None), getattr(args, "stdin_filename", None)]
    if any(p and not os.path.isabs(os.path.expanduser(p)) for p in named):
        raise GpudoctorError("the working folder no longer exists (was it deleted?): change to a folder that "
                             "exists, or name the files to lint by their absolute paths")


def build_settings(args: argparse.Namespace, paths: list[str]) -> S.Settings:
    """Resolve settings: command line first, then the nearest pyproject.toml, then defaults."""
    import os

    from gpudoctor.lint.config import FileConfig, parse_table
    from gpudoctor.lint.rules._registry import all_rules

    rules = all_rules()
    known = [r.code for r in rules]
    pyproject, document, nearest, nearest_document = S.find_config(_common_folder(paths))
    config = parse_table(document, pyproject, known) if pyproject else FileConfig()
    # The project (imports, the callers searched, the cache) is the nearest pyproject.toml's;
    # a package of a monorepo keeps its own root and requires-python under the repository's
    # configuration. No pyproject.toml: the nearest folder above the paths that marks a
    # project otherwise (setup.cfg, setup.py, .git), else the folder of the paths, never
    # the working folder: what a run finds depends on the paths it is given, not on where
    # it is started from. The cache of a folder that is no project stays where the run
    # starts, as ruff's does (the folder linted may be one nobody should write into).
    common = _common_folder(paths)
    marked = nearest.parent if nearest else _marked_project(common)
    root = marked or common
    cache_root = marked or _working_folder() or common
    # Paths of no project are a project of their own: a folder named is walked for the
    # callers of its files, the folder around named files is not (they may lie far apart).
    search_callers = marked is not None or any(_common_folder([p]) == common and os.path.isdir(p) for p in paths)
    project = parse_table(nearest_document, nearest, known) if nearest and nearest != pyproject else config
    spec = project.requires_python or config.requires_python
    if args.target_version:
        minor = S.parse_target_version(args.target_version, "--target-version")
    elif config.target_version:
        minor = S.parse_target_version(config.target_version, config.origin)
    else:
        minor = (S.minor_from_requires_python(spec) if spec else None) or S.running_minor()
    # The newest Python judged too (a start method's default changes on the way): the
    # project's upper bound, else the newest known.
    bound = S.newest_from_requires_python(spec) if spec else None
    newest = max(minor, min(bound if bound is not None else S.SUPPORTED_MINORS.stop - 1, S.SUPPORTED_MINORS.stop - 1))
    _warn_requires_python(args, nearest or pyproject, project, config, spec, minor, bound)
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
                      config_root=pyproject.parent if pyproject else None, cache_root=cache_root,
                      search_callers=search_callers, newest_minor=newest)


def _warn_requires_python(args: argparse.Namespace, where: Path | None, project: FileConfig, config: FileConfig,
                          spec: str | None, minor: int, bound: int | None) -> None:
    """Say so when ``requires-python``, which decides the Pythons judged, cannot be read: the
    run goes on with the target it falls back to (a warning, not an error: the key is the
    project's, not gpudoctor's)."""
    other = project.requires_python_other if project.requires_python_other is not None \
        else config.requires_python_other
    if other is not None:
        why = f"{other!r} is a {type(other).__name__}, not a version specifier string"
    elif spec is not None and spec.strip() and S.minor_from_requires_python(spec) is None and bound is None:
        why = f"{spec!r} names no Python 3 version gpudoctor can read"
    elif bound is not None and bound < minor and not (args.target_version or config.target_version):
        why = f"{spec!r} admits no Python"
    else:
        return
    if getattr(args, "silent", False):
        return
    target = f"Python 3.{minor}"
    print(f"gpudoctor: warning: requires-python of {printable(str(where)) if where else 'pyproject.toml'}: {why}; "
          f"judging {target}", file=sys.stderr)


def _source_paths(args: argparse.Namespace) -> tuple[list[str], dict[Path, bytes]]:
    """The paths to lint, and the source read from stdin when it is asked for (then the
    one path is the name that source is linted as)."""
    if any(path == "" for path in args.paths):
        # (an unset variable in a script, ``gpudoctor lint --fix "$FILE"``: not the whole folder)
        raise GpudoctorError("a path given is empty (name '.' to lint the current folder)")
    if args.stdin_filename is not None and (args.stdin_filename == "" or os.path.isdir(args.stdin_filename)
                                            or args.stdin_filename.endswith(("/", os.sep))):
        raise GpudoctorError(f"--stdin-filename {printable(args.stdin_filename)!s} is not a file name: it names "
                             "the file the source from stdin is linted as")
    paths = list(args.paths) or ([STDIN] if args.stdin_filename else ["."])
    if args.stdin_filename and STDIN not in paths:  # as ruff: stdin wins over the paths
        for path in paths:
            print(f"gpudoctor: warning: ignoring {path} in favour of standard input", file=sys.stderr)
        paths = [STDIN]
    if STDIN not in paths:
        return paths, {}
    # The source comes from stdin, as an editor sends an unsaved buffer.
    if len(paths) > 1 or args.fix or args.diff:
        raise GpudoctorError("- (stdin) is linted alone, without --fix or --diff")
    named = Path(args.stdin_filename or "stdin.py")
    return [str(named)], {real_path(named): _read_stdin()}


def _read_stdin() -> bytes:
    """Standard input, up to the size a file may have (an endless pipe is refused, not
    held in memory)."""
    from gpudoctor.input_file import DEFAULT_LIMIT

    stream = getattr(sys.stdin, "buffer", None)
    if stream is None:
        raise GpudoctorError("- (stdin) is not open: there is no source to read")
    data = stream.read(DEFAULT_LIMIT + 1)
    if len(data) > DEFAULT_LIMIT:
        raise GpudoctorError(f"standard input holds more than {DEFAULT_LIMIT // (1024 * 1024)} MiB, the most a file to "
                             "lint may hold")
    return bytes(data)


def gather(args: argparse.Namespace) -> LintInputs:
    """Read what the command line asks to lint, resolve the settings and find the files."""
    from gpudoctor.lint.discovery import discover, in_default_excludes
    from gpudoctor.lint.patterns import check as check_patterns

    paths, contents = _source_paths(args)
    _check_working_folder(args, paths)
    # Checked here, before any file is walked: a bad pattern is a usage error (see config.py).
    check_patterns(getattr(args, "extend_exclude", None) or (), "--extend-exclude")
    settings = build_settings(args, paths)
    missing: list[str] = []
    skipped: list[str] = []
    if contents:
        named = Path(paths[0])
        skip = args.force_exclude and (settings.excluded(named) or in_default_excludes(named, settings.project_root))
        files = [] if skip else [named]
    else:
        files = discover(paths, settings.excluded, force_exclude=args.force_exclude, missing=missing,
                         skipped=skipped, root=settings.project_root)
    return LintInputs(paths, contents, settings, files, missing, skipped)


def names_root(paths: list[str], root: Path) -> bool:
    """Does a path name the project's root folder (or one above it)? Its files are then all
    discovered: the whole project, with no other file to analyse for context."""
    import os

    for path in paths:
        if os.path.isdir(path) and real_path(root).is_relative_to(real_path(Path(path))):
            return True
    return False
