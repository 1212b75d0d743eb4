"""The cells this kernel executed, in the order it executed them, as the linter reads them.

A notebook file shows its cells in the order they are written; the kernel's state is
the product of the order they ran, re-runs and deleted cells included. IPython keeps
that order: ``In[N]`` (the raw inputs, as typed) is the cell that ran with execution
count N. They become a notebook held in memory, one code cell per execution, so that
cell N of it *is* ``In[N]``: the linter reads it as it reads any notebook (magics and
shell escapes neutralised in place, see gpudoctor/lint/notebook.py), and its findings
are located at ``cell N``, the execution count a user sees as ``[N]``.

The notebook is named in the kernel's working directory, where no file of that name
exists: the configuration (``pyproject.toml``) and the project's modules the cells import
are found from there, as for a notebook saved in that folder. Nothing is written.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from IPython.core.interactiveshell import InteractiveShell

    from gpudoctor.lint.engine import LintResult
    from gpudoctor.lint.initializations import FirstInit
    from gpudoctor.lint.settings import Settings

# The linter's targets (gpudoctor/lint/settings.py SUPPORTED_MINORS) and platforms.
_TARGETS = range(10, 15)
_PLATFORMS = ("linux", "darwin", "win32")


def history(shell: InteractiveShell) -> list[str]:
    """The raw input of every executed cell: item N-1 is ``In[N]``."""
    raw = list(getattr(shell.history_manager, "input_hist_raw", None) or shell.user_ns.get("In", [""]))
    return [cell if isinstance(cell, str) else "" for cell in raw[1:]]


def virtual_path() -> Path:
    """Where the kernel's history is said to be: its working directory, a name of its own."""
    from gpudoctor.safe_path import working_folder

    # (A kernel whose folder was deleted still has a name for its cells: under /.)
    return Path(working_folder() or os.sep) / f"kernel-{os.getpid()}-executed-cells.ipynb"


def as_notebook(cells: Sequence[str]) -> bytes:
    document = {
        "cells": [{"cell_type": "code", "execution_count": n, "metadata": {}, "outputs": [], "source": source}
                  for n, source in enumerate(cells, 1)],
        "metadata": {"language_info": {"name": "python"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    return json.dumps(document).encode()


def settings(path: Path, select: Sequence[str] | None = None, ignore: Sequence[str] | None = None,
             extend_select: Sequence[str] | None = None) -> Settings:
    """The settings of ``gpudoctor lint`` for a notebook at ``path``, but the target is what
    runs here: this interpreter's version and platform are facts, not a guess from
    ``requires-python``. A bad configuration raises GpudoctorError, naming the file."""
    from gpudoctor.lint.inputs import build_settings
    from gpudoctor.lint.rules._registry import all_rules
    from gpudoctor.lint.selection import build_selection

    known = [rule.code for rule in all_rules()]
    # Checked first, so that a bad code is said to come from the magic's arguments.
    build_selection(known, known, select=select, extend_select=extend_select, ignore=ignore,
                    origin="the arguments of %gpudoctor lint")
    minor = sys.version_info.minor if sys.version_info.major == 3 else None
    args = argparse.Namespace(
        target_version=f"py3{minor}" if minor in _TARGETS else None,
        platform=sys.platform if sys.platform in _PLATFORMS else None,
        select=list(select) if select else None, extend_select=list(extend_select) if extend_select else None,
        ignore=list(ignore) if ignore else None)
    return build_settings(args, [str(path)])


def lint(cells: Sequence[str], config: Settings, path: Path) -> LintResult:
    """Lint the executed cells as one notebook (in this process: nothing is forked)."""
    from gpudoctor.lint.engine import lint_paths

    # Only the notebook is the project: nothing imports it, so no other file is context.
    return lint_paths([path], config, contents={path: as_notebook(cells)}, project_files=[path])


@dataclass(frozen=True)
class Initializing:
    """The executed cell that first initialized a framework, as the analysis reads it."""

    cell: int  # the execution count of the cell that ran the initialization
    init: FirstInit  # what did it, and where it is written (``init.site.cell``)


def initializing_cells(cells: Sequence[str], config: Settings, path: Path) -> dict[str, Initializing]:
    """For each framework the executed cells initialize, the cell that first did it.

    The call that initializes may be written in a function defined in one cell and run
    by a call in a later one: the cell that ran it is the first whose prefix of the
    history initializes the framework (a prefix's flow is the start of the whole
    one's), found by bisection from the cell where the call is written.
    """
    from gpudoctor.lint.initializations import first_inits

    memo: dict[int, dict[str, FirstInit]] = {}

    def inits(count: int) -> dict[str, FirstInit]:
        if count not in memo:
            memo[count] = {}
            for init in first_inits(path, config, {path: as_notebook(cells[:count])}):
                memo[count].setdefault(init.framework, init)
        return memo[count]

    found: dict[str, Initializing] = {}
    for framework, init in inits(len(cells)).items():
        low = init.site.cell or 1  # it cannot run before the cell that holds it
        high = len(cells)
        if framework in inits(low):  # the usual case: a call at the top of that cell
            high = low
        while low < high:
            middle = (low + high) // 2
            if framework in inits(middle):
                high = middle
            else:
                low = middle + 1
        found[framework] = Initializing(low, init)
    return found
