"""Start a supervised command: resolve it, build its environment, start the watchdog."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from gpudoctor.errors import GpudoctorError
from gpudoctor.knowledge.runtimes import bootstrap_tables
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
    def tables(self) -> Path:
        """What the bootstrap tells the runtimes apart by (knowledge.runtimes.bootstrap_tables)."""
        return self.root / "tables.json"

    @property
    def members(self) -> Path:
        """The tree's processes as the supervisor found them, for the watchdog."""
        return self.root / "members"


# A run's scratch folder is named gpudoctor-PID.TICKS.NS-RANDOM in the temporary folder:
# the PID and start time (clock ticks since boot) of the gpudoctor that made it, and the
# inode of that gpudoctor's PID namespace. A gpudoctor killed with SIGKILL cannot delete it;
# its watchdog does (``--remove``), and should the watchdog be gone too, the next gpudoctor
# that starts deletes it, once neither of them runs.
_OWNED = re.compile(r"gpudoctor-(\d+)\.(\d+)\.(\d+)-[a-z0-9_]+")
# In the folder: "PID TICKS" of the run's watchdog, which reads the folder until it ends.
_WATCHDOG = "watchdog"
_swept = False  # stale folders are looked for once per process


def _pid_namespace() -> int | None:
    """The inode of this process's PID namespace (a PID means nothing outside it), or None."""
    try:
        found = re.fullmatch(r"pid:\[(\d+)\]", os.readlink("/proc/self/ns/pid"))
    except OSError:
        return None
    return int(found.group(1)) if found else None


def make_workdir() -> Workdir:
    """Create the run's scratch folder, named after this process (see ``_OWNED``), after
    deleting the stale ones of gpudoctors that were killed (once per process)."""
    global _swept
    if not _swept:
        _swept = True
        remove_stale_workdirs()
    ticks, namespace = watchdog.start_ticks(os.getpid()), _pid_namespace()
    owner = f"{os.getpid()}.{ticks}.{namespace}-" if ticks is not None and namespace is not None else ""
    # Resolved: stack files are recognized by comparing /proc/<pid>/fd links to it.
    workdir = Workdir(Path(tempfile.mkdtemp(prefix=f"gpudoctor-{owner}")).resolve())
    workdir.stacks.mkdir()
    return workdir


def name_watchdog(workdir: Workdir, pid: int) -> None:
    """Write down the run's watchdog: while it runs, its folder is not stale."""
    ticks = watchdog.start_ticks(pid)
    if ticks is None:  # gone already: then it has nothing left to read
        return
    partial = workdir.root / f"{_WATCHDOG}.partial"
    try:
        partial.write_text(f"{pid} {ticks}\n")
        partial.replace(workdir.root / _WATCHDOG)  # whole or absent, for a gpudoctor starting now
    except OSError:
        pass


def _running_watchdog(folder: str) -> bool:
    """Tell whether the watchdog named in ``folder`` still runs."""
    try:
        fd = os.open(os.path.join(folder, _WATCHDOG), os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        pid, ticks = os.read(fd, 64).split()
        return watchdog.is_running(int(pid), int(ticks))
    except (OSError, ValueError):
        return False
    finally:
        os.close(fd)


def remove_stale_workdirs(folder: Path | None = None) -> list[Path]:
    """Delete the scratch folders of gpudoctors killed before they could, in ``folder``
    (default: the temporary folder); return those deleted.

    Only a real folder (never a symbolic link, and nothing is followed inside it) of this
    user, named by a gpudoctor of this PID namespace that no longer runs (its PID, if
    taken again, belongs to a process with another start time), and whose watchdog does
    not run either. A gpudoctor starting meanwhile names its folder after itself, a
    running process: it is never taken for a stale one.
    """
    namespace = _pid_namespace()
    if namespace is None or not shutil.rmtree.avoids_symlink_attacks:
        return []
    removed: list[Path] = []
    try:
        entries = list(os.scandir(folder if folder is not None else tempfile.gettempdir()))
    except OSError:
        return removed
    for entry in entries:
        owner = _OWNED.fullmatch(entry.name)
        if owner is None or int(owner.group(3)) != namespace:
            continue
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
            continue
        if watchdog.is_running(int(owner.group(1)), int(owner.group(2))) or _running_watchdog(entry.path):
            continue
        shutil.rmtree(entry.path, ignore_errors=True)  # another gpudoctor may be deleting it too
        if not os.path.lexists(entry.path):
            removed.append(Path(entry.path))
    return removed


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
    if not workdir.tables.exists():
        workdir.tables.write_text(json.dumps(bootstrap_tables()))
    env["GPUDOCTOR_TABLES"] = str(workdir.tables)
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
