"""Follow a test's process tree from the watcher process, and diagnose it when it hangs.

The tree is the test process and the descendants it started during the test. The
watcher is itself a child of the test process: it and its own helpers (py-spy) are
left out, and so are children that already existed when the watch began (a pool a
session fixture started belongs to that fixture, not to the test).
"""

from __future__ import annotations

import os
import time
from typing import Any

import psutil

from gpudoctor.probe import diagnose, events, launch, render_run, stacks
from gpudoctor.probe.sampler import Peaks
from gpudoctor.probe.supervise import Limits, ProcessRun, RunRecord
from gpudoctor.probe.tree import Track, Tree


def _descendants(pid: int) -> set[int]:
    try:
        return {child.pid for child in psutil.Process(pid).children(recursive=True)}
    except psutil.Error:
        return set()


class TestTree(Tree):
    """The processes of one test: its own, and what it started while watched."""

    __test__ = False  # not a test class, whatever pytest's name patterns say

    def __init__(self, test_pid: int) -> None:
        super().__init__(test_pid, token="", tools=set())
        self.preexisting = self._others()
        self.info: dict[int, dict[str, Any]] = {}

    def _others(self) -> set[int]:
        me = os.getpid()
        return _descendants(self.root) - {me} - _descendants(me)

    def members(self) -> set[int]:
        """Return the test process and the descendants it started since the watch began."""
        found = {self.root} | (self._others() - self.preexisting)
        for pid in found - set(self.info):
            self.info[pid] = _describe(pid)
        return found

    def running(self) -> set[int]:
        """Return the members other than the test process that have not exited."""
        return {pid for pid in self.members() - {self.root} if _running(pid)}


def _running(pid: int) -> bool:
    try:
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False


def _describe(pid: int) -> dict[str, Any]:
    """Remember who a process was, for the report, while it can still be asked."""
    try:
        process = psutil.Process(pid)
        return {"ppid": process.ppid(), "cmdline": process.cmdline()[:8]}
    except psutil.Error:
        return {"ppid": None, "cmdline": []}


def _freeze(track: Track, live: set[int], now: float, start: float) -> ProcessRun:
    return ProcessRun(
        pid=track.pid,
        ppid=track.ppid,
        cmdline=track.cmdline,
        first_seen=round(track.first_seen - start, 3),
        last_seen=round(track.last_seen - start, 3),
        alive_at_stop=track.pid in live,
        exit_code=track.exit_code,
        stalled_for=round(track.stalled_for(now) if track.pid in live else 0.0, 3),
        state=track.state,
        wchan=track.wchan,
        threads=track.threads,
        rss_peak=track.rss_peak,
        killed_by_supervisor=track.pid in live,
    )


def dump_stacks(tree: TestTree, live: set[int], workdir: launch.Workdir, test_dump_fd: int,
                start_epoch: float, native: bool, tools: set[int]) -> tuple[dict[int, stacks.Stack], list[str]]:
    """Dump the Python stacks of every live process (and native ones of the children)."""
    origins = events.origins(events.read(workdir.events, start_epoch))
    fds = {p: fd for p in live if p in origins and (fd := origins[p].dump_fd) is not None}
    fds[tree.root] = test_dump_fd
    python = stacks.python_stacks(fds, workdir.stacks, launch.DUMP_SIGNAL)
    notes: list[str] = []
    native_text: dict[int, str] = {}
    py_spy = stacks.find_py_spy() if native else None
    children = {p for p in live if p != tree.root and (p in origins or p in python)}
    if py_spy and children:
        native_text, error = stacks.native_stacks(children, py_spy, tools.add)
        if error:
            notes.append(f"py-spy: {error}")
    found = {p: stacks.combine(python.get(p), native_text.get(p)) for p in live}
    return {p: s for p, s in found.items() if s is not None}, notes


def diagnose_hang(tree: TestTree, start: float, start_epoch: float, limits: Limits,
                  workdir: launch.Workdir, test_dump_fd: int, tools: set[int]) -> dict[str, Any]:
    """Judge the test's tree at its deadline; return the probe's JSON diagnosis document."""
    now = time.monotonic()
    live = tree.scan(now) | {tree.root}
    dumps, notes = dump_stacks(tree, live, workdir, test_dump_fd, start_epoch, limits.native_stacks, tools)
    stalled = any(tree.tracks[p].stalled_for(now) >= limits.hang_after for p in live if p in tree.tracks)
    run = RunRecord(
        command=tuple(tree.tracks[tree.root].cmdline) if tree.root in tree.tracks else ("pytest",),
        stop_reason="hung" if stalled else "timeout",
        signal_received=None,
        root_pid=tree.root,
        exit_code=None,
        duration=round(now - start, 3),
        limits=limits,
        processes=tuple(_freeze(t, live, now, start) for t in tree.tracks.values()),
        events=events.read(workdir.events, start_epoch),
        samples=[],
        peaks=Peaks({}, {}, {}, {}, None, ()),
        stacks=dumps,
        stdout="",
        stderr="",
        notes=tuple(notes),
    )
    return render_run.to_json(run, diagnose.diagnose(run))
