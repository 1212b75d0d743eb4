"""What a supervised run produced: the limits it ran under, and its frozen evidence.

``gpudoctor.probe.supervise`` re-exports these names; the diagnosis, the reports and
the pytest plugin read them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpudoctor.probe import events, stacks
from gpudoctor.probe.footprint import Footprint
from gpudoctor.probe.ranks import Rank
from gpudoctor.probe.sampler import Peaks, Sample
from gpudoctor.probe.tree import Track
from gpudoctor.probe.verdicts import StopReason


@dataclass(frozen=True)
class Limits:
    """How long and how big the command may get, and how closely it is watched."""

    timeout: float | None = None
    # While the tree still makes CPU progress at ``timeout``, wait on up to this many
    # seconds from the start (None: ``timeout`` is firm). Scenarios use it: a slow or
    # loaded machine makes a variant slow, not wrong, and a hang is still caught by
    # ``hang_after``. A user's own --timeout stays firm: it is what they asked for.
    busy_timeout: float | None = None
    hang_after: float = 30.0
    grace: float = 3.0
    memory_limit: int | None = None
    output_limit: int = 64 * 1024
    sample_interval: float = 0.05
    process_interval: float = 0.5
    native_stacks: bool = True
    # More live processes than this in the tree is a fork bomb: the tree is stopped.
    max_processes: int = 512
    # This many children in a row failing the same way is a crash loop: the tree is
    # stopped (0: never). The default is --crash-loop's (options.CRASH_LOOP).
    crash_loop: int = 20


@dataclass(frozen=True)
class ProcessRun:
    """What the supervisor saw of one process, frozen at the end of the run."""

    pid: int
    ppid: int
    cmdline: tuple[str, ...]
    first_seen: float
    last_seen: float
    alive_at_stop: bool
    exit_code: int | None
    stalled_for: float
    state: str
    wchan: str | None
    threads: int
    rss_peak: int
    killed_by_supervisor: bool  # gpudoctor signalled it (SIGTERM, or SIGKILL after the grace)
    rank: Rank | None = None  # its place in a distributed job (ranks.py), from its environment
    # Seconds from the start to when it was seen unable to finish (a Pool whose result
    # handler died, wedged.py): its stall is its main thread's; None: never.
    wedged_at: float | None = None


@dataclass(frozen=True)
class SignalSender:
    """The process that sent gpudoctor the signal that stopped a run (from its siginfo)."""

    pid: int
    command: tuple[str, ...]  # its command line when the signal came (empty: already gone)
    # One of the supervised tree's own processes: the program signalled gpudoctor itself
    # (its parent), not the user or a CI runner. None: the sender had exited before
    # gpudoctor could look at it (a ``kill`` command that signals and ends at once).
    in_tree: bool | None

    def to_json(self) -> dict[str, object]:
        return {"pid": self.pid, "command": list(self.command), "in_tree": self.in_tree}


@dataclass(frozen=True)
class RunRecord:
    """Everything one supervised run produced, for the diagnosis."""

    command: tuple[str, ...]
    stop_reason: StopReason
    signal_received: int | None
    root_pid: int
    exit_code: int | None
    duration: float
    limits: Limits
    processes: tuple[ProcessRun, ...]
    events: list[events.Event]
    samples: list[Sample]
    peaks: Peaks
    stacks: dict[int, stacks.Stack]
    stdout: str
    stderr: str
    notes: tuple[str, ...]
    # How --memory-limit counted the tree's memory: "pss" (a shared page is split
    # between the processes sharing it), "uss" or "rss" for processes whose
    # /proc/PID/smaps was unreadable ("pss+rss": both kinds); None without a limit.
    memory_measure: str | None = None
    # Each process's footprint (RSS, PSS, USS) when the tree passed --memory-limit; empty
    # when it did not (or no limit was set).
    at_memory_limit: dict[int, Footprint] = field(default_factory=dict)
    # OOM kills the kernel counted in gpudoctor's cgroup during the run (None: unreadable).
    oom_kills: int | None = None
    # "Fatal Python error: ..." reports faulthandler wrote for processes that crashed.
    fatal_errors: dict[int, str] = field(default_factory=dict)
    # How the tree was followed: "subreaper" (orphans reparent to gpudoctor, found by
    # its token; plus a psutil scan) or "psutil scan" alone (no subreaper available).
    tracking: str = "psutil scan"
    # Seconds from the start to the first stopping signal gpudoctor received (None: none).
    signal_at: float | None = None
    # Seconds from the start to the moment gpudoctor stopped watching and began to stop
    # the tree (or saw the command's exit); None where not known (an attached tree).
    stop_at: float | None = None
    # The children of the streak that made gpudoctor stop the tree (--crash-loop), in the
    # order their parents reaped them; empty when no crash loop stopped it.
    crash_loop: tuple[int, ...] = ()
    # Who sent it (None: the kernel, as for Ctrl-C on a terminal, or not known).
    signal_sender: SignalSender | None = None
    # Processes gpudoctor saw in the tree and could not stop (another PID namespace or
    # user): they outlive the run, and the verdict says so.
    escaped: tuple[int, ...] = ()
    # The sampler failed during the run: ``samples`` and the peaks stop where it did.
    samples_partial: bool = False
    # The wall clock (``time.time()``) at t=0 of the run: where its times lie beside another
    # node's (``gpudoctor report``); None where not known.
    started_at: float | None = None


def interrupted(run: RunRecord) -> bool:
    """Tell whether someone outside the tree stopped the run with a signal (Ctrl-C, ``kill``,
    a CI runner): gpudoctor then exits as that signal's shell convention says. A signal the
    tree sent gpudoctor itself is a finding about the program, judged as any other."""
    if run.signal_sender is not None and run.signal_sender.in_tree is True:
        return False
    return run.stop_reason == StopReason.INTERRUPTED or run.signal_received is not None


def freeze(track: Track, start: float, stalled_for: float | None) -> ProcessRun:
    """Freeze a track; ``stalled_for`` is None unless the process was live at the stop."""
    return ProcessRun(
        pid=track.pid,
        ppid=track.ppid,
        cmdline=track.cmdline,
        first_seen=round(track.first_seen - start, 3),
        last_seen=round(track.last_seen - start, 3),
        alive_at_stop=stalled_for is not None,
        exit_code=track.exit_code,
        stalled_for=round(stalled_for or 0.0, 3),
        state=track.state,
        wchan=track.wchan,
        threads=track.threads,
        rss_peak=track.rss_peak,
        killed_by_supervisor=track.killed_by_supervisor,
        rank=track.rank,
        wedged_at=None if track.wedged_since is None else round(track.wedged_since - start, 3),
    )
