"""Attach to a running process tree and explain it, without stopping or signalling it.

``gpudoctor probe --pid PID`` cannot inject the bootstrap a supervised run has, so it
reads what the kernel shows from outside: the tree and each process's parent, start
time, executable and command line (psutil), its thread count and CPU time, the GPU
runtime libraries mapped into it (``/proc/PID/maps``), native and Python stacks
(py-spy, which pauses a process with ptrace for the dump, never with a signal), and
NVML's per-process GPU memory. The evidence becomes the same ``RunRecord`` and
``Diagnosis`` a supervised run produces, so the explanation, the terminal, JSON and
HTML reports are the supervised run's own.

Fork without exec, from outside: a child whose executable and command line are its
parent's, and which started after it, did not exec (``multiprocessing``'s spawn and
forkserver start a new command line; a fork copies the parent's). A fork child inherits
its parent's mappings, so a runtime library mapped in both, at the same address, was
most likely loaded in the parent before the fork. That is what ``runtimes_at_fork``
says for an attached tree: *loaded* before the fork, as the maps show; whether the
parent had also *initialized* it (TensorFlow's thread pools, a CUDA context) the maps
cannot tell, and the explanation cites the parent's thread count beside it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import psutil

from gpudoctor import hazards
from gpudoctor.errors import GpudoctorError
from gpudoctor.probe import causes, explain, install_hint, ranks, stacks, wording
from gpudoctor.probe.diagnosis import Diagnosis, ProcessVerdict
from gpudoctor.probe.maps import loaded_runtimes
from gpudoctor.probe.record import Limits, ProcessRun, RunRecord
from gpudoctor.probe.sampler import Peaks, Sample
from gpudoctor.probe.verdicts import StopReason, Verdict
from gpudoctor.probe.wording import agree, plural

# How much CPU a waiting process may burn (timers, signal handlers) and still count
# as making no progress over the window: a fixed slack plus a fraction of the window.
_CPU_SLACK = 0.05
_CPU_FRACTION = 0.02
_SAMPLE_EVERY = 0.5
_WAITING = frozenset({psutil.STATUS_SLEEPING, psutil.STATUS_DISK_SLEEP})
_HELD = frozenset({psutil.STATUS_STOPPED, psutil.STATUS_TRACING_STOP})
_SPAWN_MARK = "from multiprocessing.spawn import spawn_main"
_MAX_DUMPS = 16  # py-spy dumps of more processes take longer than they help (as supervise.py)


@dataclass
class Observed:
    """What gpudoctor read of one process of the attached tree."""

    pid: int
    ppid: int
    create_time: float
    exe: str | None
    cmdline: tuple[str, ...]
    threads: int = 0
    cpu_start: float = 0.0
    cpu_end: float = 0.0
    rss_peak: int = 0
    state: str = ""
    wchan: str | None = None
    # runtime id -> (library path, start address) of its first mapping
    runtimes: dict[str, tuple[str, str]] = field(default_factory=dict)
    exited: bool = False
    start: str = "exec"  # "root", "fork", "spawn", "exec"
    runtimes_at_fork: tuple[str, ...] = ()
    fork_evidence: str | None = None

    @property
    def cpu_used(self) -> float:
        return max(0.0, self.cpu_end - self.cpu_start)

    def to_json(self) -> dict[str, Any]:
        return {
            "pid": self.pid, "ppid": self.ppid, "create_time": self.create_time, "exe": self.exe,
            "start": self.start, "threads": self.threads, "cpu_in_window": round(self.cpu_used, 3),
            "state": self.state, "wchan": self.wchan,
            "runtimes_loaded": {name: path for name, (path, _) in self.runtimes.items()},
            "fork_evidence": self.fork_evidence, "exited": self.exited,
        }


@dataclass(frozen=True)
class Attached:
    """An attached tree's evidence, as a supervised run's record, and its diagnosis."""

    run: RunRecord
    diagnosis: Diagnosis
    observed: tuple[Observed, ...]
    roots: tuple[int, ...]
    watch: float


def _wchan(pid: int) -> str | None:
    try:
        text = Path(f"/proc/{pid}/wchan").read_text().strip()
    except OSError:
        return None
    return text if text and text != "0" else None


def _owned(process: psutil.Process) -> None:
    """Refuse another user's process with a sentence: /proc hides its maps and py-spy
    cannot read it, so the evidence would be half missing."""
    if os.geteuid() == 0:
        return
    uid = process.uids().real
    if uid != os.getuid():
        raise GpudoctorError(f"pid {process.pid} belongs to another user (uid {uid}): gpudoctor can only "
                             "examine your own processes (run it as that user, or as root)")


def _open(pid: int) -> psutil.Process:
    if pid == os.getpid():
        raise GpudoctorError(f"pid {pid} is this gpudoctor itself: give the PID of the program to examine")
    try:
        process = psutil.Process(pid)
        _owned(process)
        if process.status() == psutil.STATUS_ZOMBIE:
            raise GpudoctorError(f"pid {pid} has exited (a zombie its parent has not collected): "
                                 "nothing left to examine")
        return process
    except psutil.NoSuchProcess:
        raise GpudoctorError(f"no process with pid {pid}") from None
    except psutil.AccessDenied:
        raise GpudoctorError(f"pid {pid} belongs to another user: access denied (run gpudoctor as that "
                             "user, or as root)") from None


def _read(process: psutil.Process, is_root: bool) -> Observed:
    """Read one process's identity and maps (NoSuchProcess: it exited meanwhile)."""
    with process.oneshot():
        cpu = process.cpu_times()
        seen = Observed(
            pid=process.pid,
            ppid=process.ppid(),
            create_time=process.create_time(),
            exe=_exe(process),
            cmdline=tuple(process.cmdline()),
            threads=process.num_threads(),
            cpu_start=cpu.user + cpu.system,
            cpu_end=cpu.user + cpu.system,
            rss_peak=process.memory_info().rss,
            state=process.status(),
            start="root" if is_root else "exec",
        )
    try:
        seen.runtimes = loaded_runtimes(process.pid)
    except FileNotFoundError:
        raise psutil.NoSuchProcess(process.pid) from None
    except OSError:  # another user's process inside our tree: its maps are hidden
        seen.runtimes = {}
    return seen


