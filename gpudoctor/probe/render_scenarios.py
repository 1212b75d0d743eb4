"""Show scenario runs on a terminal: live progress while they run, then the results.

With a terminal, progress is a rich spinner and bar that disappears when done;
piped, each finished variant is one plain line, so logs of CI runs stay readable.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

from gpudoctor.probe.scenario_run import VariantResult
from gpudoctor.probe.scenarios import Scenario

if TYPE_CHECKING:
    from rich.console import Console

STYLES = {"ok": "green", "hung": "red", "crashed": "red", "oom": "red", "error": "yellow",
          "skipped": "dim"}

# Told before a variant starts and after it ends.
Started = Callable[[Scenario, str], None]
Finished = Callable[[VariantResult], None]


@contextmanager
def progress(console: Console | None, total: int) -> Iterator[tuple[Started, Finished]]:
    """Yield (started, finished) callbacks that show the run's progress on ``console``."""
    if console is None:
        yield (lambda scenario, variant: None), (lambda result: None)
        return
    if not console.is_terminal:
        done = [0]

        def line(result: VariantResult) -> None:
            done[0] += 1
            console.print(f"  [{done[0]}/{total}] {result.scenario.name} {result.variant}: "
                          f"{result.status} ({result.duration_s:.1f} s)", highlight=False)

        yield (lambda scenario, variant: None), line
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    with Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                  MofNCompleteColumn(), TimeElapsedColumn(), console=console,
                  transient=True) as bar:
        task = bar.add_task("scenarios", total=total)

        def started(scenario: Scenario, variant: str) -> None:
            bar.update(task, description=f"{scenario.name} [bold]{variant}[/]")

        def finished(result: VariantResult) -> None:
            bar.advance(task)

        yield started, finished


def _cell(result: VariantResult | None) -> str:
    if result is None:
        return ""
    style = STYLES.get(result.status, "bold")
    text = f"[{style}]{result.status}[/]"
    if result.status != "skipped":
        text += f" {result.duration_s:.1f} s"
    if result.as_expected is False:
        text += " [yellow](unexpected)[/]"
    return text


def _pad(markup: str, width: int) -> str:
    """Pad rich markup to ``width`` visible characters."""
    from rich.text import Text

    return markup + " " * max(0, width - len(Text.from_markup(markup).plain))


def render(results: Sequence[VariantResult], console: Console) -> None:
    """Print a line per scenario, then each variant that ran, explained unless it was ok."""
    from rich.markup import escape

    by_name: dict[str, dict[str, VariantResult]] = {}
    for result in results:
        by_name.setdefault(result.scenario.name, {})[result.variant] = result
    console.print("[bold]Scenarios[/] (each variant runs in a sandbox; unsafe shows the failure, "
                  "safe its fix)")
    width = max((len(name) for name in by_name), default=0)
    for name, variants in by_name.items():
        first = next(iter(variants.values()))
        head = f"  {name.ljust(width)}  {first.scenario.rule}  "
        if first.status == "skipped":
            console.print(f"{head}[dim]skipped: {escape(first.reason)}[/]")
            continue
        unsafe, safe = variants.get("unsafe"), variants.get("safe")
        console.print(f"{head}unsafe {_pad(_cell(unsafe), 26)} safe {_cell(safe)}")
    for result in results:
        if result.status == "skipped":
            continue
        style = STYLES.get(result.status, "bold")
        console.print()
        console.print(f"[bold]{result.scenario.name}[/] {result.variant}: "
                      f"[{style}]{result.status}[/] — {escape(result.reason)}")
        if result.status == "ok":
            continue  # the reason said it all
        for line in result.explanation.splitlines()[1:]:
            console.print(f"  {escape(line)}")
