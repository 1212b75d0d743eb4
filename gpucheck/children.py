"""Start the programs a check runs as child processes, each with a deadline.

Every framework-touching program of ``make gpu-check`` runs in a child started with
the interpreter that holds the frameworks, in a session of its own: a child that
hangs or crashes never takes the report down, and at its deadline its whole process
group is killed (a hung fork pool would otherwise outlive its parent).
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")


@dataclass(frozen=True)
class Finished:
    """What became of one child: its exit status and output, or that its deadline passed."""

    command: tuple[str, ...]
    returncode: int | None  # None: killed at its deadline
    stdout: str
    stderr: str
    seconds: float

    @property
    def timed_out(self) -> bool:
        return self.returncode is None

    def tail(self, lines: int = 8) -> str:
        """The last lines of stderr (else stdout): what a report quotes when a child failed."""
        text = (self.stderr.strip() or self.stdout.strip()).splitlines()
        return "\n".join(text[-lines:])

    @property
    def report(self) -> dict[str, Any] | None:
        """The last JSON object the child printed on stdout (a check's child reports so)."""
        return last_json_object(self.stdout)

    def describe(self) -> str:
        """One sentence for a child that gave no report."""
        if self.returncode is None:
            return f"timed out after {self.seconds:.0f} s"
        last = self.stderr.strip().splitlines()[-1:] or ["(nothing on stderr)"]
        return f"exited with status {self.returncode} without a report: {last[0][:300]}"


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


def environment(repo: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """Return this process's environment with ``repo`` first on PYTHONPATH (gpudoctor runs
    from the clone, not from an installed copy) and ``extra`` on top."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(repo), env.get("PYTHONPATH")) if p)
    env.update(extra or {})
    return env


def kill_group(process: subprocess.Popen[Any]) -> None:
    """Kill the process group a child leads (it may have started helpers of its own)."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def run(command: Sequence[str], *, timeout: float, env: Mapping[str, str] | None = None,
        cwd: Path | None = None, stdin: str | None = None) -> Finished:
    """Run ``command`` to its end or to ``timeout`` seconds, then kill its process group."""
    started = time.monotonic()
    process = subprocess.Popen(list(command), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                               text=True, errors="replace",
                               env=dict(env) if env is not None else None, cwd=cwd,
                               start_new_session=True)
    try:
        out, err = process.communicate(stdin, timeout=max(timeout, 0.1))
        code: int | None = process.returncode
    except subprocess.TimeoutExpired:
        kill_group(process)
        out, err = process.communicate()
        code = None
    # A child may leave grandchildren in its group (a pool it did not close): end them too.
    kill_group(process)
    return Finished(tuple(command), code, out or "", err or "", round(time.monotonic() - started, 2))


def in_parallel(function: Callable[[T], R], items: Iterable[T], workers: int) -> list[R]:
    """Call ``function`` on each item, ``workers`` at a time; return the results in order."""
    items = list(items)
    if not items:
        return []
    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(items)))) as pool:
        return list(pool.map(function, items))


class LineReader:
    """A long-lived child's standard output, line by line, each read with a timeout (for a
    child that reports several times while the check watches it)."""

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
