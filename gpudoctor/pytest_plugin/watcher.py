"""The watcher: a helper process that watches one test's process tree from outside it.

It runs outside the test process on purpose: a sampling or timer thread inside it
would make every fork of the test a fork with threads (CPython 3.12+ warns about
exactly that), and a hung test process could not run it anyway.

The plugin starts ``python -m gpudoctor.pytest_plugin.watcher`` with pipes. Commands
arrive on stdin, one JSON object per line, and each gets one JSON line back (their shapes,
for the type checker, are in watch_protocol.py):

* at start, unasked: ``{"ready": true, "nvml": reason or null}``
* ``{"cmd": "arm", "seconds": S, "hang_after": H, "native_stacks": B, "dump_fd": FD,
  "start_epoch": T, "exclude": [PID...]}``: from now, the test has S seconds; then its processes' stacks are
  dumped, the hang diagnosed, and the test's main thread interrupted by signal. When at
  S the tree has just gone quiet (nothing moved for a moment, but not yet for H), the
  watcher waits until it has been quiet for H (at most H more): a tree that went idle at
  S - 1 is judged by how long it waited, not by how long the test ran before. ``exclude``:
  the plugin's own children of the test process (its watchdog), not part of the tree.
* ``{"cmd": "sample"}``: one GPU reading now; the reply carries every reading so far.
* ``{"cmd": "done"}``: a last reading; after a hang, the tree's leftovers are killed.
  The reply adds the hang diagnosis and the killed PIDs; then the watcher exits.

End of input without ``done`` means the test process died: the tree is killed.

When the interrupt does not bring the test back (its main thread is blocked in native
code, where no Python signal handler runs), the watcher kills the test's children and
writes a byte to ``--rescue-fd``: the plugin's rescue thread in the test process then
fails the test and ends the session with its summary. Should that thread not run
either (native code that holds the GIL), the test process is killed.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import signal
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

from gpudoctor.probe import launch, reaper, watchdog
from gpudoctor.probe.supervise import Limits
from gpudoctor.pytest_plugin.gpu_readings import GpuReader
from gpudoctor.pytest_plugin.interrupt import INTERRUPT_SIGNAL, signal_main_thread
from gpudoctor.pytest_plugin.watch_protocol import Arm, Final, Readings
from gpudoctor.pytest_plugin.watch_tree import TestTree, diagnose_hang

_SCAN = 0.25  # how often a hang watch looks at the tree's CPU progress
_KILL_AFTER = 10.0  # no "done" this long after the interrupt: the test is stuck, free it
_REPEAT = 5.0  # and interrupt it again this often
_GIVE_UP = 40.0  # then kill the test process itself rather than hang the session
_BUSY = 2 * _SCAN  # moved within this long at the deadline: busy, judged at once


class Watch:
    """The state of one watch, advanced by ``tick`` and by commands."""

    def __init__(self, test_pid: int, workdir: launch.Workdir, token: str, gpu: bool, interval: float,
                 rescue_fd: int | None = None):
        self.tree = TestTree(test_pid, token, workdir.members)
        self.rescue_fd = rescue_fd
        self.workdir = workdir
        self.token = token
        self.reader = GpuReader.open() if gpu else GpuReader(reason="not asked")
        self.interval = interval
        self.next_read = 0.0
        self.next_scan = 0.0
        self.arm: Arm | None = None
        self.start = 0.0
        self.fired_at: float | None = None
        self.next_interrupt = 0.0
        self.freed = False
        self.hang: dict[str, Any] | None = None
        self.killed: set[int] = set()
        self.tools: set[int] = set()

    def wakeup(self) -> float:
        """Return when ``tick`` has something to do next."""
        times = [time.monotonic() + 1.0]
        if self.reader.reason is None:
            times.append(self.next_read)
        if self.arm is not None and self.fired_at is None:
            times += [self.next_scan, self.start + self.arm["seconds"]]
        if self.fired_at is not None:
            times.append(self.next_interrupt)
        return min(times)

    def tick(self, now: float) -> None:
        if self.reader.reason is None and now >= self.next_read:
            self.reader.read(self.tree.members())
            self.next_read = now + self.interval
        if self.arm is None:
            return
        if self.fired_at is None:
            if now >= self.next_scan:
                self.tree.scan(now)
                self.next_scan = now + _SCAN
            if now >= self.start + self.arm["seconds"] and not self._settling(now):
                self.fire()
            return
        self.escalate(now)

    def _settling(self, now: float) -> bool:
        """Tell whether, past the deadline, the tree has just gone quiet: wait to see if it stays so."""
        assert self.arm is not None
        hang_after = self.arm["hang_after"]
        quiet = self.tree.quiet_for(now)
        return _BUSY <= quiet < hang_after and now < self.start + self.arm["seconds"] + hang_after

    def fire(self) -> None:
        """Dump and diagnose the tree, then interrupt the test's main thread."""
        assert self.arm is not None
        limits = Limits(timeout=self.arm["seconds"], hang_after=self.arm["hang_after"], grace=1.0,
                        native_stacks=self.arm["native_stacks"])
        self.hang = diagnose_hang(self.tree, self.start, self.arm["start_epoch"], limits,
                                  self.workdir, self.arm["dump_fd"], self.tools)
        self.fired_at = time.monotonic()
        self.next_interrupt = self.fired_at + _REPEAT
        signal_main_thread(self.tree.root, INTERRUPT_SIGNAL)

    def escalate(self, now: float) -> None:
        """The test did not come back after the interrupt: free it, then give up on it."""
        assert self.fired_at is not None
        waited = now - self.fired_at
        if waited >= _GIVE_UP:
            print(f"gpudoctor: the test process {self.tree.root} did not return {_GIVE_UP:.0f} s "
                  "after hang_timeout interrupted it, and its rescue thread did not run either "
                  "(blocked in native code that holds the GIL?); killing it", file=sys.stderr, flush=True)
            self.kill()
            os.kill(self.tree.root, signal.SIGKILL)
            raise SystemExit(1)
        if waited >= _KILL_AFTER and not self.freed:
            self.freed = True
            self.kill()
            self.rescue()
        if now >= self.next_interrupt:
            self.next_interrupt = now + _REPEAT
            signal_main_thread(self.tree.root, INTERRUPT_SIGNAL)

    def kill(self) -> None:
        """Kill the test's children, never the test process: every process found in its tree
        (a member stays one after its parent died), every one its fork hooks named, and
        their descendants, even those that left its session and ignore SIGTERM."""
        self.killed |= self.tree.running()
        reaper.kill_tree(self.tree.running, lambda pids: None, 1.0)
        named = watchdog.listed(str(self.workdir.members), str(self.workdir.events))
        before = watchdog.targets(self.token, named, {self.tree.root})
        watchdog.kill_marked(self.token, named, spare=frozenset({self.tree.root}))
        self.killed |= before

    def rescue(self) -> None:
        """Wake the test process's rescue thread: its main thread is stuck for good."""
        if self.rescue_fd is None:
            return
        try:
            os.write(self.rescue_fd, b"S")
        except OSError:
            pass

    def handle(self, command: dict[str, Any]) -> Mapping[str, object]:
        """Answer one command from the plugin."""
        name = command.get("cmd")
        if name == "arm":
            self.arm = cast(Arm, command)  # the plugin's own line (item_watch builds it as an Arm)
            self.tree.exclude |= {p for p in command.get("exclude") or () if isinstance(p, int)}
            self.tree.walks.forget()  # walk again: membership changed with the exclusions
            self.start = time.monotonic()
            self.tree.scan(self.start)
            return {"ok": True}
        if name == "sample":
            self.reader.read(self.tree.members())
            return self.readings()
        if name == "done":
            if self.fired_at is not None:
                self.kill()
            self.reader.read(self.tree.members())
            final: Final = {**self.readings(), "hang": self.hang, "killed": sorted(self.killed)}
            return final
        return {"error": f"unknown command {name!r}"}

    def readings(self) -> Readings:
        return {"nvml": self.reader.reason, "rounds": self.reader.rounds, "notes": self.reader.notes,
                "processes": {str(pid): info for pid, info in self.tree.info.items()}}