def _exe(process: psutil.Process) -> str | None:
    try:
        return process.exe() or None
    except psutil.AccessDenied:
        return None


def _tree(roots: Sequence[psutil.Process]) -> list[tuple[psutil.Process, bool]]:
    """The given processes and their descendants, each once; (process, is a given root)."""
    found: dict[int, tuple[psutil.Process, bool]] = {}
    for root in roots:
        found.setdefault(root.pid, (root, True))
    for root in roots:
        try:
            children = root.children(recursive=True)
        except psutil.Error:
            continue
        for child in children:
            # gpudoctor itself is in the tree when attached to its own shell: never examined.
            if child.pid != os.getpid():
                found[child.pid] = (child, False)  # under another given pid: part of its tree
    return [found[pid] for pid in sorted(found)]


def _classify(observed: dict[int, Observed]) -> None:
    """Tell fork children (no exec) from exec'd ones and say which runtimes they inherited."""
    for seen in observed.values():
        parent = observed.get(seen.ppid)
        if seen.start == "root" or parent is None:
            continue
        if any(_SPAWN_MARK in part for part in seen.cmdline):
            seen.start = "spawn"
            continue
        if seen.exe != parent.exe or seen.cmdline != parent.cmdline or seen.create_time < parent.create_time:
            continue
        seen.start = "fork"
        shared = [name for name, (path, address) in seen.runtimes.items()
                  if parent.runtimes.get(name) == (path, address)]
        seen.runtimes_at_fork = tuple(shared)
        if shared:
            seen.fork_evidence = (
                f"same executable and command line as its parent {parent.pid}, started after it (a fork, "
                f"no exec); {explain.runtime_names(shared)} mapped at the same address in both, as a fork "
                "inherits it")
        else:
            seen.fork_evidence = (f"same executable and command line as its parent {parent.pid}, started "
                                  "after it (a fork, no exec)")


def stalled(seen: Observed, window: float) -> bool:
    """Tell whether ``seen`` waited through a window of ``window`` seconds without CPU progress."""
    return not seen.exited and seen.state in _WAITING and seen.cpu_used <= _CPU_SLACK + _CPU_FRACTION * window


