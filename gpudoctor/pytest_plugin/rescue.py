"""End the session cleanly when a hang_timeout test's main thread never comes back.

The watcher interrupts a test that outlives its ``hang_timeout`` with a signal, but
Python runs signal handlers only between bytecodes of the main thread: a main thread
blocked in native code (a C lock, a driver call, a foreign library's wait) never sees
it. Left alone, the session would hang; killed from outside, it would end without a
summary, without a JUnit report, and with the explanation lost in the capture.

So while a ``hang_timeout`` test runs, a rescue thread of the plugin waits on a pipe
(blocked in a read: it holds no lock and the GIL is free). When the watcher has given
the interrupt its time, it writes to the pipe; the thread then does what pytest would
have done had the test returned: it takes the captured output, reports the call as
failed with the hang's diagnosis, stops the session with its summary (the tests after
it are not run: the main thread cannot run them) and exits the process. The main
thread, should it come back meanwhile, is held where it stands.

A thread in the test process makes its forks forks with threads, which Python 3.12+
warns about. The rescue thread holds nothing a forked child could miss, so that
warning is silenced when this thread is the only other one (see ``instrument``), and
``fork_safe(threads=True)`` does not count it.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from typing import Any

import pytest

_ACTIVE: list[Rescue] = []  # the rescue thread of the test now running, in this process


class Rescue:
    """The rescue thread of one test's call."""

    def __init__(self, pipe: tuple[int, int], on_stuck: Callable[[], None]) -> None:
        self.read_fd, self.write_fd = pipe  # the watcher holds a copy of the write end
        self.on_stuck = on_stuck
        self.started = False
        self.rescuing = threading.Event()
        self.owner = os.getpid()
        self.thread = threading.Thread(target=self._wait, name="gpudoctor-hang-rescue", daemon=True)

    def start(self) -> None:
        self.thread.start()
        self.started = True
        _ACTIVE.append(self)

    def _wait(self) -> None:
        try:
            word = os.read(self.read_fd, 1)
        except OSError:
            return
        if word == b"S":
            self.rescuing.set()
            self.on_stuck()

    def stop(self) -> None:
        """The call returned: let the thread end (it does nothing more)."""
        if self in _ACTIVE:
            _ACTIVE.remove(self)
        if self.started and not self.rescuing.is_set():
            os.write(self.write_fd, b"E")
            self.thread.join()
        self.hold_if_rescuing()  # the rescue began as the call returned: it ends the process

    def hold_if_rescuing(self) -> None:
        """In the main thread: never return once the rescue has begun (it ends the process)."""
        if self.rescuing.is_set():
            threading.Event().wait()


def active_threads() -> int:
    """Return how many rescue threads of this process are running (0 in a forked child)."""
    return sum(1 for r in _ACTIVE if r.owner == os.getpid() and r.thread.is_alive())


def end_session(item: pytest.Item, report_call: Callable[[], Any], reason: str) -> None:
    """From the rescue thread: report ``item``'s call as failed, end the session, exit.

    ``report_call`` makes the call's report (the plugin's hooks judge it as usual).
    """
    config = item.config
    session = item.session
    status = 1
    try:
        capman = config.pluginmanager.getplugin("capturemanager")
        if capman is not None:
            capman.deactivate_fixture()
            capman.suspend_global_capture(in_=False)
            out, err = capman.read_global_capture()
            item.add_report_section("call", "stdout", out)
            item.add_report_section("call", "stderr", err)
        report = report_call()
        item.ihook.pytest_runtest_logreport(report=report)
        item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
        session.shouldfail = reason
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        config.hook.pytest_sessionfinish(session=session, exitstatus=session.exitstatus)
        status = int(session.exitstatus)
        config._ensure_unconfigure()
    except BaseException as error:  # the process ends below whatever happened here
        print(f"gpudoctor: while ending the session after a stuck test: {error!r}", file=sys.stderr)
    finally:
        for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
            try:
                if stream is not None:
                    stream.flush()
            except Exception:
                pass
        os._exit(status)
