"""Follow a test's process tree from the watcher process, and diagnose it when it hangs.

The tree is the test process and the descendants it started during the test. The
watcher is itself a child of the test process: it and its own helpers (py-spy) are
left out, and so are children that already existed when the watch began (a pool a
session fixture started belongs to that fixture, not to the test).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import psutil

from gpudoctor.probe import diagnose, events, launch, render_run, stacks
from gpudoctor.probe.sampler import Peaks
from gpudoctor.probe.supervise import Limits, ProcessRun, RunRecord
from gpudoctor.probe.tree import Track, Tree, process_table, still_there
from gpudoctor.probe.verdicts import StopReason
from gpudoctor.probe.watchdog import start_ticks


def _table(tree: Tree) -> dict[int, tuple[int, float]]:
    """Return PID -> (parent PID, start time on the tree's clock) of every process."""
    return {pid: (ppid, tree.started_at(ticks)) for pid, ppid, ticks in process_table()}


def _below(table: dict[int, tuple[int, float]], seeds: set[int], skip: set[int]) -> set[int]:
    """Return ``seeds`` and their descendants in ``table``, not walking into ``skip``."""
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    found: set[int] = set()
    queue = [pid for pid in seeds if pid in table and pid not in skip]
    while queue:
        pid = queue.pop()
        if pid in found:
            continue
        found.add(pid)
        queue += [child for child in children.get(pid, []) if child not in skip]
    return found


class TestTree(Tree):
    """The processes of one test: its own, and what it started while watched.

    Membership is by ancestry, and it sticks: a process once found stays a member
    (known by its PID and start time) after its parent dies and it is reparented
    elsewhere, and so do its descendants. A SIGTERM that kills a middle process
    must not set free the grandchild that ignores it.
    """

    __test__ = False  # not a test class, whatever pytest's name patterns say

    def __init__(self, test_pid: int, token: str = "", members_file: Path | None = None) -> None:
        super().__init__(test_pid, token=token, tools=set())
        self.members_file = members_file
        self.exclude: set[int] = set()  # gpudoctor's own children of the test process (its watchdog)
        self.info: dict[int, dict[str, Any]] = {}
        self.seen: dict[int, float] = {}  # PID -> start time of every member found so far
        # The process table is walked again only when a process was created (Tree.walks,
        # as for the supervisor): between walks the tree can only lose members.
        self.found: set[int] = set()  # what the last walk found, the test process aside
        # Members first seen with their parent's command line: forked, perhaps not yet
        # exec'd (subprocess forks, then execs). Asked again until the line changes.
        self.unexeced: set[int] = set()
        table = _table(self)
        self.root_started = table.get(test_pid, (0, None))[1]
        me = _below(table, {os.getpid()}, set())
        self.preexisting = {(pid, table[pid][1]) for pid in _below(table, {test_pid}, me) - {test_pid}}

    def root_alive(self) -> bool:
        """Tell whether the test process still runs (not exited, not a new process with its PID)."""
        try:
            process = psutil.Process(self.root)
            return bool(process.status() != psutil.STATUS_ZOMBIE) and (
                self.root_started is None or abs(process.create_time() - self.root_started) < 0.01)
        except psutil.Error:
            return False

    def members(self) -> set[int]:
        """Return the test process and every process of its tree found so far that still exists."""
        if self.unexeced:
            self._describe_again()
        if not self.walks.due():
            return still_there(self.found - self.exclude) | {self.root}
        table = _table(self)
        seeds = {pid for pid, started in self.seen.items() if pid in table and table[pid][1] == started}
        if self.root_alive():
            seeds.add(self.root)
        skip = _below(table, {os.getpid()}, set()) | self.exclude | self.tools
        found = {pid for pid in _below(table, seeds, skip) if (pid, table[pid][1]) not in self.preexisting}
        for pid in sorted(found - set(self.seen), key=lambda pid: table[pid][1] or 0.0):  # parents first
            self._found(pid, table[pid])
        self.found = found - {self.root}
        return found | {self.root}

    def _describe_again(self) -> None:
        """Read again the command line of members that had their parent's: an exec since
        then gives the report the program that runs, not the one that started it."""
        for pid in list(self.unexeced):
            now = _describe(pid)
            if now["ppid"] is None or now["cmdline"] != self._parent_cmdline(pid):
                self.unexeced.discard(pid)  # exec'd, its own program from the start, or gone
                if now["ppid"] is not None:
                    self.info[pid] = now

    def _parent_cmdline(self, pid: int) -> list[str] | None:
        parent = self.info.get(pid, {}).get("ppid")
        return self.info.get(parent, {}).get("cmdline") if parent is not None else None

    def _found(self, pid: int, entry: tuple[int, float]) -> None:
        self.seen[pid] = entry[1]
        self.info[pid] = _describe(pid)
        parent = self._parent_cmdline(pid)
        if self.info[pid]["cmdline"] and (parent is None or self.info[pid]["cmdline"] == parent):
            self.unexeced.add(pid)  # a parent not described yet is compared at the next look
        ticks = start_ticks(pid)
        if self.members_file is None or ticks is None or pid == self.root:
            return
        # For the watchdog, which kills the members if pytest dies without cleaning up.
        with open(self.members_file, "a") as f:
            f.write(f"{pid} {ticks}\n")

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
    tracks = [tree.tracks[p] for p in live if p in tree.tracks]
    # Hung only when nothing in the tree moved for hang_after: a test process or worker
    # that waits while another process still computes is waiting on it, not deadlocked.
    quiet = tree.quiet_for(now) >= limits.hang_after
    if quiet and any(t.stopped_since is not None for t in tracks):
        reason = StopReason.STOPPED  # held by SIGSTOP or a debugger: not a deadlock of the test's own
    elif quiet:
        reason = StopReason.HUNG
    else:
        reason = StopReason.TIMEOUT
    run = RunRecord(
        command=tuple(tree.tracks[tree.root].cmdline) if tree.root in tree.tracks else ("pytest",),
        stop_reason=reason,
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
