"""Fault suite: the plugin leaves no process behind and always returns, with a verdict.

Each case runs an inner pytest for real (its own session, real signals) and then looks
for what is left of its tree two ways: by a token the inner pytest's environment carries
(forked and exec'd descendants inherit it), and by ancestry (this process is a child
subreaper while the inner pytest runs, so an orphan of its tree, even one that scrubbed
its environment, is reparented here instead of to init). Waits are on what is observed
(a file a process writes, an exit, an end of output), with generous deadlines.
"""

from __future__ import annotations

import os
import re
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

from gpudoctor.probe import reaper
from gpudoctor.probe.watchdog import carriers
from tests.conftest import INNER_RUN_OPTIONS
from tests.plugin.conftest import needs_tensorflow

FAULT_VAR = "GPUDOCTOR_FAULT_RUN"
GRACE = 10.0  # the plugin's grace after the interrupt before it ends a stuck session


class InnerPytest:
    """One inner pytest session in a session of its own, its output read to the end."""

    def __init__(self, directory: Path, args: list[str]) -> None:
        self.token = secrets.token_hex(8)
        env = dict(os.environ)
        env[FAULT_VAR] = self.token
        env.pop("PYTEST_ADDOPTS", None)
        self.started_epoch = time.time()
        self.started = time.monotonic()
        # A session of its own: the group can be killed as a CI runner cancels a job.
        self.process = subprocess.Popen(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *INNER_RUN_OPTIONS.split(), *args],
            cwd=directory, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
        self.directory = directory
        self._chunks: list[bytes] = []
        self.eof_at: float | None = None
        self.exit_at: float | None = None
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        while chunk := self.process.stdout.read1(65536):
            self._chunks.append(chunk)
        self.eof_at = time.monotonic()

    @property
    def output(self) -> str:
        return b"".join(self._chunks).decode(errors="replace")

    def wait_for(self, condition: Callable[[], bool], timeout: float, what: str) -> float:
        """Wait until ``condition`` holds; return the seconds since the start."""
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                pytest.fail(f"not seen within {timeout:g} s: {what}\n{self.output}")
            if self.process.poll() is not None and not condition():
                pytest.fail(f"the inner pytest exited ({self.process.returncode}) before {what}\n{self.output}")
            time.sleep(0.05)
        return time.monotonic() - self.started

    def wait_exit(self, timeout: float) -> int:
        """Wait for the inner pytest to exit; its exit code (-N: killed by signal N)."""
        try:
            code = self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the inner pytest did not return within {timeout:g} s\n{self.output}")
        self.exit_at = time.monotonic()
        return code

    def wait_eof(self, timeout: float) -> float:
        """Wait for the end of the inner pytest's output (``pytest | tail`` returns then)."""
        self._reader.join(timeout)
        assert self.eof_at is not None, (f"the inner pytest's stdout is still held open {timeout:g} s after "
                                         f"it exited (a leftover process has it): {self.leftovers()}")
        return self.eof_at - (self.exit_at or self.eof_at)

    def leftovers(self) -> set[int]:
        """Live processes of the inner run: by the token, and by ancestry."""
        marked = carriers(f"{FAULT_VAR}={self.token}".encode())
        try:
            ours = {p for p in psutil.Process().children(recursive=True)
                    if p.create_time() >= self.started_epoch - 1.0}
        except psutil.Error:
            ours = set()
        found = marked | {p.pid for p in ours}
        return {pid for pid in found if _alive(pid)}

    def wait_nothing_left(self, timeout: float) -> float:
        """Wait until no process of the run is left; return how long that took."""
        start = time.monotonic()
        deadline = start + timeout
        while self.leftovers() and time.monotonic() < deadline:
            _reap_adopted()
            time.sleep(0.05)
        left = {pid: _describe(pid) for pid in self.leftovers()}
        assert not left, f"left behind {timeout:g} s later: {left}\n{self.output}"
        return time.monotonic() - start

    def kill_everything(self) -> None:
        """Leave nothing on the machine, whatever the test found."""
        for _ in range(50):
            left = self.leftovers()
            if self.process.poll() is None:
                left.add(self.process.pid)
            if not left:
                break
            for pid in left:
                for signum in (signal.SIGSTOP, signal.SIGKILL):
                    try:
                        os.kill(pid, signum)
                    except OSError:
                        pass
            time.sleep(0.05)
            _reap_adopted()
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        _reap_adopted()
        self._reader.join(5)


