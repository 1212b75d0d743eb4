"""Kill a supervised tree if its supervisor dies first (standard library only).

The probe's supervisor, and the pytest plugin for a ``hang_timeout`` test, start this
file as ``python -I -S watchdog.py TOKEN GRACE [MEMBERS] [options]`` in a session of
its own, with a pipe on stdin, and write ``done`` to it once they have cleaned up. End
of file without ``done`` means the supervisor died (SIGKILL, a signal to its whole
process group, a crash). A session of its own, because a CI runner cancelling a job
kills the job's process group (``kill -9 -PGID``): the watchdog must outlive it.

``--parent PID:TICKS`` watches that process too (on a pidfd): its death counts as
the supervisor's. The pytest plugin needs it: a child the test forked holds a copy
of the pipe's write end, so the pipe stays open as long as the test's hung workers
live, whoever else died.

When the supervisor dies without ``done``, every process of the tree is stopped and
killed: those whose environment carries ``GPUDOCTOR_RUN=TOKEN`` (exec'd descendants,
even after ``setsid``), those the supervisor named in the file MEMBERS as ``PID
START`` lines, those the fork hooks named in ``--events`` (JSON lines with ``pid`` and
``ticks``; a forked child's environment is its parent's, without the token), those
given with ``--also PID:TICKS``, and every descendant of these. ``START``/``TICKS`` is a
start time in clock ticks since boot: a PID the kernel gave to a later process is
spared. ``--remove DIR`` is deleted last.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import shutil
import signal
import sys
import time


def carriers(marker: bytes) -> set[int]:
    """Return the PIDs whose initial environment contains ``marker``."""
    found: set[int] = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if marker in f.read().split(b"\0"):
                    found.add(int(entry))
        except OSError:
            continue
    return found


def _stat(pid: int) -> list[bytes] | None:
    """The fields of ``/proc/PID/stat`` after the command name (state first), or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None


def start_ticks(pid: int) -> int | None:
    """When ``pid`` started, in clock ticks since boot (``/proc/PID/stat`` field 22), or None."""
    fields = _stat(pid)
    try:
        return int(fields[19]) if fields else None
    except (IndexError, ValueError):
        return None


def is_running(pid: int, ticks: int | None = None) -> bool:
    """Tell whether ``pid`` runs (a zombie does not) and, given ``ticks``, is the process
    that started then."""
    fields = _stat(pid)
    if not fields or fields[0] == b"Z":
        return False
    try:
        return ticks is None or int(fields[19]) == ticks
    except (IndexError, ValueError):
        return False


def listed(members: str | None, events: str | None = None) -> dict[int, int]:
    """The processes named in the members file and the events file (PID -> start ticks)."""
    found: dict[int, int] = {}
    for path in (members, events):
        if not path:
            continue
        try:
            with open(path, "rb") as f:
                lines = f.read().splitlines()
        except OSError:
            continue
        for line in lines:
            words = line.split()
            if path is members:
                if len(words) == 2 and words[0].isdigit() and words[1].isdigit():
                    found[int(words[0])] = int(words[1])
                continue
            try:
                event = json.loads(line)
            except ValueError:  # a process killed mid-write leaves half a line
                continue
            if isinstance(event, dict) and isinstance(event.get("pid"), int) and isinstance(event.get("ticks"), int):
                found[event["pid"]] = event["ticks"]
    return found


