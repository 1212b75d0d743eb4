"""Start the programs a check runs as child processes, each with a deadline.

Every framework-touching program of ``make gpu-check`` runs in a child started with
the interpreter that holds the frameworks, in a session of its own: a child that
hangs or crashes never takes the report down, and at its deadline its whole process
group is killed (a hung fork pool would otherwise outlive its parent).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

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


def environment(repo: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """Return this process's environment with ``repo`` first on PYTHONPATH (gpudoctor runs
    from the clone, not from an installed copy) and ``extra`` on top."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(repo), env.get("PYTHONPATH")) if p)
    env.update(extra or {})
    return env


def _kill_group(process: subprocess.Popen[str]) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def run(command: Sequence[str], *, timeout: float, env: Mapping[str, str] | None = None,
        cwd: Path | None = None) -> Finished:
    """Run ``command`` to its end or to ``timeout`` seconds, then kill its process group."""
    started = time.monotonic()
    process = subprocess.Popen(list(command), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               stdin=subprocess.DEVNULL, text=True, errors="replace",
                               env=dict(env) if env is not None else None, cwd=cwd,
                               start_new_session=True)
    try:
        out, err = process.communicate(timeout=max(timeout, 0.1))
        code: int | None = process.returncode
    except subprocess.TimeoutExpired:
        _kill_group(process)
        out, err = process.communicate()
        code = None
    # A child may leave grandchildren in its group (a pool it did not close): end them too.
    _kill_group(process)
    return Finished(tuple(command), code, out or "", err or "", round(time.monotonic() - started, 2))


def in_parallel(function: Callable[[T], R], items: Iterable[T], workers: int) -> list[R]:
    """Call ``function`` on each item, ``workers`` at a time; return the results in order."""
    items = list(items)
    if not items:
        return []
    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(items)))) as pool:
        return list(pool.map(function, items))
