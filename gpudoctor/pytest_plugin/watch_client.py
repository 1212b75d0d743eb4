"""The test process's end of the watcher: start it, send it commands, read its answers."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
from collections.abc import Mapping
from typing import Any, cast

from gpudoctor.probe import launch
from gpudoctor.pytest_plugin.watch_protocol import Final, Readings

# The instrumentation's variables: the watcher is not part of the test's tree.
_INSTRUMENT_VARS = ("GPUDOCTOR_EVENTS", "GPUDOCTOR_STACKS", "GPUDOCTOR_DUMP_SIGNAL")
_START_TIMEOUT = 60.0  # a loaded CI machine can take seconds to start an interpreter
_REPLY_TIMEOUT = 120.0  # "done" after a hang includes py-spy and killing a tree


class WatcherError(RuntimeError):
    """The watcher did not start or did not answer; the checks that need it cannot run."""


class WatcherClient:
    """One watcher process, watching this process's tree for one test."""

    def __init__(self, workdir: launch.Workdir, token: str, gpu: bool, interval: float,
                 rescue_fd: int | None = None) -> None:
        env = {k: v for k, v in os.environ.items() if k not in _INSTRUMENT_VARS}
        command = [sys.executable, "-m", "gpudoctor.pytest_plugin.watcher", "--pid", str(os.getpid()),
                   "--workdir", str(workdir.root), "--token", token, "--interval", str(interval)]
        if gpu:
            command.append("--gpu")
        if rescue_fd is not None:
            command += ["--rescue-fd", str(rescue_fd)]
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env,
                                        pass_fds=() if rescue_fd is None else (rescue_fd,))
        self.final: Final | None = None
        self.ready = self._read(_START_TIMEOUT)

    def _read(self, timeout: float) -> dict[str, Any]:
        assert self.process.stdout is not None
        readable, _, _ = select.select([self.process.stdout], [], [], timeout)
        line = self.process.stdout.readline() if readable else b""
        if not line:
            self.close()
            raise WatcherError(f"gpudoctor's watcher did not answer within {timeout:.0f} s"
                               if not readable else "gpudoctor's watcher exited")
        document: dict[str, Any] = json.loads(line)
        return document

    def request(self, command: Mapping[str, object], timeout: float = _REPLY_TIMEOUT) -> dict[str, Any]:
        """Send one command and return the watcher's answer."""
        assert self.process.stdin is not None
        try:
            self.process.stdin.write((json.dumps(command) + "\n").encode())
            self.process.stdin.flush()
        except (BrokenPipeError, ValueError):
            raise WatcherError("gpudoctor's watcher exited") from None
        return self._read(timeout)

    def sample(self) -> Readings:
        """Ask for a GPU reading now; return every reading so far."""
        return cast(Readings, self.request({"cmd": "sample"}))

    def finish(self) -> Final:
        """Say done, wait for the final readings, and let the watcher exit."""
        if self.final is None:
            self.final = cast(Final, self.request({"cmd": "done"}))
            self.close()
        return self.final

    def close(self) -> None:
        """End the watcher if it still runs (closing its input also tells it to clean up)."""
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                stream.close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
