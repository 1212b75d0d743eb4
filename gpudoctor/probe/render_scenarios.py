"""Show scenario runs: a progress line before and after each variant, then the results.

The progress lines go to stderr through the live view (``live_view``), which also shows
the running variant's processes on a terminal; the results go to stdout.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from gpudoctor.printable import printable
from gpudoctor.probe.scenario_run import VariantResult
from gpudoctor.probe.scenarios import Scenario

if TYPE_CHECKING:
    from rich.console import Console

STYLES = {"ok": "green", "hung": "red", "crashed": "red", "oom": "red", "error": "yellow",
          "skipped": "dim"}

def before_line(place: str, scenario: Scenario, variant: str, timeout: float) -> str:
    """The progress line before a variant starts: which, what it does, its deadline."""
    return f"{place} {scenario.name} {variant}: {scenario.describe(variant)} (timeout {timeout:g} s)"


def after_line(place: str, result: VariantResult) -> str:
    """The progress line after a variant: its status, how long, whether it was expected."""
    expected = {True: ", as expected", False: ", not as expected", None: ""}[result.as_expected]
    return (f"{place} {result.scenario.name} {result.variant}: {result.status} "
            f"({result.duration_s:.1f} s{expected})")


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
            console.print(f"{head}[dim]skipped: {escape(printable(first.reason))}[/]")
            continue
        unsafe, safe = variants.get("unsafe"), variants.get("safe")
        console.print(f"{head}unsafe {_pad(_cell(unsafe), 26)} safe {_cell(safe)}")
    for result in results:
        if result.status == "skipped":
            continue
        style = STYLES.get(result.status, "bold")
        console.print()
        console.print(f"[bold]{result.scenario.name}[/] {result.variant}: "
                      f"[{style}]{result.status}[/] — {escape(printable(result.reason))}")
        if result.status == "ok":
            continue  # the reason said it all
        for line in result.explanation.splitlines()[1:]:
            console.print(f"  {escape(printable(line))}")
