"""Explain a hang in which every thread of a thread pool waits for tasks of the same pool.

The shape, from the thread stacks of one waiting process: every worker thread of a
``concurrent.futures.ThreadPoolExecutor`` (its threads run ``_worker`` of
``concurrent/futures/thread.py``) or of a ``multiprocessing.pool.ThreadPool`` (threads
running ``worker`` of ``multiprocessing/pool.py``) runs a task of the user's that waits in
the pool's own result wait (``Future.result``, ``wait``, ``as_completed``, ``Executor.map``'s
iterator; ``AsyncResult.get``/``wait``, ``Pool.map``). A task holds its thread until it
returns, so the tasks they wait for can only be in the pool's queue, behind them: nothing
will ever run them.

The stacks do not say which pool made the futures a task waits on, so the cause is named
only where nothing else could complete them: no other thread of the process runs or
blocks in the user's code outside such a wait (the caller waits for the outer tasks, a
library's own thread idles), no other pool of that kind has a thread that is not idle,
and no process pool (whose futures the tasks might wait on) or event loop lives in the
process. An executor's worker waits only on a ``concurrent.futures`` wait, a ThreadPool's
on a ``multiprocessing.pool`` one: a task waiting on the other kind waits on another pool.
Where two pools of a kind wait whole, which waits on which is not known: no cause.
"""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from gpudoctor.hazards import THREAD_POOL_STARVED
from gpudoctor.knowledge.processes import APIS, THREAD_POOL
from gpudoctor.probe import stacks, user_source
from gpudoctor.probe.diagnosis import Cause

if TYPE_CHECKING:
    from gpudoctor.probe.diagnosis import ProcessVerdict


@dataclass(frozen=True)
class _Kind:
    """A kind of thread pool: the frame its worker threads run, and the waits on its results."""

    name: str  # as a report says it
    runner: tuple[str, str]  # (file, function) of the worker thread's loop
    results: str  # the file of the waits on its results
    waits: frozenset[str]  # their functions


_EXECUTOR = _Kind("ThreadPoolExecutor", ("concurrent/futures/thread.py", "_worker"), "concurrent/futures/_base.py",
                  frozenset({"result", "wait", "as_completed", "result_iterator", "_result_or_cancel"}))
_THREAD_POOL = _Kind("ThreadPool", ("multiprocessing/pool.py", "worker"), "multiprocessing/pool.py",
                     frozenset({"get", "wait", "next", "__next__", "map", "starmap", "apply"}))
_KINDS = (_EXECUTOR, _THREAD_POOL)
# Files whose frames sit between a wait and the condition it waits on, or between a
# task and the pool that runs it.
_WAIT_FILES = ("threading.py", "queue.py")
_TASK_RUNNERS = ("concurrent/futures/thread.py",)
# Where futures can come from that no thread pool's thread runs: a process pool's
# management thread, an event loop.
_OTHER_SOURCES = ("concurrent/futures/process.py", "asyncio/")
# A multiprocessing pool's handler thread (a ThreadPool and a process Pool both have one).
_POOL_HANDLER = ("multiprocessing/pool.py", "_handle_tasks")
_NAME = re.compile(r'"(.*)"\s*$')
_COMPREHENSION = re.compile(r"<(listcomp|genexpr|dictcomp|setcomp)>$")


def _in(where: str, file: str) -> bool:
    return file in where.replace(os.sep, "/")


