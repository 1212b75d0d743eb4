"""Instrument the test process and its children for one test's call.

Inside the test process: ``os.register_at_fork`` hooks record each fork (the forking
process's native thread count, the GPU runtimes it had initialized, and the fork
site) as JSON lines in the same format as the probe's bootstrap. The hooks cannot be
unregistered, so they are registered once and do nothing unless a test is active.
A fork child inherits the active state, so forks in grandchildren are recorded too.

Children that start a fresh interpreter (spawn, forkserver, exec) get the probe's
bootstrap through the environment, which records their forks into the same file and
lets their stacks be dumped on a signal.
"""

from __future__ import annotations

import faulthandler
import json
import os
import sys
import sysconfig
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType
from typing import IO

from gpudoctor.knowledge.runtimes import bootstrap_tables
from gpudoctor.probe import launch
from gpudoctor.probe.bootstrap import sitecustomize as detect
from gpudoctor.pytest_plugin import rescue

detect.configure(bootstrap_tables())  # (this process reads its own runtimes with the bootstrap's code)


@dataclass(frozen=True)
class Active:
    """Where the hooks write while a test runs."""

    events: str
    stacks: str
    signal: int


_active: list[Active] = []  # empty outside an instrumented test: the hooks do nothing
_registered: list[bool] = []
_at_fork: dict[str, object] = {}
_child_stack_file: list[IO[str]] = []
_HERE = os.path.abspath(__file__)


def _library_roots() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    return tuple({paths[k] + os.sep for k in ("stdlib", "platstdlib", "purelib", "platlib")})


_LIBRARIES = _library_roots()


def _describe(frame: FrameType) -> str:
    """Name a frame; a library's file relative to its root ("multiprocessing/context.py")."""
    code = frame.f_code
    path = code.co_filename
    root = next((r for r in _LIBRARIES if path.startswith(r)), "")
    return f"{path[len(root):]}:{frame.f_lineno} in {code.co_name}"


def fork_site() -> tuple[str | None, str | None]:
    """Return (the user's frame that led to the fork, the library call it made), or Nones.

    "User" is the innermost frame outside the standard library and site-packages:
    for ``ctx.Pool(2)`` that is the test's line, and the call is ``multiprocessing``'s ``Pool``.
    """
    frame: FrameType | None = sys._getframe(1)
    callee: FrameType | None = None
    while frame is not None:
        path = frame.f_code.co_filename
        if os.path.abspath(path) != _HERE and not path.startswith(_LIBRARIES) and not path.startswith("<"):
            return _describe(frame), None if callee is None else _describe(callee)
        if os.path.abspath(path) != _HERE:
            callee = frame
        frame = frame.f_back
    return None, None


def _write(path: str, event: str, **fields: object) -> None:
    """Append one event line; one O_APPEND write keeps lines of different processes whole."""
    record: dict[str, object] = {"event": event, "pid": os.getpid(), "ppid": os.getppid(), "t": time.time()}
    record.update(fields)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, (json.dumps(record, default=str) + "\n").encode())
    finally:
        os.close(fd)


# Python 3.12+ warns, in the parent after fork() and before the after-fork hooks, when
# the process has more than one thread. Set for one fork when the only other thread is
# the plugin's own rescue thread, which holds nothing a child could miss.
_RESCUE_WARNING = r"This process \(pid=\d+\) is multi-threaded, use of fork\(\) may lead to deadlocks"
_silenced: list[tuple[object, ...]] = []


def _silence_rescue_warning(threads: int | None, ours: int) -> None:
    if not ours or threads is None or threads - ours > 1:
        return
    warnings.filterwarnings("ignore", message=_RESCUE_WARNING, category=DeprecationWarning)
    _silenced.append(warnings.filters[0])


def _unsilence() -> None:
    while _silenced:
        entry = _silenced.pop()
        try:
            # typeshed declares ``filters`` a Sequence; it is the list ``filterwarnings`` inserts into.
            warnings.filters.remove(entry)  # type: ignore[attr-defined]
            warnings._filters_mutated()  # type: ignore[attr-defined]  # private, untyped: the cache is stale
        except (ValueError, AttributeError):
            pass  # a catch_warnings block restored the filters already


def _before_fork() -> None:
    if not _active:
        return
    try:
        site, via = fork_site()
        _at_fork.clear()
        ours = rescue.active_threads()
        threads = detect.native_threads()
        _silence_rescue_warning(threads, ours)
        _at_fork.update(threads=None if threads is None else threads - ours,
                        runtimes=detect.initialized_runtimes(), t=time.time())
        _write(_active[0].events, "fork-parent", threads=_at_fork["threads"],
               runtimes=_at_fork["runtimes"], fork_t=_at_fork["t"], site=site, via=via)
    except Exception:  # instrumentation must never break the test's fork
        return


def _after_fork_in_child() -> None:
    _unsilence()
    if not _active:
        return
    try:
        active = _active[0]
        for old in _child_stack_file:
            old.close()
        _child_stack_file.clear()
        stack_file = open(os.path.join(active.stacks, f"{os.getpid()}.txt"), "w")
        faulthandler.register(active.signal, file=stack_file, all_threads=True, chain=False)
        _child_stack_file.append(stack_file)
        _write(active.events, "fork-child", threads_at_fork=_at_fork.get("threads"),
               runtimes_at_fork=_at_fork.get("runtimes"), fork_t=_at_fork.get("t"),
               dump_fd=stack_file.fileno(), ticks=detect.own_ticks())
    except Exception:
        return


def _register_hooks() -> None:
    if not _registered:
        os.register_at_fork(before=_before_fork, after_in_child=_after_fork_in_child,
                            after_in_parent=_unsilence)
        _registered.append(True)


def environment_changes(workdir: launch.Workdir, token: str) -> dict[str, str]:
    """Return the variables that give the test's fresh-interpreter children the bootstrap."""
    wanted = launch.child_environment(workdir, token)
    # Unbuffered output helps a supervised command's log; a test's children keep theirs.
    if "PYTHONUNBUFFERED" not in os.environ:
        wanted.pop("PYTHONUNBUFFERED", None)
    return {k: v for k, v in wanted.items() if os.environ.get(k) != v}


@contextmanager
def _environment(changes: dict[str, str]) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in changes}
    os.environ.update(changes)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@contextmanager
def _own_stacks(workdir: launch.Workdir, signum: int) -> Iterator[int]:
    """Let the watcher dump this process's Python stacks by signal; yield the file's descriptor."""
    with open(workdir.stacks / f"{os.getpid()}.txt", "w") as stack_file:
        faulthandler.register(signum, file=stack_file, all_threads=True, chain=False)
        try:
            yield stack_file.fileno()
        finally:
            faulthandler.unregister(signum)


@contextmanager
def instrumented(workdir: launch.Workdir, token: str) -> Iterator[int]:
    """Record forks and make every process of the test dumpable; yield this process's dump fd."""
    workdir.stacks.mkdir(parents=True, exist_ok=True)
    _register_hooks()
    signum = int(launch.DUMP_SIGNAL)
    with _environment(environment_changes(workdir, token)), _own_stacks(workdir, signum) as fd:
        _active.append(Active(str(workdir.events), str(workdir.stacks), signum))
        try:
            yield fd
        finally:
            _active.clear()

