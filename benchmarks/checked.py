"""Run the commands a benchmark times, and stop the benchmark when one did not succeed.

A command that fails at once (gpudoctor missing from the interpreter, a usage error, a
crash) takes a few hundredths of a second: timed without a look at how it ended, it reads
as a fast run. So every timed command's exit status and stderr are checked after the
clock stops, and a failure ends the benchmark (``SystemExit``, exit 1) with a message that
names the command, its exit status and the end of its stderr.

The benchmarks run gpudoctor and ruff with ``--exit-zero``, so success is exit 0 alone:
exit 1 is also what Python gives for ``-m`` of a module it cannot find and for an uncaught
exception. A command that may exit 1 for its findings says so with ``ok=(0, 1)``. A
stderr that holds a Python traceback is a failure whatever the status.

Imported by the scripts beside it (``python benchmarks/NAME.py`` puts this folder first on
``sys.path``).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

Command = Sequence["str | os.PathLike[str]"]
SUCCESS = (0,)
TRACEBACK = "Traceback (most recent call last):"
TAIL = 2000  # characters of stderr shown


class CommandFailed(SystemExit):
    """A benchmarked command that did not succeed: its message is printed, the script exits 1."""


def shown(command: Command, cwd: Path | None = None) -> str:
    """The command as a shell would take it, and where it ran."""
    return shlex.join(str(part) for part in command) + (f" (in {cwd})" if cwd is not None else "")


def failure(command: Command, returncode: int, stderr: str, ok: Sequence[int] = SUCCESS,
            cwd: Path | None = None) -> CommandFailed | None:
    """The failure to raise for a command that ended so, or None when it succeeded."""
    crashed = TRACEBACK in stderr
    if returncode in ok and not crashed:
        return None
    why = f"exited {returncode}" + (" with a Python traceback" if crashed and returncode in ok else "")
    expected = " or ".join(str(code) for code in ok)
    tail = stderr.strip()[-TAIL:] or "(nothing)"
    return CommandFailed(f"benchmark stopped: {shown(command, cwd)} {why} (expected {expected}); "
                         f"the end of its stderr:\n{tail}")


def not_found(command: Command, error: OSError, cwd: Path | None = None) -> CommandFailed:
    return CommandFailed(f"benchmark stopped: {shown(command, cwd)} could not be started: {error}")


def timed(command: Command, cwd: Path | None = None, env: Mapping[str, str] | None = None,
          ok: Sequence[int] = SUCCESS) -> float:
    """Run ``command`` with stdout discarded; return its wall time in seconds.

    stderr goes to a temporary file, read only after the clock stopped, so the time is
    what it was with stderr discarded."""
    with tempfile.TemporaryFile() as stderr:
        started = time.perf_counter()
        try:
            done = subprocess.run(command, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=stderr, check=False)
        except OSError as error:
            raise not_found(command, error, cwd) from None
        seconds = time.perf_counter() - started
        stderr.seek(0)
        problem = failure(command, done.returncode, stderr.read().decode(errors="replace"), ok, cwd)
    if problem is not None:
        raise problem
    return seconds


def captured(command: Command, cwd: Path | None = None, env: Mapping[str, str] | None = None,
             ok: Sequence[int] = SUCCESS) -> tuple[str, float]:
    """Run ``command`` with its output captured; return its stdout and its wall time."""
    started = time.perf_counter()
    try:
        done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, errors="replace",
                              check=False)
    except OSError as error:
        raise not_found(command, error, cwd) from None
    seconds = time.perf_counter() - started
    problem = failure(command, done.returncode, done.stderr, ok, cwd)
    if problem is not None:
        raise problem
    return done.stdout, seconds


def captured_json(command: Command, cwd: Path | None = None, env: Mapping[str, str] | None = None,
                  ok: Sequence[int] = SUCCESS) -> tuple[Any, float]:
    """Run ``command``, which prints JSON; return it parsed and the wall time. Output that is
    not JSON stops the benchmark too."""
    output, seconds = captured(command, cwd, env, ok)
    try:
        return json.loads(output), seconds
    except json.JSONDecodeError as error:
        raise CommandFailed(f"benchmark stopped: {shown(command, cwd)} printed no JSON ({error}): "
                            f"{output[:300]!r}") from None