def _watch(processes: dict[int, psutil.Process], observed: dict[int, Observed], roots: Sequence[int],
           window: float, samples: list[Sample], started: float,
           watching: Callable[[dict[int, Observed], float], None] | None = None) -> None:
    """Read CPU time and RSS every half second over the window; note who exits."""
    deadline = started + window
    while True:
        now = time.monotonic()
        for pid, process in processes.items():
            seen = observed[pid]
            if seen.exited:
                continue
            try:
                with process.oneshot():
                    cpu = process.cpu_times()
                    rss = process.memory_info().rss
                    seen.state = process.status()
                    seen.threads = process.num_threads()
            except psutil.Error:
                seen.exited = True
                continue
            if seen.state == psutil.STATUS_ZOMBIE:
                seen.exited = True
                continue
            seen.cpu_end = cpu.user + cpu.system
            seen.rss_peak = max(seen.rss_peak, rss)
            samples.append(Sample(round(now - started, 3), "rss", rss, pid=pid, in_tree=True,
                                  cpu=round(seen.cpu_end, 3)))
        gone = [pid for pid in roots if observed[pid].exited]
        if gone:
            raise GpudoctorError(
                f"pid {gone[0]} exited while gpudoctor examined it ({now - started:.1f} s into the "
                f"{window:g} s window): nothing left to explain")
        if watching is not None:
            try:
                watching(observed, now - started)
            except Exception:  # the view observes: it never stops the examination
                watching = None
        if now >= deadline:
            return
        time.sleep(min(_SAMPLE_EVERY, deadline - now))


def _gpu_memory(pids: set[int]) -> tuple[Peaks, list[str]]:
    """NVML's per-process GPU memory of the tree (not available: a value, said once)."""
    from gpudoctor.probe import nvml

    process_gpu: dict[tuple[int, int], int | None] = {}
    used: dict[int, int] = {}
    total: dict[int, int] = {}
    notes: list[str] = []
    reason = nvml.unavailable_reason()
    if reason is None:
        for index in range(nvml.device_count()):
            info = nvml.memory(index)
            if info is not None:
                used[index], total[index] = info.used, info.total
            listed = nvml.processes(index)
            if listed.processes is None:
                notes.append(f"GPU {index}: {listed.reason}")
                continue
            for p in listed.processes:
                if p.pid in pids:
                    process_gpu[(index, p.pid)] = p.used_memory
            if listed.pid_namespace_note:
                notes.append(listed.pid_namespace_note)
    peaks = Peaks(used, total, process_gpu, {}, reason, tuple(notes))
    return peaks, notes


def _ptrace_hint() -> str:
    """How to let py-spy read the stacks, for this machine."""
    try:
        scope = Path("/proc/sys/kernel/yama/ptrace_scope").read_text().strip()
    except OSError:
        scope = None
    hint = ("py-spy needs ptrace: run gpudoctor as root (sudo), or in a container start it with "
            "--cap-add SYS_PTRACE")
    if scope and scope != "0":
        hint = (f"kernel.yama.ptrace_scope is {scope}, which lets a process trace only its own "
                "children: run `sudo sysctl kernel.yama.ptrace_scope=0`, or gpudoctor as root; " + hint)
    return hint


def _is_python(seen: Observed) -> bool:
    """Does the process run a Python interpreter (by its executable's or program's name)?
    An unreadable executable counts as Python: the ptrace hint is then worth giving."""
    if seen.exe is None:
        return True
    names = (Path(seen.exe).name, Path(seen.cmdline[0]).name if seen.cmdline else "")
    return any(name.startswith(("python", "pypy")) for name in names)


def _stacks(pids: set[int], observed: dict[int, Observed], wanted: bool,
            until: float | None = None) -> tuple[dict[int, stacks.Stack], list[str]]:
    if not wanted:
        return {}, ["No stacks: --no-native-stacks was given."]
    py_spy = stacks.find_py_spy()
    if py_spy is None:
        return {}, [f"No Python or native stacks: py-spy is not installed (it comes with the report extra: "
                    f"{install_hint.text()}); gpudoctor never signals an attached process, so without "
                    "py-spy it cannot dump its stacks."]
    if until is not None and time.monotonic() >= until:
        return {}, ["No stacks: --timeout was reached before py-spy could dump them."]
    held = {pid for pid in pids if observed[pid].state in _HELD}
    dumps, error = stacks.native_stacks(pids, py_spy, lambda pid: None, held, until=until)
    notes = []
    if error and len(dumps) < len(pids):
        missing = sorted(pids - set(dumps))
        # py-spy reads Python processes only: for another program the ptrace hint is wrong.
        python = [pid for pid in missing if _is_python(observed[pid])]
        hint = f". {_ptrace_hint()}." if python else ": it reads the stacks of Python processes only."
        notes.append(f"No stacks of {wording.pids(missing)}: py-spy failed ({error}){hint}")
    found = {pid: stack for pid, text in dumps.items() if (stack := stacks.combine(None, text))}
    return found, notes


