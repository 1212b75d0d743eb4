"""The words a diagnosis is made of: what became of a process (``Verdict``) and why the
supervisor stopped watching (``StopReason``).

Both are ``str`` enums: their members are the very strings the JSON report carries and
that scripts, the pytest plugin and the HTML report compare with (``"hung"``,
``"memory-limit"``), so ``Verdict.HUNG == "hung"`` and ``json.dumps`` writes the value.
"""

from __future__ import annotations

from enum import Enum


class _Word(str, Enum):
    """A member shows as its value in f-strings and ``str()`` on every Python gpudoctor
    supports (3.10's mixed-in enums would show ``Verdict.HUNG``)."""

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)


class Verdict(_Word):
    """What became of one process, or of the command as a whole."""

    OK = "ok"
    HUNG = "hung"  # waited with no CPU progress for --hang-after
    STOPPED = "stopped"  # held by SIGSTOP or a tracer: waiting to be continued, not a deadlock
    CRASHED = "crashed"  # a crash signal, a fatal error, or a non-zero exit a worker did not survive
    OOM = "oom"  # out of GPU or host memory
    KILLED = "killed"  # by a signal, by gpudoctor at a limit, or left over after the command
    UNKNOWN = "unknown"  # its own parent reaped it before its exit status could be observed
    # Attached (--pid): waited the whole window without CPU progress, with nothing that shows
    # a hang (a process waiting for input, a socket, a timer looks the same from outside).
    IDLE = "idle"
    # The command as a whole only:
    FAILED = "failed"  # exited non-zero with no crash, hang or OOM to blame
    ESCAPED = "escaped"  # a process of its tree outlived gpudoctor's SIGKILL
    # Children kept failing the same way and being started again (--crash-loop in a row).
    CRASH_LOOP = "crash-loop"


class StopReason(_Word):
    """Why the supervisor stopped watching the tree (and, except for EXITED, stopped it)."""

    EXITED = "exited"  # the command exited by itself
    TIMEOUT = "timeout"  # --timeout passed while something still made progress
    HUNG = "hung"  # nothing in the tree moved for --hang-after
    STOPPED = "stopped"  # nothing moved, and a process was held stopped
    INTERRUPTED = "interrupted"  # a signal reached gpudoctor (Ctrl-C, SIGTERM, SIGHUP)
    MEMORY_LIMIT = "memory-limit"  # the tree's memory passed --memory-limit
    PROCESS_LIMIT = "process-limit"  # more live processes than --max-processes: a fork bomb
    CRASH_LOOP = "crash-loop"  # --crash-loop children in a row failed the same way
    ATTACHED = "attached"  # gpudoctor probe --pid: watched for a window, never stopped