def _alive(pid: int) -> bool:
    """Tell whether ``pid`` runs (a zombie is dead: it only waits to be reaped)."""
    try:
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False


def _describe(pid: int) -> str:
    try:
        return " ".join(psutil.Process(pid).cmdline())[:120]
    except psutil.Error:
        return "?"


def _reap_adopted() -> None:
    """Collect the orphans of the inner tree that died here (this process is their subreaper)."""
    try:
        children = psutil.Process().children()
    except psutil.Error:
        return
    for child in children:
        try:
            if child.status() == psutil.STATUS_ZOMBIE:
                os.waitpid(child.pid, os.WNOHANG)
        except (psutil.Error, ChildProcessError):
            continue


@pytest.fixture
def run_inner(pytester: pytest.Pytester) -> Iterator[Callable[..., InnerPytest]]:
    """Start inner pytest sessions; whatever happens, kill what they left."""
    was = reaper.is_subreaper()
    if reaper.become_subreaper() is not None:
        pytest.skip("needs a child subreaper (Linux) to find orphans by ancestry")
    started: list[InnerPytest] = []

    def run(*args: str) -> InnerPytest:
        inner = InnerPytest(pytester.path, list(args))
        started.append(inner)
        return inner

    try:
        yield run
    finally:
        for inner in started:
            inner.kill_everything()
        if not was:
            reaper.stop_being_subreaper()


def _pid_in(directory: Path, name: str) -> int:
    return int((directory / name).read_text())


# --- 3a: the tree is killed whole at the end of a hang ----------------------------------

ESCAPES = """\
import os
import signal
import subprocess
import sys
import time

import pytest

# A grandchild in a session of its own that ignores SIGTERM; its parent waits, or exits at
# once so that the grandchild is an orphan before any scan of the tree can see it.
GRANDCHILD = '''
import os, signal, sys, time
if os.fork() == 0:
    os.setsid()
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    with open(sys.argv[1] + ".tmp", "w") as f:
        f.write(str(os.getpid()))
    os.rename(sys.argv[1] + ".tmp", sys.argv[1])
    while True:
        time.sleep(1)
if sys.argv[2] == "exit":
    os._exit(0)
time.sleep(600)
'''


@pytest.mark.hang_timeout(2, native_stacks=False)
def test_forked_grandchild_escapes_at_once():
    middle = os.fork()
    if middle == 0:
        sys.argv = ["-", "escaped-fork", "exit"]
        exec(GRANDCHILD)
    os.waitpid(middle, 0)
    time.sleep(600)


@pytest.mark.hang_timeout(2, native_stacks=False)
def test_exec_grandchild_with_a_scrubbed_environment_escapes_when_its_parent_dies():
    subprocess.Popen([sys.executable, "-c", GRANDCHILD, "escaped-scrubbed", "wait"],
                     env={"PATH": os.environ.get("PATH", "")})
    time.sleep(600)


@pytest.mark.hang_timeout(2, native_stacks=False)
def test_exec_grandchild_escapes_at_once():
    subprocess.Popen([sys.executable, "-c", GRANDCHILD, "escaped-exec", "exit"]).wait()
    time.sleep(600)
"""


