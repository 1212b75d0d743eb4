"""Running ``gpudoctor lint`` in the test's own process, as the bad-input tests do."""

from __future__ import annotations

import pytest

from gpudoctor.cli import main

FINDING = ":10:10: GD101 "  # where test_cli.BAD's one finding is


def lint_main(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``gpudoctor lint --no-cache ARGV``: its exit code, stdout and stderr, with no traceback."""
    code = main(["lint", "--no-cache", *argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err
