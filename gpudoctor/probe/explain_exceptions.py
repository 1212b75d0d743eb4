"""Explain the exceptions that mean something specific when processes share work.

A process that ends on a Python exception gets it explained: which process raised it,
the line of the user's code it came from, what it means in a process tree, and the fix,
never only "exited with status 1" and the last line of stderr. ``CATALOGUE`` is the
data: each entry says how the exception is recognised (its type and/or a pattern of its
message, in which process: the command, a worker, or a thread of the command's
``multiprocessing.Pool`` such as its result handler) and which hazard it is
(``gpudoctor/hazards.py`` holds what it means and the fix, shared with the other faces).

The evidence is what the bootstrap recorded (the exception each process died of, with
its frames) and, for exceptions no process died of, the tracebacks in stderr: a thread's
("Exception in thread Thread-3 (_handle_results):", printed by ``threading.excepthook``)
and ProcessPoolExecutor's "Exception in initializer:". Where the traceback holds no
frame of the user's (the result handler dies inside ``pickle``), the user's line is read
from where the waiting parent is blocked, and the lines the exception names are found in
the main script's source.
"""

from __future__ import annotations

import ast
import linecache
import re
import resource
import shutil
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from gpudoctor import hazards
from gpudoctor.knowledge.processes import SPAWN_LAUNCHER_TARGET
from gpudoctor.probe import explain_definition, explain_pool_callback, explain_shared_tensor, wording
from gpudoctor.probe.diagnosis import OBSERVED, Cause
from gpudoctor.probe.explain_lost_task import pool_wait
from gpudoctor.probe.failures import Frame, Raised, how_it_ended, is_failure, is_helper, raised
from gpudoctor.probe.units import format_size
from gpudoctor.probe.verdicts import Verdict

if TYPE_CHECKING:
    from gpudoctor.probe.diagnosis import ProcessVerdict
    from gpudoctor.probe.error_strings import Match
    from gpudoctor.probe.record import RunRecord

# Where an exception was raised.
COMMAND = "command"  # the process the user started
WORKER = "worker"  # any child of it
RESULT_HANDLER = "result-handler"  # the result-handler thread of a multiprocessing.Pool (in the pool's parent)
CALLBACK = "pool-callback"  # a Pool callback, run in (and killing) that result-handler thread
INITIALIZER = "initializer"  # a ProcessPoolExecutor worker's initializer (logged by concurrent.futures)
ANY = "any"


@dataclass(frozen=True)
class Seen:
    """An exception found in the run: in which process (None: not known, a traceback in
    stderr), where, and its traceback."""

    pid: int | None
    where: str  # COMMAND, WORKER, RESULT_HANDLER, INITIALIZER
    error: Raised
    quoted: bool  # already quoted in the explanation (the command's or a child's exception)
    t: float | None = None  # when it was recorded, seconds from the start


@dataclass(frozen=True)
class Story:
    """One recognised exception, told: the hazard, the sentences of evidence, the user's line."""

    hazard: hazards.Hazard
    seen: Seen
    evidence: tuple[str, ...]
    processes: tuple[int, ...]


Detail = Callable[["Seen", "RunRecord", "Sequence[ProcessVerdict]"], list[str]]
Involves = Callable[["Seen", "RunRecord", "Sequence[ProcessVerdict]"], tuple[int, ...]]


@dataclass(frozen=True)
class Known:
    """One exception that means something specific when processes share work."""

    hazard: hazards.Hazard
    types: tuple[str, ...]  # the type's name without its module ("BrokenProcessPool"); () any type
    message: str | None  # a regular expression searched in the message; None: any message
    where: tuple[str, ...]  # where it counts: COMMAND, WORKER, RESULT_HANDLER, INITIALIZER, ANY
    through: tuple[str, ...] = ()  # library files one of its frames must be in ("multiprocessing/managers.py")
    detail: Detail | None = None  # the sentences only this run can say (the task function, the dead peer)
    involves: Involves | None = None  # the other processes the story is about (the one spawn reports)

    def matches(self, seen: Seen) -> bool:
        name = seen.error.type.rsplit(".", 1)[-1]
        if self.types and name not in self.types:
            return False
        if self.message is not None and not re.search(self.message, seen.error.message):
            return False
        if ANY not in self.where and seen.where not in self.where:
            return False
        return not self.through or any(_posix(f.path).endswith(t) for f in seen.error.frames for t in self.through)


def _posix(path: str) -> str:
    return path.replace("\\", "/")


# ---- what the run can say about each one ------------------------------------------------

def _script(judged: Sequence[ProcessVerdict]) -> Path | None:
    """The main script of the command (its first ``.py`` argument), when it can be read."""
    root = next((p for p in judged if p.start == "root"), None)
    for arg in (root.cmdline[1:] if root else ()):
        if arg.endswith(".py") and Path(arg).is_file():
            return Path(arg)
    return None


def _tree(script: Path | None) -> ast.Module | None:
    if script is None:
        return None
    try:
        return ast.parse(script.read_text(errors="replace"))
    except (OSError, SyntaxError, ValueError):
        return None


def _at(script: Path, line: int) -> str:
    text = linecache.getline(str(script), line).strip()
    return f"{script}:{line}" + (f": {text}" if text else "")


