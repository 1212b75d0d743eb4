"""Run a command under supervision and collect the evidence a diagnosis needs.

The command runs in its own session with the bootstrap injected; the supervisor
(a child subreaper) follows its whole tree, samples memory, watches for hangs,
and on a deadline, a hang, a memory budget or a signal to itself dumps stacks and
kills the whole tree. A watchdog process kills the tree if the supervisor dies.
"""

from __future__ import annotations

import secrets
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpudoctor.errors import GpudoctorError
from gpudoctor.probe import events, launch, reaper, stacks
from gpudoctor.probe.capture import Capture
from gpudoctor.probe.sampler import Peaks, Sample, Sampler
from gpudoctor.probe.tree import Track, Tree

_POLL = 0.1
_MAX_DUMPS = 16  # stack dumps of more processes would take longer than they help


@dataclass(frozen=True)
class Limits:
    """How long and how big the command may get, and how closely it is watched."""

    timeout: float | None = None
    hang_after: float = 30.0
    grace: float = 3.0
    memory_limit: int | None = None
    output_limit: int = 64 * 1024
    sample_interval: float = 0.05
    process_interval: float = 0.5
    native_stacks: bool = True


@dataclass(frozen=True)
class ProcessRun:
    """What the supervisor saw of one process, frozen at the end of the run."""

    pid: int
    ppid: int
    cmdline: tuple[str, ...]
    first_seen: float
    last_seen: float
    alive_at_stop: bool
    exit_code: int | None
    stalled_for: float
    state: str
    wchan: str | None
    threads: int
    rss_peak: int
    killed_by_supervisor: bool


@dataclass(frozen=True)
class RunRecord:
    """Everything one supervised run produced, for the diagnosis."""

    command: tuple[str, ...]
    stop_reason: str  # "exited", "timeout", "hung", "interrupted", "memory-limit"
    signal_received: int | None
    root_pid: int
    exit_code: int | None
    duration: float
    limits: Limits
    processes: tuple[ProcessRun, ...]
    events: list[events.Event]
    samples: list[Sample]
    peaks: Peaks
    stacks: dict[int, stacks.Stack]
    stdout: str
    stderr: str
    notes: tuple[str, ...]