def _process_run(seen: Observed, stalled: float) -> ProcessRun:
    return ProcessRun(pid=seen.pid, ppid=seen.ppid, cmdline=seen.cmdline, first_seen=0.0, last_seen=0.0,
                      alive_at_stop=not seen.exited, exit_code=None, stalled_for=stalled, state=seen.state,
                      wchan=seen.wchan, threads=seen.threads, rss_peak=seen.rss_peak,
                      killed_by_supervisor=False, rank=ranks.read(seen.pid))


# What would make an idle attached process a hung one, as the verdict names it.
_HANG_EVIDENCE = ("a fork from a parent with a GPU runtime loaded, a wait in a known hang site (TensorFlow's "
                  "intra-op pool in a fork child), or a lock no thread of the process can release")


def hang_evidence(seen: Observed, blocked_in: str | None) -> str | None:
    """Say what shows that a process which made no CPU progress is hung, not idle, or None.

    From outside, a deadlock and a process waiting for input, a socket or a timer look
    the same (asleep, CPU flat); only a hazard tells them apart: a fork from a parent that
    had a GPU runtime loaded, a wait in a native function where a hazard's processes wait
    for ever (``hazards.py``'s hang sites), or a thread lock awaited by the only thread left.
    """
    if seen.start == "fork" and seen.runtimes_at_fork:
        return (f"forked from pid {seen.ppid}, which had {explain.runtime_names(seen.runtimes_at_fork)} "
                "loaded at the fork")
    native = (blocked_in or "").split(", Python ", 1)[0]
    if any(site in native for site in hazards.FORK_AFTER_INIT.hang_sites):
        return f"blocked in {native}, where a fork child of an initialized TensorFlow waits for ever"
    if seen.threads == 1 and any(site in native for site in hazards.MULTITHREADED_FORK.hang_sites):
        return f"blocked on a lock ({native}) with no other thread left to release it"
    return None


def _judge(seen: Observed, track: ProcessRun, window: float, evidence: str | None,
           tree_still: bool) -> tuple[Verdict, str]:
    """Judge one process; ``tree_still``: no process of the tree made CPU progress."""
    if seen.exited:
        return Verdict.UNKNOWN, "exited while gpudoctor examined it (its exit status belongs to its parent)"
    if seen.state in _HELD:
        how = "a tracer (ptrace)" if seen.state == psutil.STATUS_TRACING_STOP else "SIGSTOP"
        return Verdict.STOPPED, f"held stopped by {how}: it waits to be continued, not a deadlock"
    if not stalled(seen, window):
        return Verdict.OK, f"running: {seen.cpu_used:.2f} s of CPU in the {window:g} s window"
    if tree_still and evidence is not None:
        return Verdict.HUNG, f"{explain.stall(track)} (the whole watch window): {evidence}"
    return Verdict.IDLE, (f"idle (no CPU progress for {window:g} s), {explain.stall(track)}: no evidence of "
                          f"a hang; hung would take {_HANG_EVIDENCE}")


def _lead(roots: Sequence[int], window: float, verdict: Verdict) -> str:
    what = {Verdict.HUNG: "nothing in the tree made CPU progress",
            Verdict.IDLE: f"idle (no CPU progress for {window:g} s)",
            Verdict.STOPPED: "nothing in the tree moved, and a process is held stopped",
            Verdict.OK: "the tree made CPU progress"}[verdict]
    return (f"Attached to pid {', '.join(map(str, roots))} and watched for {window:g} s without stopping or "
            f"signalling anything: {what}.")