def _waiting_parent(judged: Sequence[ProcessVerdict]) -> tuple[ProcessVerdict | None, str | None, str | None]:
    """The process that waits in a Pool (hung or idle), where, and the user's frame under it."""
    for p in judged:
        if p.verdict in (Verdict.HUNG, Verdict.KILLED) and p.stack:
            waits_in, user = pool_wait(p)
            if waits_in:
                return p, waits_in, user
    return None, None, None


_CALL = re.compile(r"\.(?:map|map_async|imap|imap_unordered|starmap|starmap_async|apply|apply_async|submit)"
                   r"\(\s*([A-Za-z_][\w.]*)")


def _task_function(text: str, tree: ast.Module | None, script: Path | None) -> str | None:
    """"parse (prog.py:22)": the function a pool call's line hands to the workers, and where
    the script defines it."""
    call = _CALL.search(text)
    if call is None:
        return None
    name = call[1].rsplit(".", 1)[-1]
    defined = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name] if tree else []
    if not defined or script is None:
        return f"`{name}`"
    function = defined[0]
    returns = [n.lineno for n in ast.walk(function) if isinstance(n, ast.Return) and n.value is not None]
    back = f" (it returns at {wording.agree(len(returns), 'line', 'lines')} {', '.join(map(str, returns))})" \
        if returns else ""
    return f"`{name}`, defined at {script}:{function.lineno}{back}"


def _result_handler(seen: Seen, run: RunRecord, judged: Sequence[ProcessVerdict]) -> list[str]:
    """Which exception class could not be rebuilt, where it is defined and raised, and
    where the parent waits."""
    found: list[str] = []
    script = _script(judged)
    tree = _tree(script)
    named = re.search(r"(\w+)\.__init__\(\)", seen.error.message)
    if named and tree is not None and script is not None:
        cls = named[1]
        inits = [n.lineno for c in ast.walk(tree) if isinstance(c, ast.ClassDef) and c.name == cls
                 for n in c.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"]
        raises = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Raise) and isinstance(n.exc, ast.Call)
                  and isinstance(n.exc.func, ast.Name) and n.exc.func.id == cls]
        if inits:
            found.append(f"The exception class `{cls}` cannot be rebuilt from its `args`: its `__init__` "
                         f"({script}:{inits[0]}) takes other arguments than it passes to `super().__init__()`.")
        if raises:
            found.append("A task raised it in a worker at your code " + "; ".join(_at(script, n) for n in raises[:3]))
    parent, waits_in, user = _waiting_parent(judged)
    if parent is not None:
        text = _user_text(user, script) if user else ""
        called = f", called from your code {_resolved(user, script)}" + (f": {text.strip()}" if text.strip() else "") \
            if user else ""
        task = _task_function(text, tree, script) if text else None
        found.append(f"pid {parent.pid} waits for ever in {waits_in}{called}" + (f"; the tasks run {task}" if task
                                                                                 else "") + ".")
    return found


def _resolved(user: str, script: Path | None) -> str:
    """A frame as py-spy names it ("<module> (prog.py:32)") with the script's full path."""
    where = re.search(r"\(([^()]+):(\d+)\)$", user)
    if where is None or script is None or Path(where[1]).name != script.name:
        return user
    return f"{script}:{where[2]}"


def _user_text(user: str, script: Path | None) -> str:
    """The source line of a frame named as py-spy names it ("<module> (prog.py:32)")."""
    where = re.search(r"\(([^()]+):(\d+)\)$", _resolved(user, script)) or re.search(r"^(.+):(\d+)$",
                                                                                     _resolved(user, script))
    return linecache.getline(where[1], int(where[2])) if where else ""


def _unpicklable_result(seen: Seen, run: RunRecord, judged: Sequence[ProcessVerdict]) -> list[str]:
    """Which task function returned what, and what in it could not be pickled."""
    script = _script(judged)
    user = seen.error.user_frame
    task = _task_function(user.text, _tree(script), script) if user else None
    value = re.search(r"<(?:__main__|__mp_main__|[\w.]+)\.(\w+) object at", seen.error.message)
    what = re.search(r"(?:cannot|Can't) pickle '?([\w.<> ]+?)'? object", seen.error.message) \
        or re.search(r"Can't pickle (local object '[^']+')", seen.error.message)
    returned = f"a `{value[1]}`" if value else "a value"
    holding = f", which holds a `{what[1]}`" if what else ""
    by = f"The task function {task} returned" if task else "A task returned"
    return [f"{by} {returned}{holding}: it could not be pickled to be sent back to the parent."]


