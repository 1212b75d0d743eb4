"""The watcher: a helper process that watches one test's process tree from outside it.

It runs outside the test process on purpose: a sampling or timer thread inside it
would make every fork of the test a fork with threads (CPython 3.12+ warns about
exactly that), and a hung test process could not run it anyway.

The plugin starts ``python -m gpudoctor.pytest_plugin.watcher`` with pipes. Commands
arrive on stdin, one JSON object per line, and each gets one JSON line back:

* at start, unasked: ``{"ready": true, "nvml": reason or null}``
* ``{"cmd": "arm", "seconds": S, "hang_after": H, "native_stacks": B, "dump_fd": FD,
  "start_epoch": T}``: from now, the test has S seconds; then its processes' stacks are
  dumped, the hang diagnosed, and the test's main thread interrupted by signal.
* ``{"cmd": "sample"}``: one GPU reading now; the reply carries every reading so far.
* ``{"cmd": "done"}``: a last reading; after a hang, the tree's leftovers are killed.
  The reply adds the hang diagnosis and the killed PIDs; then the watcher exits.

End of input without ``done`` means the test process died: the tree is killed.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import signal
import sys
import time
from pathlib import Path
from typing import Any

from gpudoctor.probe import launch, reaper, watchdog
from gpudoctor.probe.supervise import Limits
from gpudoctor.pytest_plugin.gpu_readings import GpuReader
from gpudoctor.pytest_plugin.interrupt import INTERRUPT_SIGNAL, signal_main_thread
from gpudoctor.pytest_plugin.watch_tree import TestTree, diagnose_hang

_SCAN = 0.25  # how often a hang watch looks at the tree's CPU progress
_KILL_AFTER = 10.0  # no "done" this long after the interrupt: the test is stuck, free it
_REPEAT = 5.0  # and interrupt it again this often
_GIVE_UP = 60.0  # then stop the test process itself rather than hang the session


class Watch:
    """The state of one watch, advanced by ``tick`` and by commands."""

    def __init__(self, test_pid: int, workdir: launch.Workdir, token: str, gpu: bool, interval: float):
        self.tree = TestTree(test_pid)
        self.workdir = workdir
        self.token = token
        self.reader = GpuReader.open() if gpu else GpuReader(reason="not asked")
        self.interval = interval
        self.next_read = 0.0
        self.next_scan = 0.0
        self.arm: dict[str, Any] | None = None
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
            if now >= self.start + self.arm["seconds"]:
                self.fire()
            return
        self.escalate(now)

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
                  "after hang_timeout interrupted it (blocked in native code?); killing it",
                  file=sys.stderr, flush=True)
            self.kill()
            os.kill(self.tree.root, signal.SIGKILL)
            raise SystemExit(1)
        if waited >= _KILL_AFTER and not self.freed:
            self.freed = True
            self.kill()
        if now >= self.next_interrupt:
            self.next_interrupt = now + _REPEAT
            signal_main_thread(self.tree.root, INTERRUPT_SIGNAL)

    def kill(self) -> None:
        """Kill the test's children (never the test process), and escaped exec'd descendants."""
        self.killed |= self.tree.running()
        reaper.kill_tree(self.tree.running, lambda pids: None, 1.0)
        watchdog.kill_marked(self.token)

    def handle(self, command: dict[str, Any]) -> dict[str, Any]:
        """Answer one command from the plugin."""
        name = command.get("cmd")
        if name == "arm":
            self.arm = command
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
            return {**self.readings(), "hang": self.hang, "killed": sorted(self.killed)}
        return {"error": f"unknown command {name!r}"}

    def readings(self) -> dict[str, Any]:
        return {"nvml": self.reader.reason, "rounds": self.reader.rounds, "notes": self.reader.notes,
                "processes": {str(pid): info for pid, info in self.tree.info.items()}}


def _reply(document: dict[str, Any]) -> None:
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
    args = parser.parse_args(argv)
    watch = Watch(args.pid, launch.Workdir(args.workdir), args.token, args.gpu, args.interval)
    watch.reader.read(watch.tree.members())
    _reply({"ready": True, "nvml": watch.reader.reason})
    return serve(watch)


if __name__ == "__main__":
    sys.exit(main())
