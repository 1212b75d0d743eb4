"""Dump the stacks of live processes: Python stacks by signal, native ones with py-spy."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import threading
import time
from collections.abc import Callable, Container
from dataclasses import dataclass
from pathlib import Path

_PY_SPY_TIMEOUT = 20.0

# Frames that say nothing about *why* a thread waits: the wait primitives themselves.
_BORING = re.compile(
    r"^(0x[0-9a-f]+|__\w+|pthread_\w+|std::|syscall|sem_\w+|futex|do_futex|epoll_wait|poll|select"
    r"|absl::[\w:]*Mutex|absl::[\w:]*Futex|absl::[\w:]*Waiter|nsync::)"
)
_BORING_LIBRARIES = ("libc.so", "libpthread", "ld-linux", "libstdc++")


@dataclass(frozen=True)
class Stack:
    """A process's stack dump and where its main thread is blocked."""

    text: str
    source: str  # "py-spy" (native + Python frames) or "faulthandler" (Python frames)
    blocked_in: str | None


def find_py_spy() -> str | None:
    """Return the py-spy executable: on PATH (the user's choice first), else next to this
    interpreter (a venv that was not activated)."""
    found = shutil.which("py-spy")
    if found:
        return found
    beside = Path(sys.executable).parent / "py-spy"
    return str(beside) if beside.exists() else None


def python_stacks(fds: dict[int, int], directory: Path, signum: int, wait: float = 2.0,
                  cancel: threading.Event | None = None) -> dict[int, str]:
    """Signal each process's faulthandler and return the Python stacks it wrote (by
    ``wait`` seconds, or by the time ``cancel`` is set).

    ``fds`` maps each PID to the descriptor its bootstrap registered. A process is
    signalled only while that descriptor still is its stack file: a program that
    closed it may have reused the number for one of its own files.
    """
    files = {pid: directory / f"{pid}.txt" for pid in fds}
    pids = {pid for pid, fd in fds.items() if _points_to(pid, fd, files[pid])}
    before = {pid: _size(files[pid]) for pid in pids}
    for pid in pids:
        try:
            os.kill(pid, signum)
        except (ProcessLookupError, PermissionError):
            continue
    deadline = time.monotonic() + wait
    pending = set(pids)
    while pending and time.monotonic() < deadline:
        if cancel is not None and cancel.is_set():
            break
        time.sleep(0.05)
        pending = {pid for pid in pending if _size(files[pid]) <= before[pid]}
    found: dict[int, str] = {}
    for pid in pids - pending:
        with open(files[pid], errors="replace") as f:
            f.seek(before[pid])
            found[pid] = f.read()
    return found


FATAL = "Fatal Python error: "


def fatal_errors(directory: Path) -> dict[int, str]:
    """Return, per PID, the fatal-error report faulthandler left in its stack file.

    The bootstrap enables faulthandler on each process's stack file, so a process
    that died of SIGSEGV, SIGBUS, SIGFPE, SIGILL or SIGABRT wrote
    "Fatal Python error: Segmentation fault" and its Python stacks there, even when
    its parent reaped it before the supervisor saw its exit status.
    """
    found: dict[int, str] = {}
    try:
        files = list(directory.glob("*.txt"))
    except OSError:
        return found
    for file in files:
        if not file.stem.isdigit():
            continue
        try:
            text = file.read_text(errors="replace")
        except OSError:
            continue
        at = text.find(FATAL)
        if at >= 0:
            found[int(file.stem)] = text[at:].strip()
    return found


