"""Cooperate with pytest-timeout: a test with a hang deadline gets one timer, gpudoctor's.

pytest-timeout lets another plugin take over a test's timer through its
``pytest_timeout_set_timer``/``pytest_timeout_cancel_timer`` hooks. For a test with a
gpudoctor hang deadline (its ``hang_timeout`` marker, or ``--gpudoctor-hang-timeout``
for the run), gpudoctor takes it and keeps pytest-timeout's deadline when that one is
shorter. One timer, because two would fight: pytest-timeout's SIGALRM would end the
call without the diagnosis, and its thread method would kill the whole session and make
every fork of the test a fork with threads. gpudoctor's deadline covers the test's call;
such a test's fixtures are not timed. Every other test (``hang_timeout(0)``, or no
deadline from gpudoctor) keeps pytest-timeout's own timer.
Registered only when pytest-timeout is installed, whose hook specifications these are.
"""

from __future__ import annotations

from typing import Any

import pytest

from gpudoctor.pytest_plugin.markers import MarkerError
from gpudoctor.pytest_plugin.suite_options import item_plan

OUTER_TIMEOUT = pytest.StashKey[float]()


def _has_deadline(item: pytest.Item) -> bool:
    try:
        plan = item_plan(item)
    except MarkerError:  # the test errors at its setup, saying why; pytest-timeout keeps its timer
        return False
    return plan is not None and plan.hang is not None


@pytest.hookimpl(tryfirst=True)
def pytest_timeout_set_timer(item: pytest.Item, settings: Any) -> bool | None:
    """Take over the timer of a test with a hang deadline; leave the others alone."""
    if not _has_deadline(item):
        return None
    timeout = getattr(settings, "timeout", None)
    if timeout:
        item.stash[OUTER_TIMEOUT] = float(timeout)
    return True


@pytest.hookimpl(tryfirst=True)
def pytest_timeout_cancel_timer(item: pytest.Item) -> bool | None:
    """There is no timer to cancel for a test whose timer gpudoctor took over."""
    return True if _has_deadline(item) else None
