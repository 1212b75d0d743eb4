"""Sample GPU memory (NVML) and the host memory and CPU time of a supervised tree, in a thread.

The thread runs in the supervisor, never in the user's processes (a thread there
would change what fork does). Device memory is cheap to read (~12 µs) and is read
often; the per-process list takes a driver-global lock (~4.5 ms) and is read at a
slower cadence, together with the RSS of every process of the tree (which the
supervisor's scan of the tree has just read: the sampler does not read /proc again).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from gpudoctor.probe import nvml

_KEEP = 5000  # samples of each kind; older ones are dropped, peaks are kept apart


@dataclass(frozen=True)
class Sample:
    """One measurement; ``kind`` is "device", "gpu-process" or "rss"."""

    t: float  # seconds since the command started
    kind: str
    bytes: int | None
    total: int | None = None
    device: int | None = None
    pid: int | None = None
    in_tree: bool | None = None
    # On "rss" samples: the CPU time (user + system, seconds) the process had used by ``t``.
    # Two samples give its CPU use in between; none at all is what a hang looks like.
    cpu: float | None = None


@dataclass(frozen=True)
class Peaks:
    """The largest values seen during the run."""

    device_used: dict[int, int]
    device_total: dict[int, int]
    process_gpu: dict[tuple[int, int], int | None]  # (device, pid) -> bytes (None: unreported)
    process_rss: dict[int, int]
    nvml_reason: str | None
    pid_namespace_notes: tuple[str, ...]


class Sampler:
    """Collect samples until stopped; read them with ``samples()`` and ``peaks()``."""

    def __init__(
        self,
        tree_rss: Callable[[], dict[int, tuple[int, float]]],
        start: float,
        interval: float = 0.05,
        process_interval: float = 0.5,
    ) -> None:
        # The live processes of the tree -> their RSS (bytes) and CPU time so far (user +
        # system seconds), as the supervisor's scan of the tree has just read them.
        self._tree_rss = tree_rss
        self._start = start
        self._interval = interval
        self._process_interval = process_interval
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._device: deque[Sample] = deque(maxlen=_KEEP)
        self._slow: deque[Sample] = deque(maxlen=_KEEP)
        self._device_used: dict[int, int] = {}
        self._device_total: dict[int, int] = {}
        self._process_gpu: dict[tuple[int, int], int | None] = {}
        self._process_rss: dict[int, int] = {}
        self._namespace_notes: list[str] = []
        self._seen: set[int] = set()
        self._latest_gpu: dict[int, int] = {}  # pid -> bytes on all GPUs, at the last listing
        self._reason = nvml.unavailable_reason()
        self._devices = nvml.device_count()
        self.failure: str | None = None  # why sampling stopped early (then samples are partial)
        self._thread = threading.Thread(target=self._run, name="gpudoctor-sampler", daemon=True)

    def start(self) -> None:
        """Start sampling in a daemon thread."""
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread (after the tree is gone a sample would only see dead PIDs)."""
        self._stop.set()
        self._thread.join(5.0)

    def _now(self) -> float:
        return time.monotonic() - self._start

    def _sample_devices(self) -> None:
        for index in range(self._devices):
            info = nvml.memory(index)
            if info is None:
                continue
            with self._lock:
                self._device.append(Sample(self._now(), "device", info.used, info.total, index))
                self._device_used[index] = max(self._device_used.get(index, 0), info.used)
                self._device_total[index] = info.total

    def _sample_processes(self) -> None:
        rss_now = self._tree_rss()
        pids = set(rss_now)
        self._seen |= pids
        latest: dict[int, int] = {}
        for index in range(self._devices):
            listed = nvml.processes(index)
            # A tree process that exited a moment ago is not a foreign PID.
            foreign = [pid for pid in listed.foreign_pids if pid not in self._seen]
            with self._lock:
                if foreign:
                    note = nvml.ProcessList(None, None, tuple(foreign)).pid_namespace_note
                    if note not in self._namespace_notes:
                        self._namespace_notes.append(note or "")
                for p in listed.processes or ():
                    key = (index, p.pid)
                    old = self._process_gpu.get(key)
                    self._process_gpu[key] = (
                        p.used_memory if old is None else max(old, p.used_memory or 0)
                    )
                    self._slow.append(Sample(self._now(), "gpu-process", p.used_memory,
                                             device=index, pid=p.pid, in_tree=p.pid in pids))
                    if p.pid in pids and p.used_memory is not None:
                        latest[p.pid] = latest.get(p.pid, 0) + p.used_memory
        with self._lock:
            self._latest_gpu = latest
        for pid, (rss, cpu) in rss_now.items():
            with self._lock:
                self._process_rss[pid] = max(self._process_rss.get(pid, 0), rss)
                self._slow.append(Sample(self._now(), "rss", rss, pid=pid, in_tree=True,
                                         cpu=round(cpu, 3)))

    def _run(self) -> None:
        # The sampler only observes: whatever breaks it must not stop the supervision.
        try:
            self._loop()
        except Exception as error:  # reported as partial samples
            self.failure = (f"the sampler failed after {self._now():.1f} s "
                            f"({type(error).__name__}: {error}): samples are partial")

    def _loop(self) -> None:
        next_slow = 0.0
        while not self._stop.is_set():
            self._sample_devices()
            if time.monotonic() >= next_slow:
                self._sample_processes()
                next_slow = time.monotonic() + self._process_interval
            # Without a GPU to read there is nothing to do between the slow samples.
            self._stop.wait(self._interval if self._devices else max(0.0, next_slow - time.monotonic()))

    def latest_gpu(self) -> dict[int, int] | None:
        """Each tree process's GPU memory at the last listing (all GPUs); None without NVML."""
        if self._reason is not None or not self._devices:
            return None
        with self._lock:
            return dict(self._latest_gpu)

    def samples(self) -> list[Sample]:
        """Return all kept samples in time order."""
        with self._lock:
            return sorted([*self._device, *self._slow], key=lambda s: s.t)

    def peaks(self) -> Peaks:
        """Return the peaks seen so far."""
        with self._lock:
            return Peaks(dict(self._device_used), dict(self._device_total),
                         dict(self._process_gpu), dict(self._process_rss), self._reason,
                         tuple(self._namespace_notes))
