"""The README's examples and tables say what gpudoctor does."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from gpudoctor.cli import build_parser, main

README = Path(__file__).resolve().parents[1] / "README.md"

# Documented with the options while its code lands separately; compared as any other option
# once the parser has it.
def _section(heading: str) -> str:
    text = README.read_text()
    start = text.index(f"\n{heading}\n")
    end = text.find("\n#", start + len(heading) + 2)
    return text[start:end if end != -1 else None]


def _probe_parser() -> argparse.ArgumentParser:
    subcommands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return subcommands.choices["probe"]


def test_the_probe_options_table_lists_exactly_the_probe_options() -> None:
    rows = [line for line in _section("### The probe's options").splitlines() if line.startswith("| `")]
    documented = {re.match(r"\| `(-[-\w]+)", row).group(1) for row in rows}  # type: ignore[union-attr]
    real = {option for action in _probe_parser()._actions for option in action.option_strings
            if option not in ("-h", "--help")}
    assert documented - real == set(), f"in the README, not in gpudoctor probe: {documented - real}"
    assert real - documented == set(), f"options of gpudoctor probe missing from the README: {real - documented}"


def test_the_readme_hang_example_is_what_the_linter_flags(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    section = _section("## What the probe says")
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    assert code.count("\n") <= 15, "the example stays short"
    (tmp_path / "hang.py").write_text(code)
    monkeypatch.chdir(tmp_path)
    assert main(["lint", "--no-cache", "hang.py"]) == 1
    assert capsys.readouterr().out.startswith("hang.py:12:10: GD101 the Pool forks its worker processes after "
                                              "TensorFlow initialized")
