"""Keep a process tree from escaping: subreaper, reaping, and killing the whole tree."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import threading
import time
from collections.abc import Callable

import psutil

_PR_SET_CHILD_SUBREAPER = 36
_PR_GET_CHILD_SUBREAPER = 37


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def become_subreaper() -> str | None:
    """Make orphaned descendants reparent to this process; return why not, or None.

    Without it a double-forked grandchild would be reparented to init and could
    outlive the supervisor unseen.
    """
    if not os.path.exists("/proc/self"):
        return "not Linux: orphaned descendants cannot be followed"
    try:
        if _libc().prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
            return f"prctl(PR_SET_CHILD_SUBREAPER) failed: {os.strerror(ctypes.get_errno())}"
    except OSError as error:
        return f"prctl unavailable: {error}"
    return None


def is_subreaper() -> bool | None:
    """Return whether this process is a child subreaper (None: cannot tell)."""
    if not os.path.exists("/proc/self"):
        return None
    flag = ctypes.c_int(0)
    try:
        if _libc().prctl(_PR_GET_CHILD_SUBREAPER, ctypes.byref(flag), 0, 0, 0) != 0:
            return None
    except OSError:
        return None
    return bool(flag.value)


def stop_being_subreaper() -> None:
    """Undo ``become_subreaper`` (a supervisor run inside a longer-lived process)."""
    try:
        _libc().prctl(_PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
    except OSError:
        pass


def decode_status(status: int) -> int:
    """Turn a waitpid status into subprocess's convention: exit code, or -signal."""
    if os.WIFSIGNALED(status):
        return -os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


def reap(pids: set[int], record: Callable[[int, int], None]) -> None:
    """Collect the exit status of each of ``pids`` that is our child and has exited."""
    for pid in pids:
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:  # not our child (any more)
            continue
        if done == pid:
            record(pid, decode_status(status))


def _signal_all(pids: set[int], signum: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, signum)
        except (ProcessLookupError, PermissionError):
            continue


def kill_tree(
    members: Callable[[], set[int]],
    reap_members: Callable[[set[int]], None],
    grace: float,
    process_group: int | None = None,
    cut_short: threading.Event | None = None,
) -> set[int]:
    """SIGTERM (then SIGCONT) every process of the tree, SIGKILL what is left after
    ``grace`` seconds.

    ``process_group`` is signalled as a whole first; pass it only while its leader
    is unreaped (alive or a zombie of ours), since the PID of a reaped leader whose
    group is empty can already belong to an unrelated process.

    ``members`` is called again on each round because a dying tree can still fork;
    the SIGKILL rounds first SIGSTOP everything so that nothing forks in between.
    Ends when the tree is gone and its zombies reaped. Return the PIDs that needed SIGKILL.
    ``cut_short`` set (a second Ctrl-C) ends the grace period at once.
    """
    if process_group is not None:
        for signum in (signal.SIGTERM, signal.SIGCONT):
            try:
                os.killpg(process_group, signum)
            except (ProcessLookupError, PermissionError):
                pass
    first = members()
    _signal_all(first, signal.SIGTERM)
    # A stopped process (SIGSTOP, a debugger's hold) acts on SIGTERM only once continued.
    _signal_all(first, signal.SIGCONT)
    deadline = time.monotonic() + grace
    while _live(members, reap_members) and time.monotonic() < deadline:
        if cut_short is not None and cut_short.is_set():
            break
        time.sleep(0.05)
    killed: set[int] = set()
    for _ in range(100):  # a fork bomb can refill the tree between two rounds
        live = _live(members, reap_members)
        if not live:
            break
        _signal_all(live, signal.SIGSTOP)
        _signal_all(live, signal.SIGKILL)
        killed |= live
        time.sleep(0.02)
    # Zombies whose parents died are reparented to us (subreaper) a moment later.
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline:
        left = members()
        if not left:
            break
        reap_members(left)
        time.sleep(0.02)
    return killed


def _live(members: Callable[[], set[int]], reap_members: Callable[[set[int]], None]) -> set[int]:
    """Reap what has exited; return the members still running."""
    current = members()
    reap_members(current)
    return {p for p in current if running(p)}


def running(pid: int) -> bool:
    """Return whether ``pid`` exists and is not a zombie."""
    try:
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False