def _reply(document: Mapping[str, object]) -> None:
    sys.stdout.write(json.dumps(document) + "\n")
    sys.stdout.flush()


def serve(watch: Watch) -> int:
    """Run the watch until ``done`` or until the test process goes away."""
    fd = sys.stdin.fileno()
    pending = b""
    while True:
        now = time.monotonic()
        readable, _, _ = select.select([fd], [], [], max(0.0, watch.wakeup() - now))
        if readable:
            chunk = os.read(fd, 65536)
            if not chunk:  # the test process died without saying done
                watch.kill()
                return 0
            pending += chunk
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                command = json.loads(line)
                _reply(watch.handle(command))
                if command.get("cmd") == "done":
                    return 0
        watch.tick(time.monotonic())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gpudoctor-watcher")
    parser.add_argument("--pid", type=int, required=True)
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--gpu", action="store_true")
    parser.add_argument("--interval", type=float, default=0.5)
    parser.add_argument("--rescue-fd", type=int)
    args = parser.parse_args(argv)
    watch = Watch(args.pid, launch.Workdir(args.workdir), args.token, args.gpu, args.interval, args.rescue_fd)
    watch.reader.read(watch.tree.members())
    _reply({"ready": True, "nvml": watch.reader.reason})
    return serve(watch)


if __name__ == "__main__":
    sys.exit(main())
