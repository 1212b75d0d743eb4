"""Explain a failure in which a ``multiprocessing`` Manager's server process died and the
processes that used its proxies then failed.

The shape: a process of the tree ended on its own (a signal, such as the OOM killer's
SIGKILL) with no exception of its own, and other processes died of the errors a proxy
call meets when the server is gone (``ConnectionResetError``, ``BrokenPipeError``,
``EOFError``, ``ConnectionRefusedError``), raised through ``multiprocessing/managers.py``
(their recorded traceback says so). A server process looks like any fork or spawn child
from outside: that the dead one was the server is said from those failures, as most
likely, unless the bootstrap recorded which Process each child ran (its ``process``
event): then the server is named for what it ran, ``BaseManager._run_server``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpudoctor.hazards import MANAGER_DIED
from gpudoctor.probe import peer_stacks, wording
from gpudoctor.probe.diagnosis import OBSERVED, Cause
from gpudoctor.probe.failures import how_it_ended, raised

if TYPE_CHECKING:
    from gpudoctor.probe.diagnosis import ProcessVerdict
    from gpudoctor.probe.record import RunRecord

_MANAGERS = "multiprocessing/managers.py"
_SERVER = "multiprocessing.managers.BaseManager._run_server"
_LOST_SERVER = ("ConnectionResetError", "BrokenPipeError", "EOFError", "ConnectionRefusedError",
                "ConnectionAbortedError")


@dataclass(frozen=True)
class ManagerDied:
    servers: tuple[ProcessVerdict, ...]  # the dead process(es) that most likely were the server
    died: tuple[str, ...]
    failed: tuple[ProcessVerdict, ...]  # the processes that died of a proxy call
    # The servers' Process names ("SyncManager-1") where the bootstrap recorded that they ran
    # the Manager's server (BaseManager._run_server); empty: said as most likely.
    named: tuple[str, ...] = ()

    @property
    def told(self) -> set[int]:
        return {p.pid for p in self.servers} | {p.pid for p in self.failed}


def find(run: RunRecord, judged: Sequence[ProcessVerdict]) -> list[ManagerDied]:
    """Return the story of a Manager's server that died before its clients failed."""
    errors = raised(run.events)
    failed = [p for p in judged if (e := errors.get(p.pid)) is not None and e.type in _LOST_SERVER
              and any(peer_stacks.in_file(f.path, _MANAGERS) for f in e.frames)]
    if not failed:
        return []
    servers = [p for p in peer_stacks.died_on_their_own(run, judged)
               if p.pid not in {f.pid for f in failed} and (p.exit_code or 0) < 0 and not p.exception]
    started = peer_stacks.targets(run)
    known = [p for p in servers if started.get(p.pid, ("", ""))[1].endswith(_SERVER)]
    if known or any(p.pid in started for p in servers):
        servers = known  # the bootstrap recorded what each ran: only a server is one
    if not servers:
        return []
    reaped = peer_stacks.reaped_at(run)
    return [ManagerDied(tuple(servers), tuple(peer_stacks.when(p, reaped) for p in servers), tuple(failed),
                        tuple(started[p.pid][0] for p in known))]


def _story(story: ManagerDied) -> list[str]:
    deaths = "; ".join(f"pid {p.pid} {how_it_ended(p.exit_code or 0)}{t}" for p, t in zip(story.servers, story.died,
                                                                                          strict=True))
    n = len(story.servers)
    groups: dict[tuple[str | None, str | None], list[int]] = {}
    for p in story.failed:
        groups.setdefault((p.exception, p.exception_at), []).append(p.pid)
    failures = "; ".join(f"{wording.pids(pids)} with {error}" + (f", from your code {at}" if at else "")
                         for (error, at), pids in groups.items())
    which = (f"{wording.agree(n, 'It was', 'They were')} the server process of a multiprocessing Manager "
             f"({', '.join(story.named)}, running BaseManager._run_server)" if story.named else
             f"{wording.agree(n, 'It was', 'One of them was')} most likely the server process of a multiprocessing "
             "Manager")
    return [f"Manager's server process died: {deaths}, not by gpudoctor. {which}: after it, "
            f"{wording.plural(len(story.failed), 'process')} died in a call of a Manager proxy "
            f"(multiprocessing/managers.py): {failures}."]


def lines(found: Sequence[ManagerDied]) -> list[str]:
    """Say which process was the server, who failed after it and where, why, and the fix."""
    said = [line for story in found for line in _story(story)]
    return said + [MANAGER_DIED.why, MANAGER_DIED.fix_line] if said else []


def causes(found: Sequence[ManagerDied]) -> list[Cause]:
    """One ``manager-died`` cause per story: observed (the clients' errors were raised)."""
    return [Cause(kind=MANAGER_DIED.cause, certainty=OBSERVED, rule=MANAGER_DIED.rule,
                  parent=story.servers[0].ppid, processes=tuple(p.pid for p in story.servers),
                  evidence=tuple(_story(story)), fix=MANAGER_DIED.fix) for story in found]
