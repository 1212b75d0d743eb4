"""Cooperate with pytest-timeout: a test marked ``hang_timeout`` gets one timer, gpudoctor's.

pytest-timeout lets another plugin take over a test's timer through its
``pytest_timeout_set_timer``/``pytest_timeout_cancel_timer`` hooks. For a test with
``hang_timeout``, gpudoctor takes it (no SIGALRM is set) and keeps pytest-timeout's
deadline when that one is shorter; every other test keeps pytest-timeout's own timer.
Registered only when pytest-timeout is installed, whose hook specifications these are.
"""

from __future__ import annotations

from typing import Any

import pytest

from gpudoctor.pytest_plugin.markers import HANG_TIMEOUT

OUTER_TIMEOUT = pytest.StashKey[float]()


@pytest.hookimpl(tryfirst=True)
def pytest_timeout_set_timer(item: pytest.Item, settings: Any) -> bool | None:
    """Take over the timer of a test marked hang_timeout; leave the others alone."""
    if item.get_closest_marker(HANG_TIMEOUT) is None:
        return None
    timeout = getattr(settings, "timeout", None)
    if timeout:
        item.stash[OUTER_TIMEOUT] = float(timeout)
    return True


@pytest.hookimpl(tryfirst=True)
def pytest_timeout_cancel_timer(item: pytest.Item) -> bool | None:
    """There is no timer to cancel for a test whose timer gpudoctor took over."""
    return True if item.get_closest_marker(HANG_TIMEOUT) is not None else None
