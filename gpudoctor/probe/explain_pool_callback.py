"""Explain a ``multiprocessing.Pool`` callback that raised and killed the pool's result handler.

``apply_async(..., callback=f)`` (and ``error_callback``, ``map_async``'s and
``starmap_async``'s) runs ``f`` in the pool's result-handler thread (``_handle_results``)
of the parent, from ``ApplyResult._set``/``MapResult._set``. An exception out of ``f``
ends that thread (python/cpython#83371): the job is never completed, ``join()`` and
``get()`` wait for ever, and the worker-handler thread, whose wait includes the result
pipe nobody reads any more, loops without pause. The dead thread's traceback says which:
its innermost frame of ``multiprocessing/pool.py`` is ``_set`` (the line that calls the
callback), where an exception class that cannot be unpickled dies in ``_handle_results``
itself (``explain_exceptions``' ``task-exception-unpicklable``).
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from gpudoctor.probe.explain_lost_task import pool_wait
from gpudoctor.probe.failures import Frame, Raised
from gpudoctor.probe.verdicts import Verdict

if TYPE_CHECKING:
    from gpudoctor.probe.diagnosis import ProcessVerdict
    from gpudoctor.probe.record import RunRecord

_POOL = "multiprocessing/pool.py"
_KEYWORDS = ("callback", "error_callback")


def raised_in_callback(frames: Sequence[Frame]) -> bool:
    """Tell whether a result-handler thread's traceback went through a callback: its
    innermost frame of ``multiprocessing/pool.py`` is a result's ``_set`` (which calls
    the callback; nothing else it calls raises)."""
    ours = [f for f in frames if f.path.replace("\\", "/").endswith(_POOL)]
    return bool(ours) and ours[-1].function.rsplit(".", 1)[-1] == "_set"


def _callback(frames: Sequence[Frame]) -> Frame | None:
    """The callback's own frame: the one right after the pool's ``_set`` (none where the
    callback is a builtin)."""
    for index, frame in enumerate(frames[:-1]):
        if frame.path.replace("\\", "/").endswith(_POOL) and frame.function.rsplit(".", 1)[-1] == "_set":
            return frames[index + 1]
    return None


def _registered(script: Path | None, name: str) -> list[str]:
    """"apply_async(..., callback=on_done) at prog.py:43": the calls of the script that hand
    ``name`` to a pool as a callback."""
    if script is None:
        return []
    try:
        tree = ast.parse(script.read_text(errors="replace"))
    except (OSError, SyntaxError, ValueError):
        return []
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        for keyword in node.keywords:
            value = keyword.value
            named = value.id if isinstance(value, ast.Name) else value.attr if isinstance(value, ast.Attribute) \
                else None
            if keyword.arg in _KEYWORDS and named == name:
                found.append(f"`{node.func.attr}(..., {keyword.arg}={name})` at {script}:{node.lineno}")
    return found[:3]


def _script(judged: Sequence[ProcessVerdict]) -> Path | None:
    root = next((p for p in judged if p.start == "root"), None)
    for arg in (root.cmdline[1:] if root else ()):
        if arg.endswith(".py") and Path(arg).is_file():
            return Path(arg)
    return None


def lines(error: Raised, pid: int | None, run: RunRecord, judged: Sequence[ProcessVerdict]) -> list[str]:
    """Which callback raised, where the script hands it to the pool, and how the parent waits."""
    frame = _callback(error.frames)
    name = frame.function.rsplit(".", 1)[-1] if frame is not None else None
    found = []
    if frame is not None:
        where = f", defined in {frame.path}" if not frame.users else ""
        found.append(f"The exception came out of the callback `{name}`{where}, which the pool ran in its "
                     "result-handler thread: that thread died with it, and the job it was completing never "
                     "completes.")
    else:
        found.append("The exception came out of a callback the pool ran in its result-handler thread: that "
                     "thread died with it, and the job it was completing never completes.")
    given = _registered(_script(judged), name) if name else []
    if given:
        found.append("The callback is given to the pool at " + "; ".join(given) + ".")
    for p in judged:
        if p.pid != pid and pid is not None:
            continue
        waits_in, user = pool_wait(p) if p.stack else (None, None)
        if waits_in and p.verdict in (Verdict.HUNG, Verdict.KILLED):
            called = f", called from your code {user}" if user else ""
            found.append(f"pid {p.pid} waits for ever in {waits_in}{called}.")
            break
    hung = {p.pid for p in judged if p.verdict == Verdict.HUNG}
    wedged = next((t for t in run.processes if t.pid == pid and t.pid in hung and t.wedged_at is not None), None)
    if wedged is not None and wedged.wedged_at is not None:  # (its main thread made no progress)
        found.append(_spin(run, wedged.pid, wedged.wedged_at))
    return found


def _spin(run: RunRecord, pid: int, since: float) -> str:
    """What the process did with the CPU after its result handler died, from the samples."""
    cpu = [(s.t, s.cpu) for s in run.samples if s.kind == "rss" and s.pid == pid and s.cpu is not None
           and s.t >= since]
    used = cpu[-1][1] - cpu[0][1] if len(cpu) > 1 else 0.0
    span = cpu[-1][0] - cpu[0][0] if len(cpu) > 1 else 0.0
    lead = (f"From then on (t={since:.1f} s) gpudoctor counted only its main thread's CPU time as progress of "
            f"pid {pid}, and it made none")
    if span <= 0 or used < 0.2 * span:
        return lead + "."
    return (f"{lead}; the process used {used:.1f} s of CPU in those {span:.1f} s: the pool's worker-handler "
            "thread looping over the results nobody reads any more, busy without progress, not work.")
