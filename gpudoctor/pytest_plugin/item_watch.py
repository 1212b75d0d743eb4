"""Everything the plugin does around one test's call, and what it recorded there.

Created by the call hook for a marked test, or earlier by the ``gpu_monitor``
fixture (whose sampling then starts at the fixture's setup). The call's record is
judged later, in ``pytest_runtest_makereport``.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from gpudoctor.probe import events, launch, watchdog
from gpudoctor.probe.bootstrap.sitecustomize import own_ticks
from gpudoctor.pytest_plugin.instrument import instrumented
from gpudoctor.pytest_plugin.interrupt import interruptible
from gpudoctor.pytest_plugin.markers import Plan
from gpudoctor.pytest_plugin.pools import terminate_pools
from gpudoctor.pytest_plugin.rescue import Rescue, end_session
from gpudoctor.pytest_plugin.watch_client import WatcherClient, WatcherError
from gpudoctor.pytest_plugin.watch_protocol import Arm, Final, Readings


# pytest's public name for its Failed outcome is an attribute of ``fail``, which mypy cannot
# follow in a base class.
class HangExpired(pytest.fail.Exception):  # type: ignore[misc,name-defined]
    """Raised in the test's main thread when its hang_timeout passes.

    A pytest outcome, not an Exception: a test's ``except Exception`` does not swallow it.
    """


@dataclass(frozen=True)
class CallRecord:
    """What one test's call left behind for the checks."""

    plan: Plan
    root: int
    since: float  # monotonic time the call started
    events: list[dict[str, Any]]
    final: Final | None  # the watcher's last answer; None without a watcher
    watcher_error: str | None
    interrupted: bool
    stopped_pools: tuple[int, ...] = field(default=())
    stuck: bool = False  # the main thread never came back: the rescue thread failed the test