def test_escaped_grandchildren_that_ignore_sigterm_are_killed(
        pytester: pytest.Pytester, run_inner: Callable[..., InnerPytest]) -> None:
    pytester.makepyfile(test_escapes=ESCAPES)
    inner = run_inner("-q")
    code = inner.wait_exit(timeout=120)
    took = inner.exit_at - inner.started  # type: ignore[operator]
    output = inner.output
    assert code == 1, output
    assert output.count("hang_timeout: still running after 2 s") >= 3, output
    assert "3 failed" in output, output
    escaped = [_pid_in(pytester.path, name) for name in ("escaped-fork", "escaped-scrubbed", "escaped-exec")]
    # ``pytest | tail`` ends when pytest does: no leftover holds its output open.
    assert inner.wait_eof(timeout=10) < 5
    inner.wait_nothing_left(timeout=5)
    assert not [pid for pid in escaped if _alive(pid)]
    print(f"3 hung tests of 2 s returned in {took:.1f} s")


# --- 3b: pytest killed during a hang_timeout test ---------------------------------------

FREEZE = """\
import multiprocessing
import os
import subprocess
import sys
from pathlib import Path

import pytest
import tensorflow as tf


def work(i):
    Path(f"working-{os.getpid()}").touch()
    return float(tf.reduce_sum(tf.matmul(tf.ones((1000, 1000)), tf.ones((1000, 1000)))))


@pytest.mark.hang_timeout(120)
def test_frozen_pool():
    tf.matmul(tf.ones((1000, 1000)), tf.ones((1000, 1000)))
    # Out of pytest's process group, and deaf to SIGTERM: a kill of the group misses it.
    subprocess.Popen([sys.executable, "-c",
                      "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"],
                     start_new_session=True)
    multiprocessing.get_context("fork").Pool(2).map(work, range(4))
"""


@needs_tensorflow
@pytest.mark.parametrize(("signum", "whole_group"), [
    (signal.SIGKILL, True), (signal.SIGKILL, False), (signal.SIGTERM, True), (signal.SIGTERM, False)],
    ids=["SIGKILL-group", "SIGKILL-pytest", "SIGTERM-group", "SIGTERM-pytest"])
def test_pytest_killed_during_a_hang_leaves_nothing(
        pytester: pytest.Pytester, run_inner: Callable[..., InnerPytest], signum: int, whole_group: bool) -> None:
    pytester.makepyfile(test_freeze=FREEZE)
    inner = run_inner("-q")
    inner.wait_for(lambda: len(list(pytester.path.glob("working-*"))) >= 2, 120, "two pool workers at work")
    workers = [int(p.name.split("-")[1]) for p in pytester.path.glob("working-*")]
    assert len(inner.leftovers()) >= 5  # pytest, two workers, the setsid'd child, the watcher (+ watchdog)
    if whole_group:
        os.killpg(inner.process.pid, signum)
    else:
        os.kill(inner.process.pid, signum)
    assert inner.wait_exit(timeout=30) == -signum
    took = inner.wait_nothing_left(timeout=10)
    assert not [pid for pid in workers if _alive(pid)]
    print(f"nothing left {took:.1f} s after {signal.Signals(signum).name} of "
          f"{'the process group' if whole_group else 'pytest'}")


# --- 4: a test blocked in native code ---------------------------------------------------

NATIVE = """\
import ctypes
import subprocess
import sys

import pytest


def test_before():
    pass


@pytest.mark.hang_timeout(2, native_stacks=False)
def test_blocked_in_native_code():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    print("CHILD", child.pid)
    libc = ctypes.CDLL(None)
    mutex = ctypes.create_string_buffer(64)  # all zeros: a default pthread mutex
    libc.pthread_mutex_lock(mutex)
    libc.pthread_mutex_lock(mutex)  # locks it again: waits for ever, in C, deaf to signals


def test_after():
    pass
"""