def _open_files(seen: Seen, run: RunRecord, judged: Sequence[ProcessVerdict]) -> list[str]:
    """The open-file limit the command started with (gpudoctor's own: the tree inherits it)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return []
    lowered = " (or lower, if the program lowered its own)" if soft > 4096 else ""
    return [f"The command started with an open-file limit of {soft}{lowered}: gpudoctor's `ulimit -n`, which the "
            "tree inherits."]


def _shared_memory(seen: Seen, run: RunRecord, judged: Sequence[ProcessVerdict]) -> list[str]:
    """The size of /dev/shm as gpudoctor sees it (a container's or a mount namespace's may be smaller)."""
    workers = [p for p in judged if p.start != "root" and not is_helper(p.cmdline)]
    found = [f"The command had {wording.plural(len(workers), 'worker process', 'worker processes')}."] \
        if workers else []
    try:
        usage = shutil.disk_usage("/dev/shm")
    except OSError:
        return found
    return found + [f"gpudoctor's /dev/shm holds {format_size(usage.total)} ({format_size(usage.free)} free now): the "
                    "program's was smaller or full (a container's, or a mount namespace of its own)."]


def _dead(run: RunRecord, judged: Sequence[ProcessVerdict], before: float | None,
          besides: int | None) -> list[ProcessVerdict]:
    """The children that ended abruptly (a signal, a non-zero status) before ``before``."""
    reaped = {e["child"]: e["t"] for e in run.events
              if e["event"] == "reaped" and isinstance(e.get("child"), int) and isinstance(e.get("t"), (int, float))}
    stopped_by_us = {t.pid for t in run.processes if t.killed_by_supervisor or t.alive_at_stop}
    return [p for p in judged if p.start != "root" and p.pid != besides and is_failure(p.exit_code)
            and p.pid not in stopped_by_us and not is_helper(p.cmdline)
            and (before is None or reaped.get(p.pid, 0.0) <= before + 0.5)]


def _told(dead: ProcessVerdict) -> str:
    how = how_it_ended(dead.exit_code or 0)
    raised_here = f" ({dead.exception}" + (f", from your code {dead.exception_at}" if dead.exception_at else "") \
        + ")" if dead.exception else ""
    return f"pid {dead.pid} ({dead.start}) {how}{raised_here}"


def _broken_pool(seen: Seen, run: RunRecord, judged: Sequence[ProcessVerdict]) -> list[str]:
    """Which worker's end broke the pool, as the probe saw it."""
    dead = _dead(run, judged, seen.t, seen.pid)
    initializer = [s for s in _stderr_blocks(run.stderr) if s.where == INITIALIZER]
    found = []
    if dead:
        found.append(f"The worker that broke the pool: {'; '.join(_told(p) for p in dead[:3])}.")
        if any(p.exit_code == -9 for p in dead):
            found.append("SIGKILL from outside gpudoctor is what the kernel's OOM killer sends when memory runs "
                         "out.")
    if initializer:
        frame = initializer[0].error.user_frame
        at = f", at your code {frame.path}:{frame.line} (in {frame.function})" + (f": {frame.text}" if frame.text
                                                                                  else "") if frame else ""
        found.append(f"A worker's initializer raised {initializer[0].error.summary}{at}; the worker then ended, "
                     "and the pool was marked broken.")
    if not found:
        found.append("gpudoctor did not see the worker end (its parent reaped it first, or it ended outside the "
                     "tree's view).")
    return found


def _peer(seen: Seen, run: RunRecord, judged: Sequence[ProcessVerdict]) -> list[str]:
    """The process at the other end, when the probe saw one die before the exception."""
    dead = _dead(run, judged, seen.t, seen.pid)
    managers = [f for f in seen.error.frames if _posix(f.path).endswith("multiprocessing/managers.py")]
    other = "the Manager's server process" if managers else "the process at the other end"
    if not dead:
        return [f"gpudoctor did not see {other} die: it may have closed its end, or exited cleanly."]
    return [f"{other[0].upper()}{other[1:]} is most likely {_told(dead[0])}, before this exception."]


def _memory(seen: Seen, run: RunRecord, judged: Sequence[ProcessVerdict]) -> list[str]:
    """How much memory the processes held at their peak, as the samples saw it: the one
    that raised, and the workers beside it (several each holding as much multiply it)."""
    by_pid = {p.pid: p for p in judged}
    own = by_pid.get(seen.pid) if seen.pid is not None else None
    relayed = any(_posix(f.path).endswith(("multiprocessing/pool.py", "concurrent/futures/_base.py"))
                  for f in seen.error.frames)
    found = []
    if relayed:
        found.append("It was raised in a worker, by a task, and raised again here by the pool that waited for "
                     "the task's result.")
    elif own is not None and own.rss_peak:
        found.append(f"pid {own.pid} held up to {format_size(own.rss_peak)} (resident) before it ran out.")
    workers = [p for p in judged if p.start != "root" and not is_helper(p.cmdline) and p.rss_peak]
    if len(workers) > 1:
        peaks = sorted((p.rss_peak or 0) for p in workers)
        found.append(f"{wording.plural(len(workers), 'worker process', 'worker processes')} held up to "
                     f"{format_size(peaks[-1])} each ({format_size(sum(peaks))} together at their peaks).")
    if not found or (relayed and len(found) == 1):
        found.append("gpudoctor's samples did not see the memory the processes held (they failed between two "
                     "samples, or asked for more than they could get in one allocation).")
    return found


def _local_object(seen: Seen, run: RunRecord, judged: Sequence[ProcessVerdict]) -> list[str]:
    """Where the script defines the local object it could not pickle (a lambda, a nested function)."""
    where = explain_definition.local_definition(seen.error.message, _script(judged))
    return [where] if where else []