def _points_to(pid: int, fd: int, path: Path) -> bool:
    try:
        return os.readlink(f"/proc/{pid}/fd/{fd}") == str(path)
    except OSError:
        return False


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def native_stacks(
    pids: set[int], py_spy: str, started: Callable[[int], None], stopped: Container[int] = frozenset(),
    cancel: threading.Event | None = None, until: float | None = None,
) -> tuple[dict[int, str], str | None]:
    """Run ``py-spy dump --native`` on every pid at once; return the dumps and an error.

    ``started`` is told each py-spy PID so the tree tracker never mistakes it for
    part of the supervised command. A process in ``stopped`` (SIGSTOP, a tracer) cannot
    be paused, which ``--native`` needs: its Python stack is read as it lies in memory.
    ``cancel`` set (a second Ctrl-C) kills the py-spy processes still running, and so
    does ``until`` (a ``time.monotonic()`` deadline: ``--timeout`` of an attached tree).

    Unwinding the native stack can fail where reading the Python stack works (py-spy's
    ``UNW_EINVAL`` on some libraries' frames): such a process is dumped again without
    ``--native``, and its dump says in its first line that native frames are missing. The
    error returned is then only for the processes with no dump at all (a permission
    refused, a process gone, a timeout).
    """
    found, failed, error = _dump(pids, py_spy, started, stopped, cancel, until, native=True)
    retry = {pid for pid, reason in failed.items() if not _refused(reason)}
    if retry and not (cancel is not None and cancel.is_set()):
        again, _, error_again = _dump(retry, py_spy, started, stopped, cancel, until, native=False)
        for pid, text in again.items():
            found[pid] = f"{NO_NATIVE} (py-spy --native failed: {failed[pid]})\n{text}"
        if not set(failed) - set(found):
            error = None
        elif error_again and set(retry) - set(again):
            error = error_again
    return found, error


# The first line of a dump taken without --native after --native failed.
NO_NATIVE = "Python frames only: the native stack could not be unwound"


def _refused(reason: str) -> bool:
    """Is this py-spy failure a refusal to trace (ptrace permission) rather than a failure
    to unwind? A dump without --native needs the same permission."""
    lowered = reason.lower()
    return "permission" in lowered or "operation not permitted" in lowered or "os error 1)" in lowered \
        or "timed out" in lowered or "stopped by a second signal" in lowered or "no such process" in lowered \
        or "--timeout" in lowered


