"""Helpers for projects that want gpudoctor's checks in their own test suite."""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterable, Sequence

__all__ = ["assert_lint_clean"]


def assert_lint_clean(paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
                      select: Sequence[str] | None = None) -> None:
    """Lint ``paths`` (files or directories) and fail with every finding, one line each.

    Settings come from the nearest ``pyproject.toml``, as for ``gpudoctor lint``;
    ``select`` chooses rule codes or prefixes (``["GD1"]``) instead of the default set.
    The message uses the concise format (``path:row:col: CODE message``), so an editor
    or CI log can jump to each finding.
    """
    __tracebackhide__ = True  # pytest shows the findings, not this function's source
    from gpudoctor.lint.discovery import discover
    from gpudoctor.lint.engine import lint_paths
    from gpudoctor.lint.inputs import build_settings
    from gpudoctor.lint.reporters import ReportOptions, render

    given = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    names = [os.fspath(p) for p in given]
    args = argparse.Namespace(target_version=None, platform=None, select=list(select) if select else None,
                              extend_select=None, ignore=None)
    settings = build_settings(args, names)
    result = lint_paths(discover(names), settings)
    problems = list(result.internal_errors)
    if result.findings:
        problems.insert(0, render(result.findings, ReportOptions("concise")).rstrip("\n"))
    if problems:
        raise AssertionError("gpudoctor lint found problems:\n" + "\n".join(problems))