# The type name CPython's ``assert_spawning`` puts in its message ("Lock objects should only
# be shared ...") and the multiprocessing calls that make such an object (an Event and a
# Barrier hold a Condition, and fail on it); a ctypes name ("c_int", "c_double_Array_3") is a
# RawValue or RawArray, or a Value or Array made with lock=False.
_MADE_BY: dict[str, tuple[str, ...]] = {
    "Lock": ("Lock",), "RLock": ("RLock",), "Semaphore": ("Semaphore",), "BoundedSemaphore": ("BoundedSemaphore",),
    "Condition": ("Condition", "Event", "Barrier"), "Synchronized": ("Value",), "SynchronizedArray": ("Array",),
    "SynchronizedString": ("Array",), "Queue": ("Queue",), "JoinableQueue": ("JoinableQueue",),
    "SimpleQueue": ("SimpleQueue",),
}
_RAW = ("RawValue", "RawArray", "Value", "Array")


def _made_at(tree: ast.Module | None, names: Sequence[str], script: Path | None) -> list[str]:
    """Where the script calls one of ``names`` from multiprocessing (or a context of it):
    not a Manager's (``manager.Lock()``, whose proxy pickles) nor threading's."""
    if tree is None or script is None:
        return []
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
        receiver = ast.unparse(func.value).lower() if isinstance(func, ast.Attribute) else ""
        if name in names and "manager" not in receiver and "threading" not in receiver and "queue" != receiver:
            found.append(node.lineno)
    return [_at(script, line) for line in sorted(set(found))[:3]]


def _pickled_by(seen: Seen) -> str:
    """Who pickled the task: a Pool's task-handler thread, an executor, or another process start."""
    functions = {f.function.rsplit(".", 1)[-1] for f in seen.error.frames}
    paths = [_posix(f.path) for f in seen.error.frames]
    if "_handle_tasks" in functions:
        return "The Pool's task-handler thread pickles each task (its function and arguments) to send it to a worker"
    if any(p.endswith("concurrent/futures/process.py") for p in paths):
        return "The executor pickles each call (its function and arguments) to send it to a worker"
    return "It was pickled to be sent to another process"


def _sync_object(seen: Seen, run: RunRecord, judged: Sequence[ProcessVerdict]) -> list[str]:
    """Which object refused, what pickled it, and where the script makes it."""
    named = re.match(r"(\w+) objects should only be shared", seen.error.message)
    kind = named[1] if named else "object"
    makers = _MADE_BY.get(kind, _RAW if kind.startswith("c_") else ())
    what = f"a `{kind}`" if kind in _MADE_BY else f"a shared ctypes value (`{kind}`)"
    found = [f"{_pickled_by(seen)}; {what} was in it, and refuses to be pickled once the workers exist: no task "
             "ran, and the call raised the error here."]
    script = _script(judged)
    made = _made_at(_tree(script), makers, script)
    if made:
        calls = " or ".join(f"`{m}()`" for m in makers)
        found.append(f"It is made ({calls}) at your code " + "; ".join(made) + ".")
    return found


# The constructors of what cannot be pickled into a task at all: a pool, a process, a manager.
_HANDLES = ("Pool", "ThreadPool", "Process", "Manager", "SyncManager")


def _pool_object(seen: Seen, run: RunRecord, judged: Sequence[ProcessVerdict]) -> list[str]:
    """The bound method that dragged its object along, and the attribute that holds the pool."""
    script = _script(judged)
    tree = _tree(script)
    user = seen.error.user_frame
    call = _CALL.search(user.text) if user else None
    found = []
    owner = None
    if call and "." in call[1]:
        owner, method = call[1].rsplit(".", 1)
        found.append(f"`{owner}.{method}` is a bound method: pickling it for the workers pickles `{owner}` with "
                     f"every attribute, and the pool is one of them.")
    elif call:
        found.append(f"The pool (or a process or a manager) was among what the call hands the workers with "
                     f"`{call[1]}`: its arguments, or an attribute of one.")
    if tree is None or script is None:
        return found
    kept = [(n.lineno, ast.unparse(t)) for n in ast.walk(tree) if isinstance(n, ast.Assign)
            and isinstance(n.value, ast.Call) and _called(n.value) in _HANDLES
            for t in n.targets if isinstance(t, ast.Attribute)]
    ours = [k for k in kept if owner is None or k[1].startswith(f"{owner.split('.')[0]}.")] or kept
    if ours:
        found.append(f"`{ours[0][1]}` holds it, set at your code {_at(script, ours[0][0])}.")
    return found


def _called(call: ast.Call) -> str | None:
    """The name a call calls ("Pool" for ``mp.Pool(2)``, ``Pool(2)``, ``ctx.Pool(2)``)."""
    func = call.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None


def _traceback(text: str) -> Raised | None:
    """The last traceback in ``text`` (a process's, carried in another's message): its frames
    and its exception."""
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("Traceback (most recent call last):")]
    if not starts:
        return None
    frames: list[Frame] = []
    rest = lines[starts[-1] + 1:]
    for index, line in enumerate(rest):
        file = _FILE.match(line)
        if file:
            following = rest[index + 1] if index + 1 < len(rest) else ""
            code = following.strip() if following.startswith("    ") and not _FILE.match(following) else ""
            path, number = file["path"], int(file["line"])
            frames.append(Frame(path, number, file["function"], linecache.getline(path, number).strip() or code))
            continue
        if line[:1].isspace() or not line.strip():
            continue
        error = _RAISED.match(line.strip())
        if error is None:
            return None
        message = "\n".join([error["message"] or "", *rest[index + 1:]]).strip()
        return Raised(error["type"], message, tuple(frames))
    return None