def _dump(pids: set[int], py_spy: str, started: Callable[[int], None], stopped: Container[int],
          cancel: threading.Event | None, until: float | None,
          native: bool) -> tuple[dict[int, str], dict[int, str], str | None]:
    """Dump every pid at once; return the dumps, each failed pid's reason, and the last reason."""
    running: dict[int, subprocess.Popen[str]] = {}
    for pid in pids:
        how = ["--nonblocking"] if pid in stopped else (["--native"] if native else [])
        process = subprocess.Popen(
            [py_spy, "dump", *how, "--pid", str(pid)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            start_new_session=True,  # its group is killed whole on a timeout
        )
        started(process.pid)
        running[pid] = process
    found: dict[int, str] = {}
    failed: dict[int, str] = {}
    error: str | None = None
    deadline = time.monotonic() + _PY_SPY_TIMEOUT
    cut = until is not None and until < deadline
    deadline = min(deadline, until) if until is not None else deadline
    for pid, process in running.items():
        output = _output(process, deadline, cancel)
        if output is None:
            _kill_group(process)
            error = ("py-spy stopped by a second signal" if cancel is not None and cancel.is_set()
                     else "py-spy stopped at --timeout" if cut
                     else f"py-spy timed out after {_PY_SPY_TIMEOUT:g} s")
            failed[pid] = error
            continue
        if process.returncode == 0 and "Thread" in output:
            found[pid] = output
        else:
            error = failed[pid] = py_spy_error(output)
    return found, failed, error


def _output(process: subprocess.Popen[str], deadline: float, cancel: threading.Event | None) -> str | None:
    """Wait for py-spy's output; None when the deadline passed or ``cancel`` was set first."""
    while True:
        left = max(0.1, deadline - time.monotonic())
        try:
            return process.communicate(timeout=left if cancel is None else min(left, 0.1))[0]
        except subprocess.TimeoutExpired:
            if time.monotonic() >= deadline or (cancel is not None and cancel.is_set()):
                return None


def py_spy_error(output: str) -> str:
    """py-spy's reason for failing, in one line: its ``Error:`` line and the first cause,
    without the backtrace of py-spy's own code that follows them."""
    lines = [line.strip() for line in output.splitlines()]
    start = next((i for i, line in enumerate(lines) if line.startswith("Error:")), None)
    if start is None:
        return "py-spy failed"
    reason = lines[start].removeprefix("Error:").strip()
    causes = lines[start + 1:]
    if "Caused by:" in causes:
        first = next((line for line in causes[causes.index("Caused by:") + 1:] if line), "")
        first = re.sub(r"^\d+:\s*", "", first)
        if first:
            reason = f"{reason}: {first}" if reason else first
    return reason or "py-spy failed"


def _kill_group(process: subprocess.Popen[str]) -> None:
    """Kill a hung py-spy and whatever it started; never wait on pipes a survivor holds."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except OSError:
        process.kill()
    try:
        process.communicate(timeout=2.0)
    except subprocess.TimeoutExpired:  # a descendant that left the group keeps the pipe
        for pipe in (process.stdout, process.stderr):
            if pipe is not None:
                pipe.close()
        process.wait(2.0)


def _thread_blocks(text: str, header: re.Pattern[str]) -> list[tuple[str, list[str]]]:
    """Return each thread's header line and frame lines, in the dump's order."""
    blocks: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        if header.match(line):
            blocks.append((line, []))
        elif blocks and line.startswith(" ") and line.strip():
            blocks[-1][1].append(line.strip())
    return blocks


def _main_thread_block(text: str, header: re.Pattern[str]) -> list[str]:
    """Return the frame lines of the main (or signal-handling, or first) thread.

    py-spy names the main thread. faulthandler does not: its "Current thread" is the one
    that ran the signal handler, which the kernel may give to another thread (a Pool's
    handler thread spinning on a CPU). There the main thread is the one thread that
    ``threading`` did not start: its outermost frame is not ``threading.py``'s
    ``_bootstrap``."""
    blocks = _thread_blocks(text, header)
    for title, frames in blocks:
        if "MainThread" in title:
            return frames
    if len(blocks) > 1:
        unstarted = [frames for _, frames in blocks if frames and not _started_by_threading(frames[-1])]
        if len(unstarted) == 1:
            return unstarted[0]
    for title, frames in blocks:
        if is_main_thread(title):
            return frames
    return blocks[0][1] if blocks else []


def _started_by_threading(outermost: str) -> bool:
    """Is this outermost frame line (faulthandler's ``File "...", line N in NAME``) the
    ``_bootstrap`` of a thread ``threading`` started?"""
    found = re.match(r'^File "(.*)", line \d+ in (.*)$', outermost)
    return found is not None and found[1].replace("\\", "/").endswith("/threading.py") and found[2] == "_bootstrap"


def is_main_thread(title: str) -> bool:
    """Is this thread header (py-spy's or faulthandler's) the main or signal-handling thread's?"""
    return "MainThread" in title or title.startswith("Current thread")


def is_library(where: str) -> bool:
    """Tell a library frame from the user's own code, by the file py-spy/faulthandler name."""
    path = where.rsplit(":", 1)[0]
    if path.startswith("<frozen "):
        return True  # a frozen module of the standard library (``<frozen runpy>``)
    if os.path.isabs(path):
        libraries = {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")}
        # The supervised interpreter need not be ours: also know the usual layouts.
        return any(path.startswith(prefix + os.sep) for prefix in libraries) or bool(
            re.search(r"/(site|dist)-packages/|/lib/python\d\.\d+/", path))
    # py-spy shortens paths under sys.path: "tensorflow/python/ops/x.py", "threading.py".
    top = path.split("/", 1)[0]
    return "/" in path or top.removesuffix(".py") in sys.stdlib_module_names


# gpudoctor's own bootstrap runs in every process of the tree and wraps os.waitpid, so a
# parent waiting for its child (``p.wait()``) has the wrapper as its innermost frame. It
# is never where the program is blocked: the program's own call below it is.
_BOOTSTRAP = str(Path(__file__).resolve().with_name("bootstrap"))
_BOOTSTRAP_FILE = "gpudoctor/probe/bootstrap/sitecustomize.py"  # as py-spy names it under a sys.path entry


def is_bootstrap(where: str) -> bool:
    """Is this frame's file gpudoctor's bootstrap (py-spy names it relative to a sys.path
    entry, the bootstrap's folder or one above the package; faulthandler by its full path)?"""
    path = where.rsplit(":", 1)[0]
    return path in ("sitecustomize.py", _BOOTSTRAP_FILE) or path.endswith("/" + _BOOTSTRAP_FILE) \
        or path.startswith(_BOOTSTRAP + os.sep)


@dataclass(frozen=True)
class BlockedAt:
    """Where a main thread waits: its blocking native frame (py-spy only), its innermost
    Python frame, and the innermost frame of the user's own code (not a library's)."""

    native: str | None = None
    python: str | None = None
    user: str | None = None

    def describe(self) -> str | None:
        """Join the three in one phrase, as the diagnosis says it ("Blocked in ...")."""
        parts = [self.native] if self.native else []
        if self.python:
            parts.append(f"Python {self.python}")
        if self.user and self.user != self.python:
            parts.append(f"in your code {self.user}")
        return ", ".join(parts) or None


def own_frames(frames: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The frames (function, "path:line"), innermost first, that a ``multiprocessing`` child
    runs itself: those inside its ``BaseProcess._bootstrap``. A fork child's stack goes on
    below it with the frames it inherited from its parent (``p.start()`` and the parent's
    code): where the parent was when it forked, not where the child is."""
    for index, (name, where) in enumerate(frames):
        if name.rsplit(".", 1)[-1] == "_bootstrap" and "multiprocessing/process.py" in where.replace(os.sep, "/"):
            return frames[:index]
    return frames


def _blocked(native: str | None, python: list[str]) -> BlockedAt:
    own = python[:len(own_frames([(frame.rsplit(" (", 1)[0], frame.rsplit(" (", 1)[-1][:-1]) for frame in python]))]
    user = next((frame for frame in own if not is_library(frame.split(" (", 1)[-1][:-1])), None)
    if user is not None and len(python) > 1 and user == python[-1] and "(<string>:" in user:
        # ``python -c "from multiprocessing.spawn import spawn_main; ..."``: the command line
        # of a spawned worker or of the resource tracker, only calling into the library.
        user = None
    return BlockedAt(native, python[0] if python else None, user)


@dataclass(frozen=True)
class Frame:
    """One frame line of a py-spy dump: ``name (where)``, and whether it is Python's."""

    name: str
    where: str  # "path.py:LINE" for Python; a library ("libc.so.6") or "file.c:LINE" for native
    python: bool


_PY_SPY_FRAME = re.compile(r"^(.*) \(([^()]*)\)$")
# py-spy names a Python frame's file "path.py:LINE" (or "<string>:1" for ``python -c``); a
# native frame with debug information names its C file the same way ("selectmodule.c:655"),
# and that is no Python frame.
_PYTHON_LOCATION = re.compile(r"(\.pyw?|^<[^<>]*>):\d+$")


def py_spy_frame(line: str) -> Frame | None:
    """Read one frame line of a py-spy dump (stripped); None when it is no frame line.

    The one place that decides what a frame is: the diagnosis's "blocked in" and the
    report's sorting of the lines (``stack_frames``) both read frames through it.
    """
    found = _PY_SPY_FRAME.match(line)
    if found is None:
        return None
    name, where = found.groups()
    return Frame(name, where, bool(_PYTHON_LOCATION.search(where)))


def _native_blocked(text: str) -> BlockedAt:
    frames = _main_thread_block(text, re.compile(r"^Thread \d+"))
    native: str | None = None
    python: list[str] = []
    for line in frames:
        frame = py_spy_frame(line)
        if frame is None:
            continue
        if frame.python:
            if not is_bootstrap(frame.where):
                python.append(f"{frame.name} ({frame.where})")
        elif not python and native is None and not _BORING.match(frame.name) \
                and not frame.where.startswith(_BORING_LIBRARIES):
            native = frame.name
    return _blocked(native, python)


def _python_blocked(text: str) -> BlockedAt:
    frames = _main_thread_block(text, re.compile(r"^(Current thread|Thread) 0x"))
    python: list[str] = []
    for frame in frames:
        found = re.match(r'^File "(.*)", line (\d+) in (.*)$', frame)
        if found:
            path, line, function = found.groups()
            if not is_bootstrap(f"{path}:{line}"):
                python.append(f"{function} ({path}:{line})")
    return _blocked(None, python)


def python_frames(text: str, source: str | None) -> list[tuple[str, str]]:
    """Return the main thread's Python frames of a dump (``source``: "py-spy" or
    "faulthandler") as (function, "path:line"), innermost first, gpudoctor's bootstrap
    left out."""
    if source == "py-spy":
        frames = [py_spy_frame(line) for line in _main_thread_block(text, re.compile(r"^Thread \d+"))]
        return [(f.name, f.where) for f in frames if f is not None and f.python and not is_bootstrap(f.where)]
    found = []
    for line in _main_thread_block(text, re.compile(r"^(Current thread|Thread) 0x")):
        frame = re.match(r'^File "(.*)", line (\d+) in (.*)$', line)
        if frame and not is_bootstrap(f"{frame[1]}:{frame[2]}"):
            found.append((frame[3], f"{frame[1]}:{frame[2]}"))
    return found


def threads(text: str, source: str | None) -> list[tuple[str, list[Frame]]]:
    """Return every thread of a dump (``source``: "py-spy" or "faulthandler") as its header
    line and its frames, innermost first, gpudoctor's bootstrap left out. A faulthandler
    dump has Python frames only; py-spy's has native ones too (with ``--native``)."""
    found: list[tuple[str, list[Frame]]] = []
    if source == "py-spy":
        for title, lines in _thread_blocks(text, re.compile(r"^Thread \d+")):
            frames = [py_spy_frame(line) for line in lines]
            found.append((title, [f for f in frames if f is not None and not (f.python and is_bootstrap(f.where))]))
        return found
    for title, lines in _thread_blocks(text, re.compile(r"^(Current thread|Thread) 0x")):
        matched = [re.match(r'^File "(.*)", line (\d+) in (.*)$', line) for line in lines]
        found.append((title, [Frame(m[3], f"{m[1]}:{m[2]}", True) for m in matched
                              if m is not None and not is_bootstrap(f"{m[1]}:{m[2]}")]))
    return found


def blocked_in_native(text: str) -> str | None:
    """Name the innermost telling native frame of a py-spy dump, with its Python callers."""
    return _native_blocked(text).describe()


def blocked_in_python(text: str) -> str | None:
    """Name the innermost frame of a faulthandler dump, and the user's own innermost frame."""
    return _python_blocked(text).describe()


def where_blocked(text: str, source: str) -> BlockedAt:
    """Read where the main thread of a dump (``source``: "py-spy" or "faulthandler") waits."""
    return _native_blocked(text) if source == "py-spy" else _python_blocked(text)


def combine(python: str | None, native: str | None) -> Stack | None:
    """Prefer the native dump (it shows where C++ blocks); fall back to Python stacks."""
    if native:
        return Stack(native, "py-spy", blocked_in_native(native))
    if python:
        return Stack(python, "faulthandler", blocked_in_python(python))
    return None