class _Stop:
    """A flag the signal handlers set; the supervisor's loop checks it."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.signum: int | None = None

    def handler(self, signum: int, frame: Any) -> None:
        self.signum = self.signum or signum
        self.event.set()


@contextmanager
def _signals(stop: _Stop) -> Iterator[None]:
    """Route SIGINT/SIGTERM/SIGHUP to ``stop`` while the command runs (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    wanted = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    previous = {s: signal.signal(s, stop.handler) for s in wanted}
    try:
        yield
    finally:
        for s, old in previous.items():
            signal.signal(s, old)


class Supervisor:
    """One supervised run; ``run()`` returns its RunRecord."""

    def __init__(self, command: list[str], limits: Limits, echo_stdout: Any, echo_stderr: Any):
        self.command = launch.resolve(command)
        self.limits = limits
        self._echo = (echo_stdout, echo_stderr)
        # Resolved: stack files are recognized by comparing /proc/<pid>/fd links to it.
        self._workdir = launch.Workdir(Path(tempfile.mkdtemp(prefix="gpudoctor-")).resolve())
        self._workdir.stacks.mkdir()
        self._token = secrets.token_hex(8)
        self._tools: set[int] = set()
        self._notes: list[str] = []
        self._stop = _Stop()

    def run(self) -> RunRecord:
        """Start the command, watch it until it ends or must be stopped, then clean up."""
        why_not = reaper.become_subreaper()
        if why_not:
            self._notes.append(why_not)
        watchdog = launch.start_watchdog(self._token)
        self._tools.add(watchdog.pid)
        try:
            with _signals(self._stop):
                return self._run()
        finally:
            launch.stop_watchdog(watchdog)
            _remove(self._workdir.root)

    def _run(self) -> RunRecord:
        start, start_epoch = time.monotonic(), time.time()
        try:
            process = subprocess.Popen(
                self.command,
                env=launch.child_environment(self._workdir, self._token),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as error:
            raise GpudoctorError(f"cannot start {self.command[0]}: {error.strerror}") from None
        tree = Tree(process.pid, self._token, self._tools)
        assert process.stdout is not None and process.stderr is not None
        out = Capture(process.stdout, self._echo[0], self.limits.output_limit)
        err = Capture(process.stderr, self._echo[1], self.limits.output_limit)
        live: list[set[int]] = [{process.pid}]
        sampler = Sampler(lambda: live[0], start, self.limits.sample_interval,
                          self.limits.process_interval)
        sampler.start()
        dumps: dict[int, stacks.Stack] = {}
        reason = "interrupted"  # if the watch itself fails, clean up as for Ctrl-C
        stalled: dict[int, float] = {}
        try:
            reason = self._watch(tree, live, start)
            now = time.monotonic()
            stalled = {p: tree.tracks[p].stalled_for(now) for p in live[0]}
            if reason != "exited":
                dumps = self._dump_stacks(live[0], start_epoch)
        finally:
            for pid in live[0]:
                tree.tracks[pid].killed_by_supervisor = True
            reaper.kill_tree(tree.members, lambda pids: self._reap(tree, pids),
                             self.limits.grace, process.pid)
            sampler.stop()
            out.join(5.0)
            err.join(5.0)
        if reason == "exited" and live[0]:
            self._notes.append("still running after the command exited, killed: "
                               + ", ".join(map(str, sorted(live[0]))))
        root = tree.tracks.get(process.pid)
        process.returncode = None if root is None else root.exit_code
        return RunRecord(
            command=tuple(self.command),
            stop_reason=reason,
            signal_received=self._stop.signum,
            root_pid=process.pid,
            exit_code=process.returncode,
            duration=round(time.monotonic() - start, 3),
            limits=self.limits,
            processes=tuple(_freeze(t, stalled, start) for t in tree.tracks.values()),
            events=events.read(self._workdir.events, start_epoch),
            samples=sampler.samples(),
            peaks=sampler.peaks(),
            stacks=dumps,
            stdout=out.text(),
            stderr=err.text(),
            notes=tuple(self._notes),
        )

    def _reap(self, tree: Tree, pids: set[int]) -> None:
        reaper.reap(pids - self._tools, tree.record_exit)

    def _watch(self, tree: Tree, live: list[set[int]], start: float) -> str:
        """Poll the tree until the command exits or must be stopped; return why it stopped."""
        limits = self.limits
        root_exited_at: float | None = None
        while True:
            now = time.monotonic()
            live[0] = tree.scan(now)
            # The root too: it may have exited before any scan saw it.
            self._reap(tree, set(tree.tracks) | {tree.root})
            live[0] = {p for p in live[0] if tree.tracks[p].alive}
            if self._stop.event.is_set():
                return "interrupted"
            if limits.timeout is not None and now - start >= limits.timeout:
                return "timeout"
            if limits.memory_limit is not None:
                if sum(tree.tracks[p].rss for p in live[0]) > limits.memory_limit:
                    return "memory-limit"
            root = tree.tracks.get(tree.root)
            if root is not None and root.exit_code is not None:
                # Leftovers get a grace period to finish on their own, then are killed.
                root_exited_at = root_exited_at or now
                if not live[0] or now - root_exited_at >= limits.grace:
                    return "exited"
            elif live[0] and all(tree.tracks[p].stalled_for(now) >= limits.hang_after
                                 for p in live[0]):
                return "hung"
            self._stop.event.wait(_POLL)

    def _dump_stacks(self, live: set[int], start_epoch: float) -> dict[int, stacks.Stack]:
        """Dump the stacks of the live processes, Python ones first, before killing them."""
        origins = events.origins(events.read(self._workdir.events, start_epoch))
        python = {p for p in live if p in origins}
        chosen = set(sorted(python)[:_MAX_DUMPS])
        fds = {p: fd for p in chosen if (fd := origins[p].dump_fd) is not None}
        py_text = stacks.python_stacks(fds, self._workdir.stacks, launch.DUMP_SIGNAL)
        native: dict[int, str] = {}
        py_spy = stacks.find_py_spy() if self.limits.native_stacks else None
        if py_spy and chosen:
            native, error = stacks.native_stacks(chosen, py_spy, self._tools.add)
            if error:
                self._notes.append(f"py-spy: {error}")
        found = {p: stacks.combine(py_text.get(p), native.get(p)) for p in chosen}
        return {p: s for p, s in found.items() if s is not None}


def _freeze(track: Track, stalled: dict[int, float], start: float) -> ProcessRun:
    """Freeze a track; ``stalled`` holds the stall times of the processes live at the stop."""
    return ProcessRun(
        pid=track.pid,
        ppid=track.ppid,
        cmdline=track.cmdline,
        first_seen=round(track.first_seen - start, 3),
        last_seen=round(track.last_seen - start, 3),
        alive_at_stop=track.pid in stalled,
        exit_code=track.exit_code,
        stalled_for=round(stalled.get(track.pid, 0.0), 3),
        state=track.state,
        wchan=track.wchan,
        threads=track.threads,
        rss_peak=track.rss_peak,
        killed_by_supervisor=track.killed_by_supervisor,
    )


def _remove(directory: Path) -> None:
    """Delete the run's scratch directory (events and stack files were read already)."""
    shutil.rmtree(directory, ignore_errors=True)