def _function(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def _users(where: str) -> bool:
    return not where.startswith("<") and not stacks.is_library(where) and not stacks.is_bootstrap(where)


@dataclass(frozen=True)
class _Thread:
    title: str
    kind: _Kind | None  # the pool kind it is a worker of (None: not a pool's worker)
    state: str  # "idle" (a worker waiting for a task), "waits" (in its pool kind's result wait), "other"
    user: str | None  # the user's innermost frame: "process_document (prog.py:31)"
    wait: str | None  # the wait's outermost library frame: "Future.result (concurrent/futures/_base.py:451)"

    @property
    def pool(self) -> str:
        """The pool's name from the thread's ("ThreadPoolExecutor-0_3" -> "ThreadPoolExecutor-0")."""
        found = _NAME.search(self.title)
        name = found[1] if found else ""
        head, _, tail = name.rpartition("_")
        return head if head and tail.isdigit() and self.kind is _EXECUTOR else ""


def _waits_in(frames: Sequence[tuple[str, str]], results: str, waits: frozenset[str]) -> tuple[str, str] | None:
    """(the user's frame, the wait) when the innermost frames are a result wait called by the user."""
    inner = next((i for i, (_, where) in enumerate(frames) if _users(where)), None)
    if inner is None or inner == 0:
        return None
    library = frames[:inner]
    if not all(_in(where, results) or any(_in(where, f) for f in _WAIT_FILES) for _, where in library):
        return None
    ours = [(name, where) for name, where in library if _in(where, results) and _function(name) in waits]
    if not ours:
        return None
    # The function, not a comprehension in it ("process_document.<locals>.<listcomp>"): its line is the same.
    outer = frames[inner + 1] if inner + 1 < len(frames) else None
    name, where = frames[inner]
    if _COMPREHENSION.search(name) and outer is not None and _users(outer[1]):
        name = outer[0]
    return f"{name} ({where})", f"{ours[-1][0]} ({ours[-1][1]})"


def _read(title: str, frames: Sequence[stacks.Frame]) -> _Thread:
    python = [(f.name, f.where) for f in frames if f.python]
    for kind in _KINDS:
        at = next((i for i, (name, where) in enumerate(python)
                   if _in(where, kind.runner[0]) and _function(name) == kind.runner[1]), None)
        if at is None or (kind is _THREAD_POOL and stacks.is_main_thread(title)):
            continue  # (a process Pool's worker runs the same loop as its main thread)
        running = any(any(_in(w, f) for f in _TASK_RUNNERS) for _, w in python[:at])
        inside = [(n, w) for n, w in python[:at] if not any(_in(w, f) for f in _TASK_RUNNERS)]
        if not running and all(any(_in(w, f) for f in _WAIT_FILES) for _, w in inside):
            return _Thread(title, kind, "idle", None, None)
        found = _waits_in(inside, kind.results, kind.waits)
        if found is not None:
            return _Thread(title, kind, "waits", *found)
        return _Thread(title, kind, "other", next((f"{n} ({w})" for n, w in inside if _users(w)), None), None)
    for kind in _KINDS:
        found = _waits_in(python, kind.results, kind.waits)
        if found is not None:
            return _Thread(title, None, "waits", *found)
    user = next((f"{n} ({w})" for n, w in python if _users(w)), None)
    return _Thread(title, None, "other" if user is not None else "idle", user, None)


def _joins(frames: Sequence[stacks.Frame]) -> bool:
    """Does a thread wait for threads to end (``Thread.join``, an executor's shutdown, a Pool's join)?"""
    python = [f for f in frames if f.python]
    inner = next((i for i, f in enumerate(python) if _users(f.where)), len(python))
    return any(_function(f.name) in ("join", "shutdown", "__exit__") for f in python[:inner])


@dataclass(frozen=True)
class Starved:
    """A thread pool every thread of which waits for tasks of the same pool."""

    pid: int
    kind: str  # "ThreadPoolExecutor" or "ThreadPool"
    pool: str  # its threads' name ("ThreadPoolExecutor-0"), "" when the stacks do not say
    threads: int
    user: tuple[str, ...]  # the users' lines the threads wait at, each once
    wait: str  # "Future.result (concurrent/futures/_base.py:451)"
    made: tuple[str, str] | None  # ("prog.py:20", "ThreadPoolExecutor(max_workers=4)")
    size: int | None  # its max_workers when written as a number there
    callers: tuple[str, ...]  # the other threads' waits: "MainThread waits in <module> (prog.py:36)"


def _starved(process: ProcessVerdict) -> Starved | None:
    if not process.stack:
        return None
    every = stacks.threads(process.stack, process.stack_source)
    read = [(_read(title, frames), frames) for title, frames in every if any(f.python for f in frames)]
    if any(_in(f.where, src) for _, frames in read for f in frames if f.python for src in _OTHER_SOURCES):
        return None
    workers = [t for t, _ in read if t.kind is not None]
    groups: dict[tuple[str, str], list[_Thread]] = {}
    for t in workers:
        groups.setdefault((t.kind.name if t.kind else "", t.pool), []).append(t)
    whole = [key for key, members in groups.items() if all(t.state == "waits" for t in members)]
    if len(whole) != 1:
        return None
    kind_name, pool = whole[0]
    kind = next(k for k in _KINDS if k.name == kind_name)
    others = [t for t in workers if t.kind is kind and t.pool != pool]
    if any(t.state != "idle" for t in others):
        return None  # another pool of the kind holds a task: the futures may be its
    handlers = sum(1 for _, frames in read if any(f.python and _in(f.where, _POOL_HANDLER[0])
                                                  and _function(f.name) == _POOL_HANDLER[1] for f in frames))
    if kind is _THREAD_POOL and handlers != 1:
        return None  # another multiprocessing pool in the process: whose results is not known
    rest = [(t, frames) for t, frames in read if t.kind is None]
    if any(t.state == "other" and not _joins(frames) for t, frames in rest):
        return None  # a thread of the user's elsewhere may be what would complete the futures
    members = groups[whole[0]]
    made, size = _made(kind, [t.user for t in members if t.user], process.cmdline)
    callers = tuple(f"{_thread_name(t.title)} waits in {t.wait}, called from your code {t.user}"
                    for t, _ in rest if t.state == "waits" and t.wait and t.user)
    return Starved(process.pid, kind.name, pool, len(members), tuple(dict.fromkeys(t.user for t in members if t.user)),
                   members[0].wait or "", made, size, callers)


def _thread_name(title: str) -> str:
    found = _NAME.search(title)
    return found[1] if found else "the main thread" if stacks.is_main_thread(title) else "a thread"


# -- where the pool was made --------------------------------------------------------------






def _constructors(kind: _Kind) -> frozenset[str]:
    """The names a pool of ``kind`` is made with ("ThreadPoolExecutor", "ThreadPool"; not
    ``multiprocessing.dummy.Pool``, whose name a process Pool shares)."""
    return frozenset(n for api, what in APIS.items() if what == THREAD_POOL
                     and (n := api.rsplit(".", 1)[-1]) == kind.name)


def _made(kind: _Kind, users: Sequence[str], cmdline: Sequence[str]) -> tuple[tuple[str, str] | None, int | None]:
    """Where the pool was made, when the files of its tasks make exactly one of its kind."""
    files = {p for u in users if (p := user_source.file_of(u.rsplit(" (", 1)[-1].rstrip(")"), cmdline)) is not None}
    names = _constructors(kind)
    found: list[tuple[Path, ast.Call, str]] = []
    for path in sorted(files):
        parsed = user_source.parsed(str(path))
        if parsed is None:
            continue
        tree, text = parsed
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                called = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
                if called in names:
                    found.append((path, node, text))
    if len(found) != 1:
        return None, None
    path, call, text = found[0]
    written = " ".join((ast.get_source_segment(text, call) or ast.unparse(call)).split())
    first = call.args[0] if call.args else next((k.value for k in call.keywords
                                                  if k.arg in ("max_workers", "processes")), None)
    size = first.value if isinstance(first, ast.Constant) and type(first.value) is int else None
    return (f"{path.name}:{call.lineno}", written[:120]), size


# -- telling it ---------------------------------------------------------------------------


def find(judged: Sequence[ProcessVerdict], waiting: set[int]) -> list[Starved]:
    """Return each waiting process whose one thread pool waits whole for its own tasks."""
    return [s for p in judged if p.pid in waiting and (s := _starved(p)) is not None]


def _story(story: Starved) -> list[str]:
    n = story.threads
    made = f" made at {story.made[0]} (`{story.made[1]}`)" if story.made else ""
    named = f", whose threads are named {story.pool}_*," if story.pool else ""
    count = f"{n} of {n}" if story.size in (None, n) else f"the {n} it started, of max_workers={story.size}"
    at = " and ".join(story.user)
    said = [f"Thread-pool starvation: in pid {story.pid}, {'every' if n > 1 else 'the only'} worker thread "
            f"({count}) of the {story.kind}{made}{named} runs a task that waits, in your code {at}, for other "
            f"tasks ({story.wait}); no thread of the pool is left to run them."]
    said.append("No other thread of the process runs your code or could complete those tasks"
                + (f" ({'; '.join(story.callers)})" if story.callers else "")
                + ": the tasks they wait for were submitted to the same pool and sit in its queue, behind the "
                  "tasks that wait for them.")
    return said


def told(found: Sequence[Starved]) -> set[int]:
    return {s.pid for s in found}


def lines(found: Sequence[Starved]) -> list[str]:
    """Say which pool waits whole, at which line, why nothing can run, and the fix."""
    said = [line for story in found for line in _story(story)]
    return said + [THREAD_POOL_STARVED.why, THREAD_POOL_STARVED.fix_line] if said else []


def causes(found: Sequence[Starved], certainty: str) -> list[Cause]:
    """One ``thread-pool-starved`` cause per starved pool."""
    return [Cause(kind=THREAD_POOL_STARVED.cause, certainty=certainty, rule=THREAD_POOL_STARVED.rule,
                  processes=(story.pid,), evidence=tuple(_story(story)), fix=THREAD_POOL_STARVED.fix)
            for story in found]