_SPAWN_RAISED = re.compile(r"-- Process (\d+) terminated with the following error:\n(.*)", re.S)
_SPAWN_EXITED = re.compile(r"^process (\d+) terminated with (?:signal (\w+)|exit code (-?\d+))")
_SPAWN_TARGET = SPAWN_LAUNCHER_TARGET


def _spawned(run: RunRecord, judged: Sequence[ProcessVerdict], parent: int | None) -> list[ProcessVerdict]:
    """The processes ``torch.multiprocessing.spawn`` started from ``parent``, in the order of
    their index (the order they were made in: "SpawnProcess-1", "-2", ...)."""
    by_pid = {p.pid: p for p in judged}
    made = {e["pid"]: e.get("name", "") for e in run.events
            if e.get("event") == "process" and e.get("target") == _SPAWN_TARGET and e.get("ppid") == parent
            and e.get("pid") in by_pid}
    if not made:  # no record of their targets: the parent's children but its helpers
        return sorted((p for p in judged if p.ppid == parent and p.start != "root" and not is_helper(p.cmdline)),
                      key=lambda p: p.pid)

    def order(pid: int) -> tuple[int, int]:
        number = re.search(r"-(\d+)$", str(made[pid]))
        return (int(number[1]) if number else 0, pid)

    return [by_pid[pid] for pid in sorted(made, key=order)]


def _failed_process(run: RunRecord, judged: Sequence[ProcessVerdict], seen: Seen,
                    index: int) -> tuple[ProcessVerdict | None, list[ProcessVerdict], list[ProcessVerdict]]:
    """The process with spawn's ``index`` (the one that failed), the others, and all of them
    in the order of spawn's index (empty when that order is not known)."""
    spawned = _spawned(run, judged, seen.pid)
    if 0 <= index < len(spawned) and spawned[index].exit_code not in (0, None):
        return spawned[index], [p for p in spawned if p is not spawned[index]], spawned
    # An earlier spawn's processes are in the list too: the one that failed is the one that exited so.
    failed = next((p for p in spawned if is_failure(p.exit_code)), None)
    return failed, [p for p in spawned if p is not failed], []


def _consequences(others: Sequence[ProcessVerdict], index: int, numbered: Sequence[ProcessVerdict]) -> str:
    """What became of the other processes: spawn stopped them (``numbered``: the processes in
    the order of spawn's index, when the one that failed is at its index there)."""
    if not others:
        return ("spawn terminates the other processes when one fails (gpudoctor did not see them end): their ends "
                "are a consequence, not a cause.")
    told = "; ".join((f"process {numbered.index(p)}, " if p in numbered else "")
                     + f"pid {p.pid}, {how_it_ended(p.exit_code) if p.exit_code is not None else 'ended'}"
                     for p in others[:4])
    return (f"The other processes were stopped by spawn after process {index} failed, as a consequence, not a "
            f"cause ({told}).")


def _spawned_raised(seen: Seen, run: RunRecord, judged: Sequence[ProcessVerdict]) -> list[str]:
    """Which process raised what, at which line of the user's, and that the others were stopped."""
    found = _SPAWN_RAISED.search(seen.error.message)
    if found is None:
        return []
    index = int(found[1])
    failed, others, numbered = _failed_process(run, judged, seen, index)
    inner = _traceback(found[2])
    pid = f" (pid {failed.pid})" if failed else ""
    if inner is None:
        return [f"Process {index} of `torch.multiprocessing.spawn`{pid} raised the error in its traceback above.",
                _consequences(others, index, numbered)]
    theirs = [f for f in inner.frames if f.users]
    at = ""
    if theirs:
        frame = theirs[-1]
        at = f", at your code {frame.path}:{frame.line} (in {frame.function})" + (f": {frame.text}" if frame.text
                                                                                  else "")
        if len(theirs) > 1:
            at += "; called from " + ", from ".join(f"{f.path}:{f.line} (in {f.function})" for f in theirs[-2::-1][:2])
    return [f"Process {index} of `torch.multiprocessing.spawn`{pid} raised {inner.summary}{at}.",
            _consequences(others, index, numbered)]


def _spawned_exited(seen: Seen, run: RunRecord, judged: Sequence[ProcessVerdict]) -> list[str]:
    """Which process ended how (its exception, its memory if it was killed), and that the others were stopped."""
    found = _SPAWN_EXITED.search(seen.error.message)
    if found is None:
        return []
    index = int(found[1])
    failed, others, numbered = _failed_process(run, judged, seen, index)
    lines = []
    if failed is not None:
        lines.append(f"Process {index} of `torch.multiprocessing.spawn`: {_told(failed)}.")
        if failed.exit_code == -9 and not any(t.pid == failed.pid and t.killed_by_supervisor for t in run.processes):
            held = f" (it held up to {format_size(failed.rss_peak)} resident)" if failed.rss_peak else ""
            lines.append(f"SIGKILL from outside gpudoctor is what the kernel's OOM killer sends when memory runs "
                         f"out{held}.")
    return [*lines, _consequences(others, index, numbered)]


