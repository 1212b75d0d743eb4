"""Start a supervised command: resolve it, build its environment, start the watchdog."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from gpudoctor.errors import GpudoctorError
from gpudoctor.printable import printable
from gpudoctor.probe import bootstrap, watchdog
from gpudoctor.probe.tree import TOKEN_VAR

# faulthandler's stack-dump signal in the supervised processes. A real-time signal:
# programs rarely use them, and SIGUSR1/SIGUSR2 are taken by common servers and
# profilers. Its default action kills, so it is only sent to processes whose
# bootstrap reported that the handler is installed.
DUMP_SIGNAL = signal.SIGRTMIN + 5


@dataclass(frozen=True)
class Workdir:
    """Where the bootstrap of one run writes its events and stack dumps."""

    root: Path

    @property
    def events(self) -> Path:
        return self.root / "events.jsonl"

    @property
    def stacks(self) -> Path:
        return self.root / "stacks"

    @property
    def members(self) -> Path:
        """The tree's processes as the supervisor found them, for the watchdog."""
        return self.root / "members"


def resolve(command: list[str]) -> list[str]:
    """Check the command can be started; raise GpudoctorError with a clear message if not."""
    if not command:
        raise GpudoctorError("no command given after '--'")
    program = command[0]
    if os.sep in program:
        if not (os.path.isfile(program) and os.access(program, os.X_OK)):
            raise GpudoctorError(f"command not found or not executable: {printable(program)}")
        return command
    found = shutil.which(program)
    if found is None:
        raise GpudoctorError(f"command not found: {printable(program)} (not on PATH)")
    return command


def child_environment(workdir: Workdir, token: str) -> dict[str, str]:
    """Return the command's environment: ours plus the bootstrap and its settings."""
    env = dict(os.environ)
    here = str(Path(bootstrap.__file__).parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (here, env.get("PYTHONPATH")) if p)
    env["GPUDOCTOR_EVENTS"] = str(workdir.events)
    env["GPUDOCTOR_STACKS"] = str(workdir.stacks)
    env["GPUDOCTOR_DUMP_SIGNAL"] = str(int(DUMP_SIGNAL))
    env[TOKEN_VAR] = token
    # Output goes to a pipe, where Python buffers it: unbuffered, a hung or killed
    # program shows as much output as it would have on a terminal.
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def start_watchdog(token: str, grace: float = 3.0, members: Path | None = None, *, events: Path | None = None,
                   parent: tuple[int, int] | None = None, also: tuple[tuple[int, int], ...] = (),
                   remove: Path | None = None) -> subprocess.Popen[bytes]:
    """Start the process that kills the tree if the supervisor dies without cleaning up.

    It runs in a session of its own: a signal to the supervisor's process group
    (Ctrl-C, Ctrl-\\, ``kill -KILL -PGID`` from a CI runner or ``timeout``) must not
    take the watchdog down with the supervisor, or the tree would outlive both.
    ``members`` and ``events``: the files the tree's processes are named in; ``parent``,
    ``also``: (PID, start ticks) of a process whose death counts as the supervisor's, and
    of processes to kill with the tree; ``remove``: a folder to delete after (see watchdog.py).
    """
    env = {k: v for k, v in os.environ.items() if k != TOKEN_VAR}
    extra = [str(members)] if members is not None else []
    if events is not None:
        extra += ["--events", str(events)]
    if parent is not None:
        extra += ["--parent", f"{parent[0]}:{parent[1]}"]
    extra += [f"--also={pid}:{ticks}" for pid, ticks in also]
    if remove is not None:
        extra += ["--remove", str(remove)]
    return subprocess.Popen(
        [sys.executable, "-I", "-S", watchdog.__file__, token, repr(float(grace)), *extra],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        env=env,
        start_new_session=True,
    )


def stop_watchdog(process: subprocess.Popen[bytes], done: bool = True) -> None:
    """Tell the watchdog the tree is gone (``done``), or not, and wait for it.

    Without ``done`` the watchdog kills what is left of the tree before it exits:
    the supervisor says ``done`` only once it has stopped the whole tree itself.
    """
    try:
        assert process.stdin is not None
        if done:
            process.stdin.write(b"done\n")
        process.stdin.close()
    except (OSError, ValueError):
        pass
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
