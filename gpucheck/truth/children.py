"""Run a child program with the frameworks' interpreter and read the one JSON line it prints.

A child that crashes, hangs or prints no JSON becomes a :class:`ChildResult` saying so:
the check records it and goes on (a crash in one framework must not hide the others).
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class ChildResult:
    """What one child printed, or why it printed nothing usable."""

    report: dict[str, Any] | None  # the last JSON object of its standard output
    returncode: int | None  # None: killed at the timeout
    stderr_tail: str
    seconds: float

    @property
    def outcome(self) -> str:
        """"ok", "timeout", "crash" (no JSON and a non-zero status) or "no-output"."""
        if self.returncode is None:
            return "timeout"
        if self.report is not None:
            return "ok"
        return "crash" if self.returncode != 0 else "no-output"

    def describe(self) -> str:
        """One sentence for a child that gave no report."""
        if self.returncode is None:
            return f"timed out after {self.seconds:.0f} s"
        tail = self.stderr_tail.strip().splitlines()[-1:] or ["(nothing on stderr)"]
        return f"exited with status {self.returncode} without a report: {tail[0][:300]}"


def child_env(repo: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a child: ours, with the clone first on PYTHONPATH."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(repo), env.get("PYTHONPATH")) if p)
    env.update(extra or {})
    return env


def last_json_object(text: str) -> dict[str, Any] | None:
    """Return the last line of ``text`` that is a JSON object (frameworks print too)."""
    for line in reversed(text.splitlines()):
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return None


def run_child(argv: Sequence[str], *, timeout: float, env: Mapping[str, str] | None = None,
              cwd: Path | None = None, stdin: str | None = None) -> ChildResult:
    """Run ``argv`` to its end or ``timeout``; the child's whole process group goes at the timeout."""
    start = time.monotonic()
    process = subprocess.Popen(
        list(argv), stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(env) if env else None,
        cwd=cwd, start_new_session=True)
    try:
        out, err = process.communicate(stdin, timeout=max(timeout, 0.1))
        code: int | None = process.returncode
    except subprocess.TimeoutExpired:
        kill_group(process)
        out, err = process.communicate()
        code = None
    return ChildResult(last_json_object(out or ""), code, (err or "")[-4000:], time.monotonic() - start)


def kill_group(process: subprocess.Popen[Any]) -> None:
    """Kill the process group a child leads (it may have started helpers of its own)."""
    import signal

    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        process.kill()


class LineReader:
    """A child's standard output, line by line, each read with a timeout."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._thread = threading.Thread(target=self._pump, args=(process,), daemon=True)
        self._thread.start()

    def _pump(self, process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            self._queue.put(line)
        self._queue.put(None)

    def next_report(self, timeout: float) -> dict[str, Any] | None:
        """The next JSON line (other lines are the framework's); None at the end or the timeout."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                return None
            if line is None:
                return None
            report = last_json_object(line)
            if report is not None:
                return report