def _spawned_failure(seen: Seen, run: RunRecord, judged: Sequence[ProcessVerdict]) -> tuple[int, ...]:
    """The pid of the process spawn reports (for the JSON cause's processes)."""
    found = _SPAWN_RAISED.search(seen.error.message) or _SPAWN_EXITED.search(seen.error.message)
    if found is None:
        return ()
    failed, _, _ = _failed_process(run, judged, seen, int(found[1]))
    return (failed.pid,) if failed else ()


def _callback(seen: Seen, run: RunRecord, judged: Sequence[ProcessVerdict]) -> list[str]:
    """Which callback raised, where it is given to the pool, and how the parent waits."""
    root = next((p.pid for p in judged if p.start == "root"), None)
    return explain_pool_callback.lines(seen.error, seen.pid if seen.pid is not None else root, run, judged)


def _sender_exited(seen: Seen, run: RunRecord, judged: Sequence[ProcessVerdict]) -> list[str]:
    """What was sent as a handle, and which process had exited before it was redeemed."""
    return explain_shared_tensor.lines(seen.error, seen.t, seen.pid, run, judged)


def _senders(seen: Seen, run: RunRecord, judged: Sequence[ProcessVerdict]) -> tuple[int, ...]:
    """The process that had exited with the items still queued (for the JSON cause)."""
    return tuple(p.pid for p, _ in explain_shared_tensor.senders(seen.t, seen.pid, run, judged)[:1])


# ---- the catalogue -----------------------------------------------------------------------

CATALOGUE: tuple[Known, ...] = (
    # torch/multiprocessing/spawn.py (ProcessContext.join, torch 1.4 to 2.x): a process that raised
    # sends its traceback, and the parent raises ProcessRaisedException("\n\n-- Process N terminated
    # with the following error:\nTraceback ..."); one that ended without one, ProcessExitedException
    # ("process N terminated with signal SIGKILL" / "... with exit code 2"). First: the carried
    # traceback may hold any message the entries below look for, and spawn's story is the one to tell.
    Known(hazards.SPAWNED_PROCESS_RAISED, ("ProcessRaisedException",), r"-- Process \d+ terminated with the following",
          (COMMAND, WORKER), detail=_spawned_raised, involves=_spawned_failure),
    Known(hazards.SPAWNED_PROCESS_EXITED, ("ProcessExitedException",), r"^process \d+ terminated with",
          (COMMAND, WORKER), detail=_spawned_exited, involves=_spawned_failure),
    # CPython 3.8 to 3.13: Pool._handle_results unpickles each result; an exception class
    # that cannot be rebuilt from its args raises TypeError there and the thread dies
    # (python/cpython#79492, #103061).
    Known(hazards.TASK_EXCEPTION_UNPICKLABLE, (), None, (RESULT_HANDLER,), detail=_result_handler),
    # multiprocessing/pool.py (3.8 to 3.13): ApplyResult._set / MapResult._set call the callback in
    # that same thread; an exception out of it kills the thread (python/cpython#83371).
    Known(hazards.POOL_CALLBACK_RAISED, (), None, (CALLBACK,), detail=_callback),
    # multiprocessing/pool.py: worker() wraps a result that fails to pickle in
    # MaybeEncodingError("Error sending result: '...'. Reason: '...'"), raised by Pool.map.
    Known(hazards.TASK_RESULT_UNPICKLABLE, ("MaybeEncodingError",), r"Error sending result", (ANY,),
          detail=_unpicklable_result),
    # torch/utils/data/dataloader.py (_try_get_data): "Too many open files. Communication with
    # the workers is no longer possible..."; torch.multiprocessing's fd passing: "received 0
    # items of ancdata"; any OSError errno 24.
    Known(hazards.TOO_MANY_OPEN_FILES, (), r"Too many open files|received 0 items of ancdata|\[Errno 24\]", (ANY,),
          detail=_open_files),
    # libtorch (THManagedMapAllocator / shm): "unable to allocate shared memory(shm) for file
    # </torch_...>: No space left on device (28)", older "unable to write to file </torch_...>";
    # the DataLoader's "killed by signal: Bus error ... out of shared memory"; its workers'
    # "Unexpected bus error encountered in worker ... insufficient shared memory (shm)".
    Known(hazards.SHARED_MEMORY_FULL, (),
          r"unable to allocate shared memory\(shm\)|unable to write to file </torch_|workers are out of shared "
          r"memory|insufficient shared memory \(shm\)", (ANY,), detail=_shared_memory),
    # concurrent/futures/process.py (3.8 to 3.13): "A process in the process pool was terminated
    # abruptly while the future was running or pending." / "A child process terminated
    # abruptly, the process pool is not usable anymore".
    Known(hazards.BROKEN_PROCESS_POOL, ("BrokenProcessPool",), None, (COMMAND, WORKER), detail=_broken_pool),
    # A shared item redeemed with its sender at get() (torch.multiprocessing's fd strategy), the
    # sender gone: before the generic connection errors, which its frames also pass through.
    Known(explain_shared_tensor.HAZARD, explain_shared_tensor.TYPES, None, (COMMAND, WORKER),
          through=explain_shared_tensor.FRAMES, detail=_sender_exited, involves=_senders),
    # A Pipe, a Queue or a Manager proxy whose other end is gone (multiprocessing/connection.py,
    # managers.py).
    Known(hazards.PEER_PROCESS_GONE, ("EOFError", "ConnectionResetError", "BrokenPipeError",
                                      "ConnectionRefusedError", "ConnectionAbortedError"), None, (COMMAND, WORKER),
          through=("multiprocessing/connection.py", "multiprocessing/managers.py"), detail=_peer),
    # multiprocessing/context.py (set_start_method): RuntimeError('context has already been set').
    Known(hazards.START_METHOD_SET_TWICE, ("RuntimeError",), r"^context has already been set", (ANY,)),
    # The parent could not pickle the function for the workers (GD108's hazard, the parent's side:
    # a lambda, a nested function). CPython 3.11 to 3.13 print "AttributeError: Can't pickle local
    # object", earlier ones "PicklingError: Can't pickle <function ...>".
    Known(hazards.WORKER_NOT_IMPORTABLE, ("PicklingError", "AttributeError"),
          r"Can't pickle (local object|<function)|Can't get local object", (COMMAND,), detail=_local_object),
    # multiprocessing/context.py (assert_spawning, 3.8 to 3.13): "Lock objects should only be shared
    # between processes through inheritance", from the __getstate__ of a Lock, RLock, Semaphore,
    # Condition (an Event's or a Barrier's), a Queue, a synchronized Value or Array, and from
    # sharedctypes.reduce_ctype (RawValue, RawArray): pickled into a task.
    Known(hazards.SYNC_OBJECT_PICKLED, ("RuntimeError",), r"objects should only be shared between processes through "
          r"inheritance", (ANY,), detail=_sync_object),
    # multiprocessing/pool.py (Pool.__reduce__): NotImplementedError("pool objects cannot be passed
    # between processes or pickled"); process.py (AuthenticationString.__reduce__), a Process's or a
    # Manager's authkey: TypeError("Pickling an AuthenticationString object is disallowed for
    # security reasons").
    Known(hazards.POOL_PICKLED, ("NotImplementedError", "TypeError"), r"pool objects cannot be passed between "
          r"processes or pickled|Pickling an AuthenticationString object is disallowed", (ANY,), detail=_pool_object),
    # An allocation that failed (an address-space limit, no overcommit); from a Pool worker it
    # comes back to the parent as the task's error.
    Known(hazards.MEMORY_ERROR, ("MemoryError",), None, (ANY,), detail=_memory),
)


