"""Where a program first initializes each GPU framework, as the analysis reads it.

The rules see a program's GPU initializations only inside its flows (GD101 shows the
first one as a related location of a fork). A tool that already knows a framework *is*
initialized (IPython's extension sees it live in its kernel) asks the other question:
where in the code did that happen? This answers it from the same analysis, without
running anything: the program's top level, in order, and the functions it calls.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from gpudoctor.knowledge.registry import DISPLAY
from gpudoctor.lint.findings import Site

if TYPE_CHECKING:
    from gpudoctor.lint.notebook import Notebook
    from gpudoctor.lint.settings import Settings


@dataclass(frozen=True)
class FirstInit:
    """The first initialization of one framework at one level, where the program made it."""

    framework: str  # the knowledge record's name ("tensorflow")
    display: str  # what messages call it ("TensorFlow")
    level: str  # "driver" (cuInit ran) or "runtime" (its context, allocator, thread pools)
    api: str  # the qualified name of the call that did it
    site: Site  # in a notebook: ``cell`` and the row in that cell


def first_inits(path: Path, settings: Settings, contents: dict[Path, bytes] | None = None
                ) -> tuple[FirstInit, ...]:
    """Return the GPU initializations of ``path`` run as a script, first one first.

    ``contents`` gives the bytes of files instead of those on disk (a notebook made of
    a kernel's history). A file that cannot be read or parsed initializes nothing that
    can be seen: the answer is empty (``gpudoctor lint`` reports it as GD000).
    """
    from gpudoctor.lint import notebook
    from gpudoctor.lint.analysis.analyzer import Analyzer
    from gpudoctor.lint.analysis.events import Init
    from gpudoctor.lint.analysis.flows import FlowBuilder
    from gpudoctor.lint.analysis.project import Project
    from gpudoctor.lint.frontend.parsed import concrete
    from gpudoctor.lint.frontend.reading import ParseFailure
    from gpudoctor.lint.nesting import headroom

    project = Project(settings.project_root, None, contents)
    real = project.real(path)
    with headroom(project.limits.max_nesting):
        analyzer = Analyzer(project, frozenset({real}))
        state = analyzer.module(real)
        if isinstance(state, ParseFailure):
            return ()
        flow = FlowBuilder(analyzer, settings.target).module_flow(state)
    replayed = flow.entry
    for event in flow.events:
        replayed = replayed.apply(event)
    cells = None
    if notebook.is_notebook(path) and isinstance(data := project.data(real), bytes):
        try:
            cells = notebook.read(data)
        except notebook.NotANotebook:
            cells = None
    found = []
    for event in replayed.inits:
        init = event.effect
        assert isinstance(init, Init)
        site = concrete(init.site)
        if cells is not None and site.path == str(real):
            site = _in_cell(site, cells)
        found.append(FirstInit(init.framework, DISPLAY.get(init.framework, init.framework), init.level,
                               init.api, site))
    return tuple(found)


def _in_cell(site: Site, program: Notebook) -> Site:
    """The site with its rows counted in its notebook cell (as findings are reported)."""
    where = program.locate(site.row)
    if where is None:
        return site
    cell, row = where
    return Site(site.path, row, site.col, row + site.end_row - site.row, site.end_col, cell)
