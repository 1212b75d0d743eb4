"""The same code gives the same findings on every run.

Sets of abstract values iterate in an order that follows their members' hashes, which
change from process to process (string hashing is seeded per process); a finding that
depended on that order came and went between runs of the same command."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def _lint(seed: str) -> str:
    env = {**os.environ, "PYTHONHASHSEED": seed}
    done = subprocess.run(
        [sys.executable, "-m", "gpudoctor", "lint", "--no-cache", "--exit-zero", "--jobs", "1",
         "--output-format", "json", str(FIXTURES)],
        capture_output=True, text=True, env=env, check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_findings_do_not_depend_on_the_hash_seed() -> None:
    first = _lint("1")
    assert '"code"' in first  # the fixtures have findings
    for seed in ("2", "3", "4"):
        assert _lint(seed) == first, f"PYTHONHASHSEED={seed} gave other findings than PYTHONHASHSEED=1"