def _idle_text(judged: Sequence[ProcessVerdict], window: float) -> list[str]:
    """Why an idle tree is not called hung, and what would make it one."""
    idle = [p for p in judged if p.verdict == Verdict.IDLE]
    lines = [f"Idle, not hung: {wording.pids([p.pid for p in idle])} made no CPU progress for {window:g} s, "
             "but nothing shows a hang: a process waiting for input, a socket, a timer or a child looks the "
             f"same from outside. It would be a hang with {_HANG_EVIDENCE}."]
    lines += [f"pid {p.pid} waits in {p.blocked_in}." for p in idle if p.blocked_in][:3]
    lines.append("To see how it got there, run it under gpudoctor probe -- COMMAND, which records forks and "
                 "the runtimes initialized before them.")
    return lines


def _running_text(judged: Sequence[ProcessVerdict]) -> list[str]:
    """The explanation of a tree that still makes progress: any fork from a loaded parent."""
    lines: list[str] = []
    forked = [p for p in judged if p.start == "fork" and p.runtimes_at_fork]
    if forked:
        p = forked[0]
        lines.append(f"Warning: {plural(len(forked), 'process')} {agree(len(forked), 'was', 'were')} forked "
                     "from a parent with "
                     f"{explain.runtime_names(p.runtimes_at_fork)} loaded (e.g. pid {p.pid} from {p.ppid}); "
                     "a child that uses a GPU runtime it inherited can hang or fail (gpudoctor lint "
                     f"reports it as {hazards.FORK_AFTER_INIT.rule}).")
        lines.append(hazards.FORK_AFTER_INIT.fix_line)
    return lines


def _parents_line(observed: dict[int, Observed]) -> list[str]:
    """Cite, for each parent of fork children, its thread count and loaded runtimes now."""
    lines = []
    parents = sorted({s.ppid for s in observed.values() if s.start == "fork" and s.runtimes_at_fork})
    for pid in parents:
        parent = observed.get(pid)
        if parent is None:
            continue
        lines.append(f"From outside: pid {pid} has {plural(parent.threads, 'thread')} now and "
                     f"{explain.runtime_names(sorted(parent.runtimes))} mapped; its fork children inherited the "
                     "mappings (whether it had initialized them, not only loaded them, the maps cannot say).")
    return lines


def watch_window(window: float, timeout: float | None) -> float:
    """The watch window an examination bounded by ``timeout`` (``--timeout``) gets: at most
    half of it, the other half being for reading the tree and dumping its stacks."""
    return window if timeout is None else min(window, timeout / 2)