def test_blocked_in_native_code_ends_the_session_with_a_summary(
        pytester: pytest.Pytester, run_inner: Callable[..., InnerPytest]) -> None:
    pytester.makepyfile(test_native=NATIVE)
    inner = run_inner("--junitxml=report.xml")  # pytest's default capture: no -s
    code = inner.wait_exit(timeout=2 + GRACE + 60)
    took = inner.exit_at - inner.started  # type: ignore[operator]
    output = inner.output
    assert code == 1, output
    lines = [
        "*_ test_blocked_in_native_code _*",
        "hang_timeout: still running after 2 s; *",
        "*- Captured stdout call -*",
        "CHILD *",
        "*- gpudoctor hang_timeout -*",
        "*main thread did not return*blocked in native code*",
        "*short test summary info*",
        "FAILED test_native.py::test_blocked_in_native_code - hang_timeout: still*",
        "!*gpudoctor*test_blocked_in_native_code*not run*!",
        "*1 failed, 1 passed*",
    ]
    pytester_lines = pytest.LineMatcher(output.splitlines())
    pytester_lines.fnmatch_lines(lines)
    child = int(re.search(r"^CHILD (\d+)", output, re.MULTILINE).group(1))  # type: ignore[union-attr]
    report = (pytester.path / "report.xml").read_text()
    assert 'name="test_blocked_in_native_code"' in report and "<failure" in report
    inner.wait_eof(timeout=10)
    inner.wait_nothing_left(timeout=5)
    assert not _alive(child)
    assert took < 2 + GRACE + 15, f"took {took:.1f} s\n{output}"
    print(f"a test stuck in native code: the session ended with its summary {took:.1f} s after it started")


# --- 5: idleness counts from when the tree went idle ------------------------------------

BUSY_THEN_FROZEN = """\
import multiprocessing
import time

import pytest
import tensorflow as tf


def work(i):
    return float(tf.reduce_sum(tf.matmul(tf.ones((1000, 1000)), tf.ones((1000, 1000)))))


@pytest.fixture
def an_op():
    tf.matmul(tf.ones((1000, 1000)), tf.ones((1000, 1000)))


@pytest.mark.hang_timeout(5)
def test_busy_then_frozen(an_op):
    # Busy for 3 s, as importing TensorFlow in the call is: at the deadline the workers
    # have waited only 2 s, less than the 2.5 s (half the deadline) that make them hung.
    end = time.monotonic() + 3
    while time.monotonic() < end:
        pass
    multiprocessing.get_context("fork").Pool(2).map(work, range(4))


@pytest.mark.hang_timeout(1)
def test_busy_loop():
    while True:
        pass
"""


@needs_tensorflow
def test_idleness_counts_from_when_the_tree_went_idle(
        pytester: pytest.Pytester, run_inner: Callable[..., InnerPytest]) -> None:
    pytester.makepyfile(test_busy=BUSY_THEN_FROZEN)
    inner = run_inner("--durations=3", "--durations-min=0")
    code = inner.wait_exit(timeout=240)
    output = inner.output
    assert code == 1, output
    matcher = pytest.LineMatcher(output.splitlines())
    matcher.fnmatch_lines([
        "*_ test_busy_then_frozen _*",
        "hang_timeout: still running after 5 s; * processes hung: pid *",
        "Hung: * processes waited with no CPU progress for at least 2.5 s: *",
        "*_ test_busy_loop _*",
        "hang_timeout: still running after 1 s; no process was waiting: the test was still busy (slow, or looping)",
    ])
    frozen = float(re.search(r"^([0-9.]+)s call +\S+::test_busy_then_frozen$", output, re.MULTILINE).group(1))  # type: ignore[union-attr]
    busy = float(re.search(r"^([0-9.]+)s call +\S+::test_busy_loop$", output, re.MULTILINE).group(1))  # type: ignore[union-attr]
    # The deadline, then at most the idle threshold, the stack dumps (py-spy) and the grace.
    assert frozen < 5 + 2.5 + 20 + GRACE, output
    assert busy < 1 + 5, output  # a busy tree is not kept past the deadline
    inner.wait_eof(timeout=10)
    inner.wait_nothing_left(timeout=5)
    print(f"frozen after a busy stretch: {frozen:.1f} s; busy loop: {busy:.1f} s")
