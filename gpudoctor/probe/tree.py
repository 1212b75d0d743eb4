"""Follow the process tree of a supervised command: who belongs, what each is doing.

Membership survives reparenting: the supervisor is a child subreaper, so an orphan
whose parent died is reparented to it and recognized by the run token in its
environment (a setsid'd or double-forked descendant keeps the token unless it
scrubs its environment).

A process is its PID *and* its start time: a PID the kernel hands out again (after
a member exited and was reaped) is a new process, with a track of its own.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

import psutil

from gpudoctor.probe import ranks

TOKEN_VAR = "GPUDOCTOR_RUN"

# A process held by SIGSTOP (or a job-control stop) or by a tracer (a debugger, strace):
# it is not waiting for anything of its own, so it is never called hung.
STOPPED = frozenset({psutil.STATUS_STOPPED, psutil.STATUS_TRACING_STOP})

# How much CPU a waiting process may still burn (signal handlers, timers) and count
# as making no progress: a fixed slack plus a fraction of the wall time waited.
_CPU_SLACK = 0.05
_CPU_FRACTION = 0.02

# A full walk of the process table at least this often, even when no process was created.
_WALK_EVERY = 2.0
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
_PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")
_WAITING = frozenset({psutil.STATUS_SLEEPING, psutil.STATUS_DISK_SLEEP})
# The state letters of /proc/PID/stat, as psutil names them.
_STATES = {"R": psutil.STATUS_RUNNING, "S": psutil.STATUS_SLEEPING, "D": psutil.STATUS_DISK_SLEEP,
           "T": psutil.STATUS_STOPPED, "t": psutil.STATUS_TRACING_STOP, "Z": psutil.STATUS_ZOMBIE,
           "X": psutil.STATUS_DEAD, "x": psutil.STATUS_DEAD, "K": "wake-kill",
           "W": psutil.STATUS_WAKING, "I": psutil.STATUS_IDLE, "P": "parked"}


@dataclass
class Track:
    """What the supervisor has seen of one process so far (mutable while it runs)."""

    pid: int
    ppid: int
    cmdline: tuple[str, ...]
    first_seen: float
    last_seen: float
    alive: bool = True
    exit_code: int | None = None  # from waitpid, or a zombie's /proc stat
    state: str = ""
    wchan: str | None = None
    threads: int = 0
    rss: int = 0
    rss_peak: int = 0
    vsize: int = 0  # virtual size: changes when a library is mapped (the live view re-reads maps then)
    cpu: float = 0.0
    anchor_time: float = 0.0  # when the CPU time last moved by more than the slack
    anchor_cpu: float = 0.0
    killed_by_supervisor: bool = False
    notes: list[str] = field(default_factory=list)
    create_time: float | None = None  # psutil's start time: (pid, create_time) is the process
    reaped: bool = False  # its exit status was collected by the supervisor's waitpid
    stopped_since: float | None = None  # when it was first seen stopped, if it is now
    # Seen with its parent's command line: forked, perhaps not exec'd yet (subprocess forks
    # then execs). The line is read again until it changes; a fork child that never execs
    # is asked every tick for its first seconds, then once a second.
    unexeced: bool = False
    cmdline_read_at: float = 0.0
    # Its place in a distributed job, from its environment (read again when it execs).
    rank: ranks.Rank | None = None
    # When the evidence showed it can never finish whatever CPU it uses (wedged.py): from
    # then on its progress is its main thread's CPU time alone.
    wedged_since: float | None = None

    def stalled_for(self, now: float) -> float:
        """Return for how long this process has waited without CPU progress (0 if it runs);
        a wedged one, for how long its main thread has."""
        if not self.alive or (self.wedged_since is None
                              and self.state not in (psutil.STATUS_SLEEPING, psutil.STATUS_DISK_SLEEP)):
            return 0.0
        return now - self.anchor_time

    def idle_for(self, now: float) -> float:
        """For how long this process has done nothing: waiting without CPU progress, or
        stopped (0 if it runs)."""
        if self.alive and self.stopped_since is not None:
            return now - self.stopped_since
        return self.stalled_for(now)


def _wchan(pid: int) -> str | None:
    """Return the kernel function the process sleeps in ("futex_do_wait"), if readable."""
    try:
        with open(f"/proc/{pid}/wchan") as f:
            text = f.read().strip()
    except OSError:
        return None
    return text if text and text != "0" else None


def _stat(pid: int) -> list[bytes] | None:
    """The fields of ``/proc/PID/stat`` after the command name (state first), or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _main_thread_cpu(pid: int) -> float | None:
    """The CPU time of a process's main thread (``/proc/PID/task/PID/stat``), in seconds."""
    try:
        with open(f"/proc/{pid}/task/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS
    except (OSError, IndexError, ValueError):
        return None


def _exit_status(fields: list[bytes]) -> int | None:
    """A zombie's exit status (``stat`` field 52) as a return code: -N for signal N."""
    try:
        status = int(fields[49])
    except (IndexError, ValueError):
        return None
    if os.WIFSIGNALED(status):
        return -os.WTERMSIG(status)
    return os.WEXITSTATUS(status) if os.WIFEXITED(status) else None


def zombie_exit_code(pid: int) -> int | None:
    """Read a zombie's exit status from /proc/<pid>/stat (field 52) before its parent reaps it."""
    fields = _stat(pid)
    if not fields or len(fields) < 50 or fields[0] != b"Z":
        return None
    return _exit_status(fields)


def _last_pid() -> int | None:
    """The PID the kernel handed out last in this PID namespace (``/proc/loadavg``): while
    it stays the same, no process was created."""
    try:
        with open("/proc/loadavg", "rb") as f:
            return int(f.read().split()[-1])
    except (OSError, IndexError, ValueError):
        return None


class Walks:
    """Decide when the process table must be walked again, as cheaply as it can be known.

    A walk reads every process of the machine (``/proc/PID/stat`` each); a tree can only
    have gained a member if a process was created, and the kernel's last PID
    (``/proc/loadavg``) says whether one was. So a walk is due only when that PID moved
    since two walks in a row saw it unchanged (one walk could have raced a fork whose
    child was not yet listed), when ``forget`` was called, or at least every
    ``_WALK_EVERY`` seconds whatever the last PID says. Between walks a tree can only
    lose members: its users keep the last walk's members that still exist.
    Used by the supervisor's ``Tree`` and the pytest plugin's ``TestTree``.
    """

    def __init__(self) -> None:
        self._at_pid: int | None = None  # the last PID when it walked
        self._at = 0.0
        self._confirmed = False  # two walks in a row saw the same last PID

    def due(self) -> bool:
        """Tell whether to walk now; when it says so, it counts the walk as made."""
        marker = _last_pid()
        now = time.monotonic()
        if marker is not None and marker == self._at_pid and self._confirmed and now - self._at < _WALK_EVERY:
            return False
        self._confirmed = marker is not None and marker == self._at_pid
        self._at_pid, self._at = marker, now
        return True

    def forget(self) -> None:
        """Walk again next time (a member was reaped: the last walk is out of date)."""
        self._at_pid = None


def still_there(pids: set[int]) -> set[int]:
    """The PIDs of ``pids`` that still exist (between walks: a tree can only lose members)."""
    return {pid for pid in pids if os.path.exists(f"/proc/{pid}")}


def process_table() -> list[tuple[int, int, int]]:
    """(PID, parent PID, start ticks) of every process: one read of ``/proc/PID/stat`` each."""
    table = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        fields = _stat(int(entry))
        try:
            if fields:
                table.append((int(entry), int(fields[1]), int(fields[19])))
        except (IndexError, ValueError):
            continue
    return table


def _group_and_session(pid: int) -> set[int]:
    """The process group and session IDs of ``pid`` (``/proc/PID/stat``), or none."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return {int(fields[2]), int(fields[3])}
    except (OSError, IndexError, ValueError):
        return set()


# Seconds after a process appears during which its command line is read every tick while
# it is its parent's (subprocess's fork-then-exec takes milliseconds; a loaded machine more).
_EXEC_WATCH = 3.0


def _cmdline(pid: int) -> tuple[str, ...]:
    try:
        return tuple(psutil.Process(pid).cmdline())
    except psutil.Error:  # a zombie has no command line any more
        return ()


def _same_start(a: float | None, b: float | None) -> bool:
    """Tell whether two start times are one process's (unknown ones are given the benefit)."""
    return a is None or b is None or abs(a - b) < 0.005


class Tree:
    """The set of processes belonging to one supervised command.

    ``tracks`` maps each PID to its current process; tracks of earlier processes
    that had the same PID are kept in ``retired``.
    """

    def __init__(self, root: int, token: str, tools: set[int], adopt: float | None = None) -> None:
        self.root = root
        # A subreaper's own child that it did not start itself (the root, its tools) can only
        # be an orphan of the tree, reparented to it: with ``adopt`` (the root's start time,
        # as psutil tells it), such a child born since is a member even when it scrubbed
        # its environment of the token (setsid, then exec with an empty environment).
        self.adopt = adopt
        self.token = token
        self.tools = tools  # our own helpers (watchdog, py-spy): never part of the tree
        self.tracks: dict[int, Track] = {}
        self.retired: list[Track] = []
        # (pid -> start time) of every process found a member, scanned or not: a zombie
        # (whose environment can no longer be read) stays a member until it is reaped.
        self._seen: dict[int, float | None] = {}
        self._me = os.getpid()
        # The last time anything in the tree moved: a process made CPU progress, was born,
        # stopped or ended. A tree is idle only counted from then: a parent that waits in
        # Pool.map on busy workers is waiting, not hung, until the workers stop too.
        self.last_activity: float | None = None
        self._boot = psutil.boot_time()
        self._members: set[int] = set()  # what the last walk found
        self.walks = Walks()

    def quiet_for(self, now: float) -> float:
        """For how long nothing in the tree has moved (0 before the first scan)."""
        return 0.0 if self.last_activity is None else now - self.last_activity

    def _moved(self, now: float) -> None:
        self.last_activity = now if self.last_activity is None else max(self.last_activity, now)

    def all_tracks(self) -> list[Track]:
        """Return every process seen, earlier holders of a reused PID included."""
        return [*self.retired, *self.tracks.values()]

    def _known(self, pid: int, create_time: float | None) -> bool:
        track = self.tracks.get(pid)
        if track is not None and track.reaped:
            return False
        if track is not None and _same_start(track.create_time, create_time):
            return True
        return pid in self._seen and _same_start(self._seen[pid], create_time)

    def _belongs(self, pid: int, ppid: int, members: set[int], create_time: float | None = None) -> bool:
        if pid in self.tools:
            return False
        if pid == self.root and not self._root_reaped():
            return True
        if self._known(pid, create_time) or ppid in members:
            return True
        if ppid != self._me:
            return False
        try:  # reparented to us as subreaper: ours if it carries our token
            if psutil.Process(pid).environ().get(TOKEN_VAR) == self.token:
                return True
        except psutil.Error:
            pass
        if self.adopt is None or create_time is None or create_time < self.adopt:
            return False
        # An orphan of one of our tools (py-spy's own children) is not the command's: the
        # tools start in sessions of their own, which their descendants keep.
        return not (_group_and_session(pid) & self.tools)

    def _root_reaped(self) -> bool:
        root = self.tracks.get(self.root)
        return root is not None and root.reaped

    def start_time(self, pid: int) -> float | None:
        """When ``pid`` started, on the clock of this tree's tracks (psutil's: boot time plus
        ticks), or None when it is gone."""
        fields = _stat(pid)
        try:
            return self.started_at(int(fields[19])) if fields else None
        except (IndexError, ValueError):
            return None

    def started_at(self, ticks: int) -> float:
        """Turn a start time in clock ticks since boot into seconds on this tree's clock."""
        return ticks / _CLOCK_TICKS + self._boot  # psutil's formula, so its times compare

    def members(self) -> set[int]:
        """Return the PIDs of the tree now, walking down from the supervisor.

        The walk reads the whole process table, which costs in proportion to every process
        of the machine; ``Walks`` skips it while no process was created anywhere.
        """
        if not self.walks.due():
            return still_there(self._members)
        parents: dict[int, list[tuple[int, float | None]]] = {}
        for pid, ppid, ticks in process_table():
            parents.setdefault(ppid, []).append((pid, self.started_at(ticks)))
        members: set[int] = set()
        queue = [(child, ctime, self._me) for child, ctime in parents.get(self._me, [])]
        while queue:
            pid, ctime, ppid = queue.pop()
            if not self._belongs(pid, ppid, members, ctime):
                continue
            members.add(pid)
            self._seen[pid] = ctime
            queue += [(child, c, pid) for child, c in parents.get(pid, [])]
        self._members = members
        return members

    def _observe(self, pid: int, now: float) -> None:
        """Read one process's ``/proc/PID/stat`` (state, CPU time, threads, RSS, start) and
        update its track: one read a tick per process, where psutil would make four."""
        fields = _stat(pid)
        if fields is None:
            return
        try:
            letter = fields[0].decode()
            state = _STATES.get(letter, "?")
            ppid, cpu_ticks = int(fields[1]), int(fields[11]) + int(fields[12])
            threads, started, rss = int(fields[17]), self.started_at(int(fields[19])), int(fields[21])
            vsize = int(fields[20])
        except (IndexError, ValueError, UnicodeDecodeError):
            return
        track = self.tracks.get(pid)
        if track is not None and (track.reaped or not _same_start(track.create_time, started)):
            track.alive = False  # that process is gone; this one reuses its PID
            self.retired.append(track)
            track = None
        fresh = track is None
        if track is None:
            track = Track(pid, ppid, _cmdline(pid), now, now, anchor_time=now, create_time=started)
            parent = self.tracks.get(ppid)
            # A parent not tracked yet (seen later in this scan, or outside the tree) is
            # compared at the next read.
            track.unexeced = bool(track.cmdline) and (parent is None or track.cmdline == parent.cmdline)
            track.cmdline_read_at = now
            track.rank = ranks.read(pid)
            self.tracks[pid] = track
        elif track.unexeced and (now - track.first_seen < _EXEC_WATCH or now - track.cmdline_read_at >= 1.0):
            self._read_cmdline_again(track, now)
        if fresh or state != track.state and psutil.STATUS_ZOMBIE in (state, track.state):
            self._moved(now)  # born, or ended
        track.last_seen, track.state = now, state
        if state in STOPPED:
            if track.stopped_since is None:
                track.stopped_since = now
                self._moved(now)
        elif track.stopped_since is not None:
            track.stopped_since = None
            self._moved(now)  # continued
        if state == psutil.STATUS_ZOMBIE:  # exited; its parent has not reaped it yet
            if track.exit_code is None:
                track.exit_code = _exit_status(fields)
            return
        track.threads = threads
        track.rss, track.vsize = rss * _PAGE_SIZE, vsize
        # Where a waiting process waits; a running one waits nowhere.
        track.wchan = _wchan(pid) if state in _WAITING else None
        track.cpu = cpu_ticks / _CLOCK_TICKS
        track.rss_peak = max(track.rss_peak, track.rss)
        allowed = _CPU_SLACK + _CPU_FRACTION * (now - track.anchor_time)
        progress = track.cpu if track.wedged_since is None else _main_thread_cpu(pid)
        if progress is None:
            return
        if fresh or progress - track.anchor_cpu > allowed:
            track.anchor_time, track.anchor_cpu = now, progress
            self._moved(now)

    def wedge(self, pid: int, now: float) -> bool:
        """Count ``pid``'s CPU as progress only where its main thread uses it, from ``now``
        (wedged.py: its other threads cannot make the program progress any more); False
        while the process is not tracked yet (ask again after the next scan)."""
        track = self.tracks.get(pid)
        if track is None:
            return False
        main = _main_thread_cpu(pid)
        if track.alive and track.wedged_since is None and main is not None:
            track.wedged_since, track.anchor_time, track.anchor_cpu = now, now, main
        return True

    def _read_cmdline_again(self, track: Track, now: float) -> None:
        """A process that had its parent's command line may have exec'd since: read it again."""
        track.cmdline_read_at = now
        cmdline = _cmdline(track.pid)
        parent = self.tracks.get(track.ppid)
        if cmdline and cmdline != track.cmdline:
            track.cmdline, track.unexeced = cmdline, False
            track.rank = ranks.read(track.pid)  # an exec may have been given another environment
        elif parent is None or not cmdline or parent.cmdline != cmdline:
            track.unexeced = False  # the program it runs is its own (or it is gone)

    def scan(self, now: float | None = None) -> set[int]:
        """Observe every member; mark the ones that disappeared; return the live PIDs."""
        now = time.monotonic() if now is None else now
        members = self.members()
        for pid in members:
            self._observe(pid, now)
        for pid, track in self.tracks.items():
            if pid not in members and track.alive:
                track.alive = False
                self._moved(now)
        return {p for p in members if self.tracks.get(p) and self.tracks[p].state != "zombie"}

    def record_exit(self, pid: int, code: int) -> None:
        """Store an exit status the supervisor reaped itself (even of a process never scanned)."""
        track = self.tracks.get(pid)
        if track is None or track.reaped:  # never scanned (or its PID was reused, unseen)
            if track is not None:
                self.retired.append(track)
            now = time.monotonic()
            track = self.tracks[pid] = Track(pid, self._me, (), now, now, anchor_time=now)
        track.exit_code = code
        self.walks.forget()  # a reaped process is no member any more: walk again
        if track.alive:
            self._moved(time.monotonic())
        track.alive = False
        track.reaped = True