def examine(pids: Sequence[int], window: float, native_stacks: bool = True,
            progress: Callable[[str], None] | None = None,
            watching: Callable[[dict[int, Observed], float], None] | None = None,
            timeout: float | None = None) -> Attached:
    """Attach to ``pids`` and their descendants for ``window`` seconds; never signal them.

    ``progress`` is told what is watched, once; ``watching`` is given the processes as
    read so far and the seconds watched, after each read (the live view). ``timeout``
    (``--timeout``) bounds the whole examination: the window is cut to half of it
    (``watch_window``), and stack dumps still running when it passes are abandoned."""
    roots = [_open(pid) for pid in dict.fromkeys(pids)]
    started = time.monotonic()
    until = None if timeout is None else started + timeout
    processes: dict[int, psutil.Process] = {}
    observed: dict[int, Observed] = {}
    notes: list[str] = []
    if watch_window(window, timeout) < window:
        notes.append(f"--timeout {timeout:g} s cut the watch window from {window:g} s to "
                     f"{watch_window(window, timeout):g} s (half of it: the rest is for the stack dumps).")
        window = watch_window(window, timeout)
    for process, is_root in _tree(roots):
        try:
            observed[process.pid] = _read(process, is_root)
            processes[process.pid] = process
        except psutil.NoSuchProcess:
            if is_root:
                raise GpudoctorError(f"pid {process.pid} exited while gpudoctor examined it: "
                                     "nothing left to explain") from None
            notes.append(f"pid {process.pid} exited while gpudoctor read it.")
        except psutil.AccessDenied:
            if is_root:
                raise GpudoctorError(f"pid {process.pid} belongs to another user: access denied") from None
            notes.append(f"pid {process.pid} could not be read (another user's process).")
    root_pids = [p.pid for p in roots]
    _classify(observed)
    if progress is not None:
        progress(f"gpudoctor: watching {plural(len(observed), 'process')} under pid "
                 f"{', '.join(map(str, root_pids))} for {window:g} s (nothing is stopped or signalled)")
    samples: list[Sample] = []
    _watch(processes, observed, root_pids, window, samples, started, watching)
    live = {pid for pid, seen in observed.items() if not seen.exited}
    for pid in live:
        observed[pid].wchan = _wchan(pid)
    notes += [f"pid {pid} exited while gpudoctor examined it." for pid, seen in observed.items() if seen.exited]
    # The idle ones first: their stacks are the ones that say where the tree waits.
    dumped = set(sorted(live, key=lambda pid: (not stalled(observed[pid], window), pid))[:_MAX_DUMPS])
    found_stacks, stack_notes = _stacks(dumped, observed, native_stacks, until)
    peaks, _ = _gpu_memory(set(observed))
    peaks = replace(peaks, process_rss={pid: s.rss_peak for pid, s in observed.items()})
    duration = round(time.monotonic() - started, 3)
    tracks = {pid: _process_run(seen, window if stalled(seen, window) else 0.0) for pid, seen in observed.items()}
    present = [seen for seen in observed.values() if not seen.exited]
    still = bool(present) and all(seen.state in _HELD or stalled(seen, window) for seen in present)
    evidence = {pid: hang_evidence(seen, stack.blocked_in if (stack := found_stacks.get(pid)) else None)
                for pid, seen in observed.items()}
    # A deadlock holds the tree: once one process shows a hang, those waiting with it are hung too.
    shown = next((f"waits with pid {pid}, which was {text}" for pid, text in sorted(evidence.items()) if text), None)
    judged = []
    for pid, seen in sorted(observed.items()):
        verdict, reason = _judge(seen, tracks[pid], window, evidence[pid] or shown, still)
        stack = found_stacks.get(pid)
        judged.append(ProcessVerdict(
            pid=pid, ppid=seen.ppid, cmdline=seen.cmdline, start=seen.start, verdict=verdict,
            runtimes_at_fork=seen.runtimes_at_fork, stalled_for=tracks[pid].stalled_for, wchan=seen.wchan,
            blocked_in=stack.blocked_in if stack else None, stack=stack.text if stack else None,
            stack_source=stack.source if stack else None, rss_peak=seen.rss_peak,
            gpu_memory_peak={d: b for (d, p), b in peaks.process_gpu.items() if p == pid},
            explanation=reason,
        ))
    alive = [p for p in judged if p.verdict != Verdict.UNKNOWN]
    if alive and all(p.verdict in (Verdict.HUNG, Verdict.IDLE, Verdict.STOPPED) for p in alive):
        verdict = next(v for v in (Verdict.STOPPED, Verdict.HUNG, Verdict.IDLE) if any(p.verdict == v for p in alive))
    else:
        verdict = Verdict.OK
    if peaks.nvml_reason:
        notes.append(f"No GPU memory evidence: {peaks.nvml_reason}.")
    notes += stack_notes
    run = RunRecord(
        command=observed[root_pids[0]].cmdline, stop_reason=StopReason.ATTACHED, signal_received=None,
        root_pid=root_pids[0], exit_code=None, duration=duration,
        limits=Limits(hang_after=window, native_stacks=native_stacks), processes=tuple(tracks.values()),
        events=[], samples=samples, peaks=peaks, stacks=found_stacks, stdout="", stderr="",
        notes=tuple(notes), tracking="attached")
    lines = [_lead(root_pids, window, verdict)]
    if verdict == Verdict.HUNG:
        lines.append(explain.explain(run, verdict, judged, []))
        lines[-1:-1] = _parents_line(observed)
    else:
        if verdict == Verdict.IDLE:
            lines += _idle_text(judged, window)
        if verdict == Verdict.STOPPED:
            held = [p.pid for p in judged if p.verdict == Verdict.STOPPED]
            lines.append(f"Stopped, not hung: {wording.pids(held)} held by SIGSTOP or a tracer; a stopped "
                         "process waits for SIGCONT or its debugger (gpudoctor leaves it as it is).")
        lines += _running_text(judged) + _parents_line(observed)
        lines += [f"Note: {note}" for note in notes]
    # The causes as data, from the same evidence a supervised run's are named from.
    named = causes.find(run, verdict, judged, ())
    diagnosis = Diagnosis(verdict, None, "\n".join(lines), tuple(judged), (), StopReason.ATTACHED, named)
    return Attached(run, diagnosis, tuple(observed[pid] for pid in sorted(observed)), tuple(root_pids), window)
