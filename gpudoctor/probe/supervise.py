"""Run a command under supervision and collect the evidence a diagnosis needs.

The command runs in its own session with the bootstrap injected; the supervisor
(a child subreaper) follows its whole tree, samples memory, watches for hangs,
and on a deadline, a hang, a memory budget or a signal to itself dumps stacks and
kills the whole tree. A watchdog process kills the tree if the supervisor dies.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpudoctor.errors import GpudoctorError
from gpudoctor.printable import printable
from gpudoctor.probe import events, failures, footprint, host, launch, reaper, stacks, watchdog, wedged
from gpudoctor.probe.capture import Capture
from gpudoctor.probe.command_text import short_command
from gpudoctor.probe.explain import IDLE_EVIDENCE
from gpudoctor.probe.live_snapshot import TreeSnapshots
from gpudoctor.probe.record import Limits, ProcessRun, RunRecord, SignalSender, freeze
from gpudoctor.probe.sampler import Peaks, Sampler
from gpudoctor.probe.stop_signals import Stop, routed
from gpudoctor.probe.tree import TOKEN_VAR, Tree
from gpudoctor.probe.units import format_size
from gpudoctor.probe.verdicts import StopReason
from gpudoctor.safe_path import working_folder

if TYPE_CHECKING:
    from gpudoctor.probe.live_view import View

__all__ = ["Limits", "ProcessRun", "RunRecord", "Supervisor"]

_POLL = 0.1
# What the live view says while the tree is being stopped, by why it is.
_STOPPING = {
    StopReason.HUNG: "hung: nothing moved for --hang-after; dumping stacks, then SIGTERM",
    StopReason.STOPPED: "nothing moved and a process is held stopped; dumping stacks, then SIGTERM",
    StopReason.INTERRUPTED: "interrupted: dumping stacks, then SIGTERM (again: kill at once)",
    StopReason.TIMEOUT: "--timeout reached: dumping stacks, then SIGTERM",
    StopReason.MEMORY_LIMIT: "over --memory-limit: dumping stacks, then SIGTERM",
    StopReason.PROCESS_LIMIT: "over --max-processes: SIGKILL",
    StopReason.CRASH_LOOP: "crash loop: children keep failing the same way; dumping stacks, then SIGTERM",
}
_MAX_DUMPS = 16  # stack dumps of more processes would take longer than they help


class Supervisor:
    """One supervised run; ``run()`` returns its RunRecord."""

    def __init__(self, command: list[str], limits: Limits, echo_stdout: Any, echo_stderr: Any,
                 view: View | None = None, own_program: bool = False,
                 hold: Callable[[dict[int, int | None], float], None] | None = None):
        self.command = launch.resolve(command)
        # Called on a hang once this node's stacks are dumped, before its tree is stopped,
        # with each live process's world size (None: not a rank) and the longest the call may
        # wait: a node of a distributed job waits there for the other nodes to dump theirs,
        # since stopping its ranks wakes theirs (node_record.hold).
        self._hold = hold
        # gpudoctor's own program (a scenario) needs no working folder of the user's: with
        # that folder deleted, it runs in the run's own folder (multiprocessing asks for one).
        self._own_program = own_program
        self.limits = limits
        self._echo = (echo_stdout, echo_stderr)
        self._view = view  # the live view or progress lines (live_view), if any
        self._snapshots: TreeSnapshots | None = None
        self._workdir = launch.make_workdir()
        self._token = secrets.token_hex(8)
        self._tools: set[int] = set()
        self._notes: list[str] = []
        self._stop = Stop()
        self._tree: Tree | None = None
        self._tree_gone = False  # set once kill_tree has returned: then the watchdog may stand down
        self._measures: set[str] = set()
        self._shared_note: str | None = None
        # Each process's footprint when the tree passed --memory-limit (its own memory, USS,
        # tells a worker's own copy from pages it shares with its parent).
        self._at_limit: dict[int, footprint.Footprint] = {}
        self._tracking = "psutil scan"
        self._told: set[int] = set()  # the members the watchdog knows of
        self._escaped: set[int] = set()
        self._stretched = False  # the timeout was stretched while the tree was busy
        self._loop: tuple[int, ...] = ()  # the children of the streak --crash-loop stopped

    def run(self) -> RunRecord:
        """Start the command, watch it until it ends or must be stopped, then clean up."""
        was_subreaper = reaper.is_subreaper()
        why_not = reaper.become_subreaper()
        if why_not:
            self._notes.append(why_not)
        else:
            self._tracking = "subreaper"
        try:
            # If gpudoctor is killed (SIGKILL), the watchdog also deletes the run's folder.
            watchdog = launch.start_watchdog(self._token, self.limits.grace, self._workdir.members,
                                              events=self._workdir.events, remove=self._workdir.root)
            self._tools.add(watchdog.pid)
            launch.name_watchdog(self._workdir, watchdog.pid)
            try:
                self._stop.member = self._in_tree
                with routed(self._stop) as child_mask:
                    return self._run(child_mask)
            finally:
                # Without "done" (the tree may still run) the watchdog kills its leftovers.
                launch.stop_watchdog(watchdog, done=self._tree_gone)
        finally:
            # A supervisor run inside a longer-lived process (scenarios, the pytest
            # plugin) must not leave it adopting every orphan of the machine.
            if why_not is None and not was_subreaper:
                reaper.stop_being_subreaper()
            _remove(self._workdir.root)

    def _in_tree(self, pid: int) -> bool | None:
        """Tell whether ``pid`` is a process of the supervised tree, or was one: a member
        seen, a carrier of the run's token, or the child of a member (a short-lived
        ``kill`` a shell script ran, still a zombie); None when it is gone and was never
        seen. Asked when a signal comes, from another thread."""
        tree = self._tree

        def member(candidate: int) -> bool:  # a lookup, never a walk: the main thread adds tracks
            return tree is not None and (candidate == tree.root or candidate in tree.tracks)

        if member(pid):
            return True
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                ppid = int(f.read().rsplit(b")", 1)[1].split()[1])
        except FileNotFoundError:
            return None
        except (OSError, IndexError, ValueError):
            return False
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                carries = f"{TOKEN_VAR}={self._token}".encode() in f.read().split(b"\0")
        except OSError:  # another user's: not one of ours
            carries = False
        return carries or member(ppid)

    def _run(self, child_mask: Callable[[], None] | None = None) -> RunRecord:
        start, start_epoch = time.monotonic(), time.time()
        oom_before = host.cgroup_oom_kills()
        try:
            process = subprocess.Popen(
                self.command,
                cwd=self._workdir.root if self._own_program and working_folder() is None else None,
                env=launch.child_environment(self._workdir, self._token),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                # The stop signals are blocked in gpudoctor while it watches (stop_signals):
                # the command gets gpudoctor's own mask back before its exec.
                preexec_fn=child_mask,
            )
        except OSError as error:
            self._tree_gone = True  # there is no tree
            raise GpudoctorError(f"cannot start {printable(self.command[0])}: {error.strerror}") from None
        tree = self._tree = Tree(process.pid, self._token, self._tools)
        if self._tracking == "subreaper":
            tree.adopt = tree.start_time(process.pid)
        live: list[set[int]] = [{process.pid}]
        captures: list[Capture] = []
        sampler: Sampler | None = None
        dumps: dict[int, stacks.Stack] = {}
        reason = StopReason.INTERRUPTED  # if the watch itself fails, clean up as for Ctrl-C
        stalled: dict[int, float] = {}
        stop_at: float | None = None
        try:  # from here on, whatever fails, the finally stops the tree
            for pipe, echo in zip((process.stdout, process.stderr), self._echo, strict=True):
                assert pipe is not None
                captures.append(Capture(pipe, echo, self.limits.output_limit))
            sampler = Sampler(lambda: _rss(tree, live[0]), start, self.limits.sample_interval,
                              self.limits.process_interval)
            sampler.start()
            if self._view is not None:
                self._snapshots = TreeSnapshots(short_command(self.command), start, self.limits,
                                                self._workdir.events, sampler.latest_gpu,
                                                runtimes=self._view.wants_runtimes)
            reason = self._watch(tree, live, start)
            now = time.monotonic()
            stop_at = round(now - start, 3)
            self._show(tree, live[0], now, _STOPPING.get(reason))
            stalled = {p: tree.tracks[p].idle_for(now) for p in live[0]}
            if reason not in (StopReason.EXITED, StopReason.PROCESS_LIMIT) and not self._stop.hurry.is_set():
                # (A fork bomb gets no time to grow, a second Ctrl-C no wait.)
                stopped = {p for p in live[0] if tree.tracks[p].stopped_since is not None}
                dumps = self._dump_stacks(live[0], start_epoch, stopped)
                if reason == StopReason.HUNG and self._hold is not None:
                    sizes = {p: (rank.world_size if (rank := tree.tracks[p].rank) is not None else None)
                             for p in live[0]}
                    self._hold(sizes, self.limits.hang_after)
        finally:
            try:
                self._stop_tree(tree, live[0], 0.0 if reason == StopReason.PROCESS_LIMIT else None)
            finally:
                if sampler is not None:
                    sampler.stop()
                for capture in captures:  # a tree that could not be killed still holds the pipes
                    capture.join(5.0 if self._tree_gone else 0.0)
                if self._view is not None:
                    self._view.done()
                for pipe in (process.stdout, process.stderr)[len(captures):]:
                    if pipe is not None:
                        pipe.close()
        if reason == StopReason.EXITED and live[0]:
            self._notes.append("still running after the command exited, killed: "
                               + ", ".join(map(str, sorted(live[0]))))
        if self._shared_note:
            self._notes.append(self._shared_note)
        for name, capture in zip(("stdout", "stderr"), captures, strict=False):
            dropped = capture.kept()[1]
            if dropped > 0:
                self._notes.append(f"{name}: {dropped} bytes of output not kept (only the first "
                                   f"and last {format_size(self.limits.output_limit)})")
        if sampler is not None and sampler.failure:
            self._notes.append(sampler.failure)
        oom_after = host.cgroup_oom_kills()
        root = tree.tracks.get(process.pid)
        process.returncode = None if root is None else root.exit_code
        at_stop = {id(tree.tracks[p]): s for p, s in stalled.items() if p in tree.tracks}
        out, err = [c.text() for c in captures] if len(captures) == 2 else ["", ""]
        return RunRecord(
            command=tuple(self.command),
            stop_reason=reason,
            signal_received=self._stop.signum,
            signal_at=None if self._stop.at is None else round(self._stop.at - start, 3),
            stop_at=stop_at,
            crash_loop=self._loop,
            signal_sender=self._sender(tree),
            escaped=tuple(sorted(self._escaped)),
            root_pid=process.pid,
            exit_code=process.returncode,
            duration=round(time.monotonic() - start, 3),
            limits=self.limits,
            processes=tuple(freeze(t, start, at_stop.get(id(t))) for t in tree.all_tracks()),
            events=events.read(self._workdir.events, start_epoch),
            samples=sampler.samples() if sampler else [],
            peaks=sampler.peaks() if sampler else Peaks({}, {}, {}, {}, None, ()),
            stacks=dumps,
            stdout=out,
            stderr=err,
            notes=tuple(self._notes),
            memory_measure=footprint.describe(self._measures) if self.limits.memory_limit else None,
            at_memory_limit=self._at_limit,
            oom_kills=None if oom_before is None or oom_after is None else oom_after - oom_before,
            fatal_errors=stacks.fatal_errors(self._workdir.stacks),
            tracking=self._tracking,
            samples_partial=sampler is None or sampler.failure is not None,
            started_at=start_epoch,
        )

    def _sender(self, tree: Tree) -> SignalSender | None:
        """Who sent the stopping signal; a sender gone before the listener could read it (a
        command that signals, then exits) is named as the scan saw it, if it did."""
        sender = self._stop.sender
        track = tree.tracks.get(sender.pid) if sender is not None else None
        if sender is None or track is None:
            return sender
        return replace(sender, command=sender.command or track.cmdline, in_tree=True)

    def _stop_tree(self, tree: Tree, live: set[int], grace: float | None = None) -> None:
        """Kill the whole tree; mark what gpudoctor signalled so it is never blamed on others."""
        for pid in live:
            track = tree.tracks.get(pid)
            if track is not None:
                track.killed_by_supervisor = True
        root = tree.tracks.get(tree.root)
        # A reaped root's PID may already be another process's: never signal its group then.
        group = None if root is not None and root.reaped else tree.root
        killed = reaper.kill_tree(tree.members, lambda pids: self._reap(tree, pids),
                                  self.limits.grace if grace is None else grace, group,
                                  cut_short=self._stop.hurry)
        if self._stop.hurry.is_set():
            self._notes.append("a second signal stopped the tree at once: SIGKILL, no stack dumps "
                               "or grace period after it")
        for pid in killed:  # SIGKILLed by us: a -9 exit status is ours, not the OOM killer's
            track = tree.tracks.get(pid)
            if track is not None:
                track.killed_by_supervisor = True
        # What survives SIGKILL is out of gpudoctor's reach (another user's, another PID
        # namespace's): said, never reported as a clean run.
        self._escaped = {p for p in tree.members() if reaper.running(p)}
        self._tree_gone = not self._escaped

    def _reap(self, tree: Tree, pids: set[int]) -> None:
        reaper.reap(pids - self._tools, tree.record_exit)

    def _watch(self, tree: Tree, live: list[set[int]], start: float) -> StopReason:
        """Poll the tree until the command exits or must be stopped; return why it stopped."""
        limits = self.limits
        root_exited_at: float | None = None
        # The children's ends and exceptions, as the bootstrap records them: a crash loop
        # is seen in them (a pool reaps its own workers; gpudoctor never sees their status).
        news = events.Tail(self._workdir.events)
        ends = failures.Streak()
        # Whether a scan began after the command's exit was seen: one that began before it
        # may have listed the processes before the command's last fork, and its orphan
        # (reparented to this subreaper as the command died) would be missed.
        scanned_after_exit = False
        unwedged: set[int] = set()  # processes seen wedged (wedged.py) before they were tracked
        while True:
            now = time.monotonic()
            live[0] = tree.scan(now)
            self._tell_watchdog(live[0])
            # The root too: it may have exited before any scan saw it.
            self._reap(tree, set(tree.tracks) | {tree.root})
            live[0] = {p for p in live[0] if tree.tracks[p].alive}
            if len(live[0]) > limits.max_processes:
                self._notes.append(f"fork bomb stopped: {len(live[0])} processes "
                                   f"(over --max-processes {limits.max_processes})")
                return StopReason.PROCESS_LIMIT
            if self._stop.event.is_set():
                return StopReason.INTERRUPTED
            if limits.timeout is not None and now - start >= limits.timeout and \
                    not self._stretch(tree, now, now - start):
                return StopReason.TIMEOUT
            if limits.memory_limit is not None and self._over_memory(tree, live[0], limits.memory_limit):
                return StopReason.MEMORY_LIMIT
            fresh = news.read()
            unwedged = {pid for pid in unwedged | wedged.wedged(fresh) if not tree.wedge(pid, now)}
            if limits.crash_loop:
                ends.feed(fresh)
                if len(ends.ended) >= limits.crash_loop:
                    self._loop = tuple(e.pid for e in ends.ended)
                    return StopReason.CRASH_LOOP
            root = tree.tracks.get(tree.root)
            if root is not None and root.exit_code is not None:
                # Leftovers get a grace period to finish on their own, then are killed.
                root_exited_at = root_exited_at or now
                if (not live[0] and scanned_after_exit) or now - root_exited_at >= limits.grace:
                    return StopReason.EXITED
                if not live[0]:
                    scanned_after_exit = True
                    continue  # scan again at once
            elif live[0] and tree.quiet_for(now) >= limits.hang_after and \
                    all(tree.tracks[p].idle_for(now) >= limits.hang_after for p in live[0]):
                # Nothing moved for --hang-after: hung, unless what holds it is a stop
                # (SIGSTOP, a debugger), which is not a deadlock of the program's own.
                stopped = any(tree.tracks[p].stopped_since is not None for p in live[0])
                return StopReason.STOPPED if stopped else StopReason.HUNG
            if self._view is not None and self._view.due(now):
                self._show(tree, live[0], now)
            self._stop.event.wait(_POLL)

    def _stretch(self, tree: Tree, now: float, elapsed: float) -> bool:
        """Tell whether the timeout passed while the tree still makes CPU progress and may
        go on (``Limits.busy_timeout``); note it the first time."""
        limits = self.limits
        if limits.busy_timeout is None or elapsed >= limits.busy_timeout or \
                tree.quiet_for(now) >= min(IDLE_EVIDENCE, limits.hang_after):
            return False
        if not self._stretched:
            self._stretched = True
            self._notes.append(f"the timeout of {limits.timeout:g} s passed while the tree was still making "
                               f"CPU progress: it was given up to {limits.busy_timeout:g} s to finish")
        return True

    def _show(self, tree: Tree, live: set[int], now: float, stopping: str | None = None) -> None:
        """Give the view a snapshot; a view that fails is dropped, the run goes on."""
        if self._view is None or self._snapshots is None:
            return
        try:
            self._view.show(self._snapshots.take(tree, live, now, stopping))
        except Exception:
            self._view = None

    def _tell_watchdog(self, members: set[int]) -> None:
        """Name each new member to the watchdog (with its start time): if gpudoctor dies, it
        kills them even when they dropped the run's token from their environment. One
        write of whole lines, appended: the watchdog reads the file only once gpudoctor
        is gone."""
        new = members - self._told
        if not new:
            return
        lines = "".join(f"{pid} {ticks}\n" for pid in sorted(new)
                        if (ticks := watchdog.start_ticks(pid)) is not None)
        self._told |= new
        try:
            fd = os.open(self._workdir.members, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, lines.encode())
            finally:
                os.close(fd)
        except OSError:
            pass  # the watchdog then finds them by the token alone

    def _over_memory(self, tree: Tree, live: set[int], limit: int) -> bool:
        """Tell whether the tree's memory, shared pages counted once (PSS), is over ``limit``.

        The RSS total bounds the PSS total from above and costs nothing (the scan read
        it), so smaps is read only when the RSS total is over the limit, and once at
        the start to learn which measure this run's processes allow.
        """
        rss = sum(tree.tracks[p].rss for p in live)
        if rss <= limit and self._measures:
            return False
        total, used, each = footprint.tree_memory(live)
        self._measures |= used
        if rss > limit and total <= limit and self._shared_note is None:
            self._shared_note = (
                f"the tree's RSS total reached {format_size(rss)}, over --memory-limit "
                f"{format_size(limit)}, but its {footprint.describe(used)} total was "
                f"{format_size(total)}: memory shared between processes (fork workers) "
                "counts once")
        elif total > limit:
            self._at_limit = each
            self._shared_note = (f"--memory-limit counted {footprint.describe(used)}: the tree's "
                                 f"total was {format_size(total)} when it was stopped")
        return total > limit

    def _dump_stacks(self, live: set[int], start_epoch: float, stopped: set[int]) -> dict[int, stacks.Stack]:
        """Dump the stacks of the live processes before killing them: py-spy first, then
        faulthandler's Python stacks for the processes py-spy did not dump.

        py-spy reads a process from outside. faulthandler's dump runs in the process, in a
        signal handler that walks every thread's frames without the GIL: a thread that runs
        Python meanwhile (a Pool's worker handler spinning on results nobody reads) can make
        it crash the process with SIGSEGV, so it is signalled only where py-spy gave nothing.
        A stopped process cannot run that handler, nor be paused by py-spy: py-spy reads its
        memory as it is (``--nonblocking``)."""
        origins = events.origins(events.read(self._workdir.events, start_epoch))
        python = {p for p in live if p in origins}
        chosen = set(sorted(python)[:_MAX_DUMPS])
        native: dict[int, str] = {}
        targets = chosen if self.limits.native_stacks else chosen & stopped
        py_spy = stacks.find_py_spy() if targets else None
        if py_spy:
            native, error = stacks.native_stacks(targets, py_spy, self._tools.add, stopped=stopped,
                                                 cancel=self._stop.hurry)
            if error:
                self._notes.append(f"py-spy: {error}")
        fds = {p: fd for p in chosen - stopped - set(native) if (fd := origins[p].dump_fd) is not None}
        py_text = stacks.python_stacks(fds, self._workdir.stacks, launch.DUMP_SIGNAL, cancel=self._stop.hurry)
        found = {p: stacks.combine(py_text.get(p), native.get(p)) for p in chosen}
        return {p: s for p, s in found.items() if s is not None}


def _rss(tree: Tree, live: set[int]) -> dict[int, tuple[int, float]]:
    """The RSS and CPU time of the live processes as the last scan read them (for the
    sampler's thread: ``live`` is replaced, never changed in place, and a track is found by
    ``get``)."""
    return {pid: (track.rss, track.cpu) for pid in live
            if (track := tree.tracks.get(pid)) is not None and track.rss}


def _remove(directory: Path) -> None:
    """Delete the run's scratch directory (events and stack files were read already)."""
    shutil.rmtree(directory, ignore_errors=True)