class ItemWatch:
    """The watcher, the watchdog, the instrumentation and the interrupt of one test."""

    def __init__(self, interval: float) -> None:
        root = Path(tempfile.mkdtemp(prefix="gpudoctor-test-")).resolve()
        self.workdir = launch.Workdir(root)
        self.token = secrets.token_hex(8)
        self.interval = interval
        self.client: WatcherClient | None = None
        self.error: str | None = None
        self.gpu = False
        self.record: CallRecord | None = None
        self.watchdog: subprocess.Popen[bytes] | None = None
        self.rescue_pipe: tuple[int, int] | None = None

    def start_watcher(self, gpu: bool) -> None:
        """Start the watcher unless it runs already (the first caller decides about NVML)."""
        if self.client is not None or self.error is not None:
            return
        self.gpu = gpu
        self.rescue_pipe = os.pipe()
        try:
            self.client = WatcherClient(self.workdir, self.token, gpu, self.interval, self.rescue_pipe[1])
        except WatcherError as error:
            self.error = str(error)

    @property
    def nvml_reason(self) -> str | None:
        """Return why GPU memory is not measured, or None when it is."""
        if self.error is not None:
            return self.error
        if self.client is None or not self.gpu:
            return "GPU memory was not sampled"
        reason = self.client.ready.get("nvml")
        return reason if isinstance(reason, str) else None

    def sample(self) -> Readings | None:
        """Return every GPU reading so far, taking one now if the watcher still runs."""
        if self.client is None:
            return None
        if self.client.final is not None:
            return self.client.final
        try:
            return self.client.sample()
        except WatcherError as error:
            self.error = str(error)
            return None

    @contextmanager
    def call(self, plan: Plan, item: pytest.Item | None = None) -> Iterator[None]:
        """Watch the test's call as ``plan`` asks, then record what happened."""
        expired: list[bool] = []
        rescue: list[Rescue] = []

        def raise_expired() -> None:
            if rescue:
                rescue[0].hold_if_rescuing()
            expired.append(True)
            assert plan.hang is not None
            raise HangExpired(f"hang_timeout: still running after {plan.hang.seconds:g} s", pytrace=False)

        with ExitStack() as stack:
            interrupt = stack.enter_context(interruptible(raise_expired)) if plan.hang else None
            dump_fd = stack.enter_context(instrumented(self.workdir, self.token)) \
                if plan.needs_instrumentation else -1
            start_epoch, since = time.time(), time.monotonic()
            if plan.hang is not None and item is not None:
                self._start_watchdog()
                if self.rescue_pipe is not None and threading.current_thread() is threading.main_thread():
                    rescue.append(Rescue(self.rescue_pipe, lambda: self._rescue(item, plan, since, start_epoch)))
                    rescue[0].start()
            self._begin(plan, dump_fd, start_epoch)
            try:
                yield
            finally:
                try:
                    if interrupt is not None:
                        interrupt.disarm()
                    if rescue:
                        rescue[0].stop()
                finally:  # even when the interrupt landed just as the test returned
                    self._end(plan, since, start_epoch, bool(expired))

    def _start_watchdog(self) -> None:
        """Start the process that ends the test's tree should pytest die during the test."""
        if self.watchdog is not None or self.client is None:
            return
        ticks, watcher_ticks = own_ticks(), watchdog.start_ticks(self.client.process.pid)
        if ticks is None or watcher_ticks is None:  # no /proc: nothing to tell processes apart by
            return
        self.watchdog = launch.start_watchdog(
            self.token, 1.0, self.workdir.members, events=self.workdir.events, parent=(os.getpid(), ticks),
            also=((self.client.process.pid, watcher_ticks),), remove=self.workdir.root)

    def _stop_watchdog(self) -> None:
        if self.watchdog is not None:
            launch.stop_watchdog(self.watchdog, done=True)
            self.watchdog = None

    def _rescue(self, item: pytest.Item, plan: Plan, since: float, start_epoch: float) -> None:
        """In the rescue thread: the main thread is stuck; fail the test and end the session."""
        assert plan.hang is not None
        self._end(plan, since, start_epoch, True, stuck=True)
        message = f"hang_timeout: still running after {plan.hang.seconds:g} s"

        def fail() -> None:
            raise HangExpired(message, pytrace=False)

        def report_call() -> Any:
            return item.ihook.pytest_runtest_makereport(item=item, call=pytest.CallInfo.from_call(fail, "call"))

        end_session(item, report_call, f"gpudoctor: {item.nodeid} stayed blocked in native code after its "
                                      "hang_timeout; the tests after it were not run")

    def _begin(self, plan: Plan, dump_fd: int, start_epoch: float) -> None:
        if self.client is None:
            return
        try:
            if plan.hang is not None:
                arm: Arm = {"cmd": "arm", "seconds": plan.hang.seconds, "hang_after": plan.hang.stall_threshold,
                            "native_stacks": plan.hang.native_stacks, "dump_fd": dump_fd,
                            "start_epoch": start_epoch,
                            "exclude": [self.watchdog.pid] if self.watchdog is not None else []}
                self.client.request(arm)
            if self.gpu:
                self.client.request({"cmd": "sample"})  # the baseline of the leak check
        except WatcherError as error:
            self.error = str(error)

    def _end(self, plan: Plan, since: float, start_epoch: float, interrupted: bool, stuck: bool = False) -> None:
        if self.record is not None:  # the rescue thread recorded the call already
            return
        recorded = events.read(self.workdir.events, start_epoch)
        stopped: list[int] = []
        if interrupted and not stuck:  # stuck: the watcher killed the workers, a pool can no longer stop
            born = {e["pid"] for e in recorded if e.get("event") in ("fork-child", "start")}
            stopped = terminate_pools(born)
        final = None
        if self.client is not None:
            try:
                final = self.client.finish()
            except WatcherError as error:
                self.error = str(error)
        self._stop_watchdog()
        self.record = CallRecord(plan, os.getpid(), since, recorded, final, self.error, interrupted,
                                 tuple(stopped), stuck)

    def close(self) -> None:
        """Stop the watcher and the watchdog if they still run and delete the scratch directory."""
        if self.client is not None and self.client.final is None:
            self.client.close()
        self._stop_watchdog()
        for fd in self.rescue_pipe or ():
            os.close(fd)
        self.rescue_pipe = None
        shutil.rmtree(self.workdir.root, ignore_errors=True)