# ---- where the exceptions are found -------------------------------------------------------

_HEADER = re.compile(r"^Exception in thread (?P<thread>.+):$|^(?P<init>Exception in initializer):$")
_FILE = re.compile(r'^\s+File "(?P<path>[^"]+)", line (?P<line>\d+), in (?P<function>.+)$')
_RAISED = re.compile(r"^(?P<type>[A-Za-z_][\w.]*)(?:: (?P<message>.*))?$")


def _stderr_blocks(text: str) -> list[Seen]:
    """The tracebacks of threads (``threading.excepthook``'s "Exception in thread NAME:")
    and of ProcessPoolExecutor initializers ("Exception in initializer:") in ``text``."""
    found: list[Seen] = []
    lines = text.splitlines()
    for index, line in enumerate(lines):
        header = _HEADER.match(line.strip())
        if header is None:
            continue
        frames: list[Frame] = []
        for rest in lines[index + 1:index + 200]:
            file = _FILE.match(rest)
            if file:
                frames.append(Frame(file["path"], int(file["line"]), file["function"], ""))
                continue
            if rest[:1].isspace() or rest.startswith(("Traceback ", "During handling", "The above exception")) \
                    or not rest.strip():
                continue
            error = _RAISED.match(rest.strip())
            if error is None:
                break
            frames = [replace(f, text=linecache.getline(f.path, f.line).strip()) for f in frames]
            handler = header["thread"] is not None and ("_handle_results" in header["thread"]
                                                        or any(f.function.endswith("_handle_results") for f in frames))
            where = INITIALIZER if header["init"] else (CALLBACK if explain_pool_callback.raised_in_callback(frames)
                                                        else RESULT_HANDLER) if handler else "thread"
            found.append(Seen(None, where, Raised(error["type"], error["message"] or "", tuple(frames)), False))
            break
    return found


def _recorded(run: RunRecord, judged: Sequence[ProcessVerdict]) -> Iterator[Seen]:
    """The exception each process died of, as its bootstrap recorded it."""
    when = {e["pid"]: float(e["t"]) for e in run.events
            if e.get("event") == "exception" and isinstance(e.get("pid"), int) and isinstance(e.get("t"), (int, float))}
    by_pid = {p.pid: p for p in judged}
    for pid, error in raised(run.events).items():
        process = by_pid.get(pid)
        where = COMMAND if process is not None and process.start == "root" else WORKER
        # The command's exception leads the explanation ("The command exited with status 1:
        # X"), a child's its line of failures: neither is quoted again.
        quoted = process is not None and process.exception is not None
        yield Seen(pid, where, error, quoted, when.get(pid))


