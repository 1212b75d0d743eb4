"""Kill a supervised tree if its supervisor dies first (standard library only).

The supervisor starts this file as ``python -I watchdog.py TOKEN`` with a pipe on
stdin and writes ``done`` to it when it has cleaned up. End of file without
``done`` means the supervisor died (SIGKILL, crash): the watchdog then kills
every process whose environment carries ``GPUDOCTOR_RUN=TOKEN``, so no process
of the tree outlives gpudoctor even when gpudoctor cannot clean up itself.
"""

from __future__ import annotations

import os
import signal
import sys
import time


def _carriers(marker: bytes) -> set[int]:
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


def kill_marked(token: str) -> None:
    """SIGSTOP then SIGKILL every carrier of the token until none is left."""
    marker = f"GPUDOCTOR_RUN={token}".encode()
    for _ in range(100):
        pids = _carriers(marker)
        if not pids:
            return
        for signum in (signal.SIGSTOP, signal.SIGKILL):
            for pid in pids:
                try:
                    os.kill(pid, signum)
                except OSError:
                    continue
        time.sleep(0.05)


def _clean_up_and_exit(token: str) -> None:
    kill_marked(token)
    os._exit(0)


def main(argv: list[str]) -> int:
    """Wait for the supervisor's word; clean up if it never comes."""
    token = argv[1]
    # The terminal's Ctrl-C and hangup are the supervisor's to handle.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, lambda *_: _clean_up_and_exit(token))
    received = sys.stdin.buffer.read()
    if b"done" not in received:
        kill_marked(token)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
