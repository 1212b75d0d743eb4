"""The exit statuses of every gpudoctor command, named once.

Scripts, CI jobs and pre-commit read these numbers, so they are a contract: lint, the
probe and the command line all return them from here, never a bare number. The meaning
follows ruff's convention for lint and extends it to the probe: 1 means "gpudoctor found
something" in both (a finding, or a command the probe judged not ``ok``).
"""

from __future__ import annotations

EXIT_OK = 0
# Lint: at least one finding (unless --exit-zero); --diff: a fix to show; --add-noqa: a
# finding left without a noqa (it lists them). Probe: the
# supervised command was not ``ok``, or a scenario's safe variant failed.
EXIT_FINDINGS = 1
EXIT_PROBLEM = EXIT_FINDINGS
# A usage, configuration or internal error: a path that does not exist, a bad setting,
# a file gpudoctor could not analyse.
EXIT_ERROR = 2
# A signal stopped gpudoctor: the shell's convention, 128 + the signal's number.
_SIGNAL_BASE = 128
EXIT_INTERRUPTED = _SIGNAL_BASE + 2  # SIGINT (Ctrl-C)


def exit_for_signal(signum: int) -> int:
    """Return the status a shell reports for a process the signal ``signum`` ended
    (130 for SIGINT, 143 for SIGTERM)."""
    return _SIGNAL_BASE + signum