def find(run: RunRecord, judged: Sequence[ProcessVerdict]) -> list[Story]:
    """Return the recognised exceptions of ``run``: one story per hazard, the command's
    first, then the workers' (identical ones of many workers are one story)."""
    seen = sorted(_recorded(run, judged), key=lambda s: (s.where != COMMAND, s.t or 0.0))
    seen += _stderr_blocks(run.stderr)
    root = next((p.pid for p in judged if p.start == "root"), None)
    stories: dict[str, Story] = {}
    for one in seen:
        known = next((k for k in CATALOGUE if k.matches(one)), None)
        if known is None:
            continue
        if known.hazard.cause in stories:
            story = stories[known.hazard.cause]
            if one.pid is not None and one.pid not in story.processes:
                stories[known.hazard.cause] = replace(story, processes=(*story.processes, one.pid))
            continue
        pid = one.pid if one.pid is not None else root
        evidence = [_lead(one, pid, root)]
        frame = one.error.user_frame
        if frame is not None:
            code = f": {frame.text}" if frame.text else ""
            evidence.append(f"At your code {frame.path}:{frame.line} (in {frame.function}){code}")
        if known.detail is not None:
            evidence += known.detail(one, run, judged)
        involved: tuple[int, ...] = (pid,) if pid is not None else ()
        if known.involves is not None:
            involved += tuple(p for p in known.involves(one, run, judged) if p not in involved)
        stories[known.hazard.cause] = Story(known.hazard, one, tuple(evidence), involved)
    return list(stories.values())


def _lead(seen: Seen, pid: int | None, root: int | None) -> str:
    """Which process (and thread) raised what; the exception is quoted unless it was already."""
    who = {COMMAND: f"The command (pid {pid})", WORKER: f"Worker pid {pid}",
           RESULT_HANDLER: f"The result-handler thread (`_handle_results`) of the Pool in pid {pid}",
           CALLBACK: f"A callback of the Pool in pid {pid}, run in its result-handler thread (`_handle_results`),",
           INITIALIZER: "A ProcessPoolExecutor worker's initializer"}.get(seen.where, f"A thread of pid {pid}")
    if seen.quoted:
        return f"{who} died of the {seen.error.type.rsplit('.', 1)[-1]} above."
    died = "died of" if seen.where in (COMMAND, WORKER, RESULT_HANDLER) else "raised"
    return f"{who} {died} {seen.error.summary}"


def without_superseded(matches: Sequence[Match], stderr: str) -> list[Match]:
    """Leave out the error-string matches a traceback in ``stderr`` tells better: a
    result-handler thread whose traceback shows a callback raised did not die unpickling
    an exception (the string alone, "Exception in thread ... (_handle_results):", says
    only that it died)."""
    blocks = [b for b in _stderr_blocks(stderr) if b.where in (RESULT_HANDLER, CALLBACK)]
    if not blocks or any(b.where == RESULT_HANDLER for b in blocks):
        return list(matches)
    return [m for m in matches if m.pattern.category != hazards.TASK_EXCEPTION_UNPICKLABLE.cause]


def told(stories: Sequence[Story]) -> set[str]:
    """The hazards told here (the error strings' own lines for them are not repeated)."""
    return {s.hazard.cause for s in stories}


def _deferred(story: Story, said: Sequence[str], kinds: set[str]) -> bool:
    """Whether another cause tells this one's story (a dead worker or Manager, told from
    the process that died): then that cause leads, with its own fix."""
    return any(h.cause in kinds or h.fix_line in said for h in _DEFERS_TO.get(story.hazard.cause, ()))


# The dead-process causes that tell an exception's story better, from the process that died.
_DEFERS_TO: dict[str, tuple[hazards.Hazard, ...]] = {
    hazards.BROKEN_PROCESS_POOL.cause: (hazards.EXECUTOR_WORKER_DIED,),
    hazards.PEER_PROCESS_GONE.cause: (hazards.MANAGER_DIED, hazards.RESULT_NEVER_SENT),
}


def lines(stories: Sequence[Story], said: Sequence[str] = ()) -> list[str]:
    """Each recognised exception: who raised it, the user's line, what it means here, the fix
    (``said``: the explanation so far; a story another cause told already is left out)."""
    found: list[str] = []
    for story in stories:
        if not _deferred(story, said, set()):
            found += [*story.evidence, story.hazard.why, story.hazard.fix_line]
    return found


def causes(stories: Sequence[Story], named: Sequence[Cause] = ()) -> list[Cause]:
    """One cause per recognised exception that no other cause already tells (by its
    processes: a worker whose death another cause explains)."""
    elsewhere = {pid for c in named for pid in (*c.processes, *((c.parent,) if c.parent else ()))}
    kinds = {c.kind for c in named}
    found = []
    for story in stories:
        if story.hazard.cause in kinds or _deferred(story, (), kinds) or (
                story.hazard is hazards.PEER_PROCESS_GONE and elsewhere & set(story.processes)):
            continue
        found.append(Cause(kind=story.hazard.cause, certainty=OBSERVED, rule=story.hazard.rule,
                           parent=story.processes[0] if story.seen.where in (RESULT_HANDLER, CALLBACK)
                           and story.processes
                           else None, processes=story.processes, evidence=story.evidence, fix=story.hazard.fix))
    return found