def _children() -> dict[int, list[int]]:
    """Return parent PID -> child PIDs of every process, zombies left out."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        fields = _stat(int(entry))
        if not fields or fields[0] == b"Z":
            continue
        try:
            children.setdefault(int(fields[1]), []).append(int(entry))
        except (IndexError, ValueError):
            continue
    return children


def targets(token: str, members: dict[int, int], spare: set[int]) -> set[int]:
    """Return the live processes of the tree: carriers, listed ones, and their descendants."""
    found = carriers(f"GPUDOCTOR_RUN={token}".encode())
    found |= {pid for pid, ticks in members.items() if is_running(pid, ticks)}
    children = _children()
    queue = list(found)
    while queue:
        for child in children.get(queue.pop(), []):
            if child not in found:
                found.add(child)
                queue.append(child)
    return {pid for pid in found - spare - {os.getpid()} if is_running(pid)}


def kill_marked(token: str, members: dict[int, int] | None = None, more: tuple[str | None, str | None] = (None, None),
                spare: frozenset[int] = frozenset()) -> None:
    """SIGSTOP then SIGKILL the tree, round after round, until nothing of it is left.

    SIGSTOP first, so that no process forks between two rounds; no SIGTERM: the tree
    had its chance, and a deadlocked process may ignore it anyway. ``more``: a members
    file and an events file, read again each round (a dying supervisor may still be
    naming processes).
    """
    for _ in range(200):
        named = {**(members or {}), **listed(*more)}
        pids = targets(token, named, set(spare))
        if not pids:
            return
        for signum in (signal.SIGSTOP, signal.SIGKILL):
            for pid in pids:
                try:
                    os.kill(pid, signum)
                except OSError:
                    continue
        time.sleep(0.02)


# After a SIGTERM of its own the watchdog gives the supervisor this long beyond its
# grace period (stack dumps come first) to stop the tree in order and say ``done``.
_TERM_MARGIN = 3.0
_POLL = 0.5  # without a pidfd (Linux before 5.3): how often the parent's life is checked


def _pair(text: str) -> tuple[int, int]:
    pid, _, ticks = text.partition(":")
    return int(pid), int(ticks)


def _wait_for_word(stdin: int, wakeup: int, terminated: list[float], patience: float,
                   parent: tuple[int, int] | None) -> bool:
    """Read stdin until ``done``; return whether the supervisor said it.

    Returns False at end of file without ``done`` (the supervisor died), when the
    ``parent`` process ended, or when ``patience`` seconds have passed since a SIGTERM
    (recorded in ``terminated``).
    """
    pidfd: int | None = None
    if parent is not None:
        try:
            pidfd = os.pidfd_open(parent[0])
        except (AttributeError, OSError):
            pidfd = None
        if not is_running(*parent):  # gone before the pidfd was opened, or its PID reused
            return False
    watched = [stdin, wakeup] + ([pidfd] if pidfd is not None else [])
    received = b""
    while True:
        timeout = _POLL if parent is not None and pidfd is None else None
        if terminated:
            left = terminated[0] + patience - time.monotonic()
            if left <= 0:
                return False
            timeout = left if timeout is None else min(timeout, left)
        readable, _, _ = select.select(watched, [], [], timeout)
        if wakeup in readable:  # a signal arrived: recompute the deadline
            os.read(wakeup, 512)
        if stdin in readable:
            chunk = os.read(stdin, 4096)
            received += chunk
            if b"done" in received.split():
                return True
            if not chunk:
                return False
        if (pidfd is not None and pidfd in readable) or \
                (parent is not None and pidfd is None and not is_running(*parent)):
            return False


def main(argv: list[str]) -> int:
    """Wait for the supervisor's word; clean up if it never comes."""
    parser = argparse.ArgumentParser(prog="watchdog.py")
    parser.add_argument("token")
    parser.add_argument("grace", type=float, nargs="?", default=3.0)
    parser.add_argument("members", nargs="?")
    parser.add_argument("--parent", type=_pair)
    parser.add_argument("--events")
    parser.add_argument("--also", type=_pair, action="append", default=[])
    parser.add_argument("--remove")
    args = parser.parse_args(argv[1:])
    # The watchdog runs in a session of its own, so signals to the supervisor's process
    # group (Ctrl-C, Ctrl-\, kill -- -PGID) do not reach it; these are ignored in case
    # one is sent to it anyway: handling them is the supervisor's job.
    for name in ("SIGINT", "SIGHUP", "SIGQUIT", "SIGTSTP", "SIGTTIN", "SIGTTOU", "SIGPIPE"):
        signal.signal(getattr(signal, name), signal.SIG_IGN)
    # SIGTERM (a shutdown terminating every process) leaves the supervisor its grace
    # period to stop the tree in order; only then does the watchdog sweep.
    wakeup_read, wakeup_write = os.pipe()
    os.set_blocking(wakeup_write, False)
    signal.set_wakeup_fd(wakeup_write)
    terminated: list[float] = []

    def on_term(signum: int, frame: object) -> None:
        if not terminated:
            terminated.append(time.monotonic())

    signal.signal(signal.SIGTERM, on_term)
    if _wait_for_word(sys.stdin.buffer.fileno(), wakeup_read, terminated, args.grace + _TERM_MARGIN, args.parent):
        return 0
    spare = frozenset({args.parent[0]} if args.parent else set())
    kill_marked(args.token, dict(args.also), (args.members, args.events), spare)
    if args.remove:
        shutil.rmtree(args.remove, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
