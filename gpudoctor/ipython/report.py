"""The words of ``%gpudoctor``: what this kernel holds, where it came from, what a fork does.

Plain text, short and concrete, as a notebook shows it: the runtimes with their evidence
and cell, the start method a ``Pool()`` would use, one verdict, the fix. The fix and the
runtimes' names are the probe's (gpudoctor/probe/explain.py); what each framework's
forked children do is the knowledge record's (``consequence``), as GD101 says it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpudoctor.ipython import cell_ledger as ledger_words
from gpudoctor.ipython import live_state
from gpudoctor.knowledge.registry import BY_NAME, DISPLAY

if TYPE_CHECKING:
    from gpudoctor.ipython.cell_ledger import Appearance, CellLedger
    from gpudoctor.ipython.executed_cells import Initializing
    from gpudoctor.lint.engine import LintResult
    from gpudoctor.lint.findings import Finding, Site

NOTEBOOK_WORKERS = (
    "In a notebook, a spawn or forkserver worker cannot be a function defined in a cell: the "
    "new interpreter never runs the notebook, so it fails with \"AttributeError: Can't get "
    "attribute ... on <module '__main__'>\". Define the worker in a .py module next to the "
    "notebook and import it.")


@dataclass(frozen=True)
class Origin:
    """Where a runtime came from: the execution count of its cell, and how that is known."""

    cell: int | None
    where: str  # "in cell [3]"
    evidence: str = ""  # more of what was seen, after the live evidence ("native threads 9 -> 41 ...")
    note: str | None = None  # a line of its own: how the cell was found


def origins(runtimes: Sequence[str], ledger: CellLedger,
            find_cells: Callable[[], Mapping[str, Initializing]]) -> dict[str, Origin]:
    """Say where each runtime came from: the ledger saw it appear, or the executed cells
    show which cell initialized it (read only when the ledger cannot tell)."""
    found: dict[str, Origin] = {}
    cells: Mapping[str, Initializing] | None = None
    for runtime in runtimes:
        seen = ledger.seen.get(runtime)
        if seen is not None and seen.how != ledger_words.BEFORE_LOAD:
            found[runtime] = _watched(seen)
            continue
        if cells is None:
            cells = find_cells()
        found[runtime] = _read(runtime, cells, ledger.loaded_at)
    return found


def _cell(count: int | None) -> str:
    return f"cell [{count}]" if count is not None else "a cell with no execution count"


def _watched(seen: Appearance) -> Origin:
    if seen.how == ledger_words.BETWEEN_CELLS:
        return Origin(None, f"while no cell was running, before {_cell(seen.cell)} ended",
                      note="(a thread or a callback of the program's, not a cell's code)")
    threads = ""
    if seen.threads_before is not None and seen.threads_after is not None \
            and seen.threads_before != seen.threads_after:
        threads = f"native threads {seen.threads_before} -> {seen.threads_after} in that cell"
    return Origin(seen.cell, f"in {_cell(seen.cell)}", threads)


def _read(runtime: str, cells: Mapping[str, Initializing], loaded_at: int | None) -> Origin:
    """The cell the executed cells show initializing the runtime's framework (for the
    CUDA driver, whichever framework initialized first)."""
    framework = live_state.framework_of(runtime)
    if framework is not None:
        found = cells.get(framework)
    else:
        found = min(cells.values(), key=lambda c: c.cell, default=None)
    before = f"before gpudoctor was loaded (cell [{loaded_at}])" if loaded_at else "before gpudoctor was loaded"
    if found is None:
        return Origin(None, before, note="no executed cell shows how: a call gpudoctor cannot follow "
                                         "(inside a library, say)")
    written = found.init.site.cell
    where = f", written in cell [{written}]" if written is not None and written != found.cell else ""
    return Origin(found.cell, f"in cell [{found.cell}]",
                  note=f"{before}; the executed cells show it: {found.init.api} in cell [{found.cell}]{where}")


def _names(runtimes: Sequence[str]) -> str:
    from gpudoctor.probe.explain import runtime_names

    return runtime_names(runtimes)


def kernel_report(state: live_state.LiveState, found: Mapping[str, Origin], threads_at_load: int | None) -> str:
    """The whole ``%gpudoctor`` text."""
    version = ".".join(map(str, sys.version_info[:3]))
    lines = [f"gpudoctor: this kernel (pid {state.pid}, Python {version}, {sys.platform})"]
    if state.runtimes:
        lines.append("GPU runtimes initialized now:")
        for runtime in state.runtimes:
            origin = found.get(runtime, Origin(None, "(where is unknown)"))
            seen = "; ".join(filter(None, [live_state.evidence(runtime), origin.evidence]))
            name = _names([runtime])
            lines.append(f"  {name[:1].upper()}{name[1:]}: initialized {origin.where} ({seen})")
            if origin.note:
                lines.append(f"      {origin.note}")
    else:
        lines.append("GPU runtimes initialized now: none")
    idle = [DISPLAY.get(f, f) for f in state.imported
            if not any(live_state.framework_of(r) == f for r in state.runtimes)]
    if idle:
        lines.append(f"Imported, not initialized: {', '.join(idle)} (an import alone initializes nothing)")
    threads = f"{state.native_threads}" if state.native_threads is not None else "unknown"
    if threads_at_load is not None and state.native_threads is not None:
        threads += f" ({threads_at_load} when gpudoctor was loaded)"
    lines.append(f"Native threads: {threads}")
    how = "set by set_start_method" if state.method_chosen else f"the default on {sys.platform} for this Python"
    lines.append(f"A Pool() here would start its workers with: {state.start_method} ({how})")
    lines += verdict(state, found, idle)
    return "\n".join(lines) + "\n"


def verdict(state: live_state.LiveState, found: Mapping[str, Origin], idle: Sequence[str]) -> list[str]:
    """What a fork made now would do, and what to do about it."""
    from gpudoctor.hazards import FORK_AFTER_INIT

    if not state.runtimes:
        if state.start_method != "fork" or not idle:
            return ["Verdict: no GPU runtime is initialized in this kernel: a fork now copies none."]
        return [f"Verdict: a fork now copies no initialized GPU runtime, but {', '.join(idle)} "
                f"{'is' if len(idle) == 1 else 'are'} imported: the first call that initializes it (an op, "
                "a device query) makes every later fork unsafe. Start pools before it, or use the spawn "
                "start method with the worker in a .py module.",
                NOTEBOOK_WORKERS]
    frameworks = [r for r in state.runtimes if live_state.framework_of(r) is not None]
    named = _names(frameworks or state.runtimes)
    if state.start_method != "fork":
        return [f"Verdict: a Pool() here starts fresh interpreters ({state.start_method}): they inherit "
                f"nothing of {named}. Only an explicit fork (os.fork(), get_context(\"fork\")) would copy "
                "it, and that fork would be unsafe.",
                NOTEBOOK_WORKERS]
    lines = ["Verdict: a fork now is unsafe."]
    for runtime in frameworks or state.runtimes[:1]:
        framework = live_state.framework_of(runtime)
        origin = found.get(runtime)
        where = f" in cell [{origin.cell}]" if origin is not None and origin.cell is not None else ""
        if framework is not None:
            record = BY_NAME[framework]
            lines.append(f"{_names([runtime])} was initialized{where}: a forked worker that uses "
                         f"{record.display} will {record.consequence}.")
        else:
            lines.append(f"The CUDA driver was initialized{where}: a forked worker that uses CUDA will fail, "
                         "since the driver's state does not survive fork.")
    lines.append(FORK_AFTER_INIT.notebook_fix_line)
    return lines


def _at(site: Site) -> str:
    if site.cell is not None:
        return f"cell [{site.cell}] line {site.row}"
    return f"{site.path}:{site.row}"


def finding_lines(finding: Finding, indent: str = "") -> list[str]:
    """One finding: where, code, message; then its related places and the fix hint."""
    lines = [f"{indent}{_at(finding.site)}: {finding.code} [{finding.severity}] {finding.message}"]
    if finding.reached is not None:
        lines.append(f"{indent}    reached by the {finding.reached.message} at {_at(finding.reached.site)}")
    lines += [f"{indent}    {_at(related.site)}: {related.message}" for related in finding.related]
    if finding.fix_hint:
        lines.append(f"{indent}    help: {finding.fix_hint}")
    return lines


def lint_report(result: LintResult, cells: int) -> str:
    """The text of ``%gpudoctor lint``."""
    lines = [line for finding in result.findings for line in finding_lines(finding)]
    what = f"{cells} executed cell{'s' if cells != 1 else ''}, read in the order the kernel ran them"
    count = len(result.findings)
    if count:
        lines.append(f"Found {count} finding{'s' if count != 1 else ''} in the {what}.")
    elif not result.internal_errors:
        lines.append(f"No findings in the {what}.")
    lines += [f"gpudoctor: warning: {message}" for message in result.warnings]
    lines += [f"gpudoctor: error: {message}" for message in result.internal_errors]
    return "\n".join(lines) + "\n"


def cell_warning(findings: Sequence[Finding], cell: int) -> str:
    """What the check before cell ``cell`` prints: what the linter finds once the cell
    follows the executed ones, and did not find before."""
    lines = ["gpudoctor: before this cell runs:"]
    for finding in findings:
        lines += finding_lines(finding, "  ")
        if finding.site.cell != cell:
            lines.append(f"      (reached from this cell, [{cell}]: it runs that code after what ran before it)")
    lines.append("  (%gpudoctor explains this kernel; %unload_ext gpudoctor stops these checks)")
    return "\n".join(lines) + "\n"
