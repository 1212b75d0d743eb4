"""The analysis's budgets: how far it follows code before what lies further is unknown.

Each bounds work that real code keeps small but some valid code makes endless (an import
graph, a recursion, a string doubled at every call). Past a budget the analysis does not
guess: what it did not follow is unknown, and unknown code is assumed to have no effect, so
a budget that trips loses findings (or leaves an advisory where an error would have been);
two of them (``max_kept_walks``, ``elide_min_chars``) cost time only. Each field says what
is lost when it trips.

One ``Limits`` is made per run (``DEFAULT_LIMITS`` unless a test passes another to
``lint_paths`` or ``Project``), travels with the ``Project`` to every part of the analysis
and is pickled to the worker processes. Why the defaults are what they are, with the
measurements behind them: docs/performance.md.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DEFAULT_LIMITS", "Limits"]


@dataclass(frozen=True)
class Limits:
    """The budgets of one run (see the module docstring)."""

    # -- nesting (nesting.py) ------------------------------------------------------
    # The meter of one linted file's analysis, in units of about one Python frame: a step
    # (expression, block, call, module walk) that would nest past it is not taken and what it
    # would have computed is unknown. Python's recursion limit is raised to cover it.
    max_nesting: int = 3_000
    # Module walks cut short by the meter that one analysis may make, nested ones included (a
    # walk cut short is made again for each request, not shared); also how deep walks nest.
    # Past it no module is walked from there: its names are unknown.
    max_cut_walks: int = 40

    # -- functions (analysis/analyzer.py) ----------------------------------------------------
    # Calls followed inside one another: a call deeper than this has no effects and an
    # unknown result.
    max_call_depth: int = 24
    # Summaries (one per function and argument values) one analysis computes: once there are
    # more, a call not summarized before has no effects and an unknown result.
    max_summaries: int = 20_000
    # Events kept of one call's summary, or of one module's import, after repeated inits are
    # dropped: later ones are lost.
    max_events: int = 400

    # -- imports (analysis/analyzer.py, frontend/project_gate.py) -------------------------------------
    # How many imports deep a module's top level is run at its import; a module further away
    # is imported without effects. The caller search of a per-file run looks this many imports
    # away for the files that use the named ones (callers.py).
    max_import_depth: int = 3
    # Source characters (what parsing costs) that the modules analysed for one linted file
    # besides itself may hold, or how many they may be: once either is reached no new module
    # is followed, and names taken from one are unknown.
    max_extra_chars: int = 300_000
    max_extra_modules: int = 150
    # Package ``__init__`` files a name handed on is followed through to the module that
    # defines it; deeper, it counts as the package's own name.
    hand_on_depth: int = 8
    # Imports away that a module mentioning nothing a rule reads may lead to one that does,
    # and still be walked; a longer relay is not followed.
    lead_depth: int = 2
    # How many imports away from a program (a notebook, a script with a main guard) that
    # uses a GPU framework the gate looks for a module that starts processes: a GUI or a
    # web UI reaches the module that forks through its tabs and handlers.
    program_reach: int = 4

    # -- processes (analysis/flows.py) -------------------------------------------------------
    # Child flows nest this deep (a child's child...): processes started deeper are not
    # followed, and what they do is unknown.
    max_child_depth: int = 3
    # Events of child flows one linted file's flows may replay: processes started after
    # that are not followed.
    max_child_events: int = 20_000

    # -- values (analysis/evaluator.py, frontend/literals.py) ---------------------------------------
    # Strings are followed only for the names rules read (start methods, environment
    # variables). A concatenation with more possible results than this, or a result longer
    # than ``max_string_chars``, is unknown.
    max_strings: int = 16
    max_string_chars: int = 1_000
    # The longest integer literal read as a number (rules read small ones: worker counts, a
    # pid compared with 0); a longer one is unknown. CPython will not even print an int past
    # 4,300 digits.
    max_integer_chars: int = 40

    # -- context of a per-file run (callers.py) ----------------------------------------------
    # Source characters of the files a run naming some files analyses for their context (the
    # files that use the named ones, nearest first). The rest is left out and the run warns:
    # findings those callers would cause in the named files are missing.
    max_context_chars: int = 1_000_000
    # Source the search for those files may read (CPython prescans); past it the search
    # stops as when the context is full.
    max_search_chars: int = 3_000_000

    # -- time only -----------------------------------------------------------------------------
    # Module walks kept for reuse by later linted files (analysis/shared_walks.py); past it the store
    # starts afresh. A walk made again is the same walk: this costs time, never findings.
    max_kept_walks: int = 2_000
    # A file this long or longer is parsed with its function bodies left out until the
    # analysis needs them (frontend/prescan.py); a shorter one is parsed whole. Same findings either
    # way (the fixture tests run both).
    elide_min_chars: int = 4_000


DEFAULT_LIMITS = Limits()
