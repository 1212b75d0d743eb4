"""The ``gpu_monitor`` fixture's object: GPU memory of the test's processes, sampled by NVML."""

from __future__ import annotations

import os
import time

from gpudoctor.pytest_plugin import memory
from gpudoctor.pytest_plugin.item_watch import ItemWatch


class GpuMonitor:
    """Read what the watcher sampled since the fixture started.

    The test's processes are the test process and the children it started since.
    Every call takes a fresh NVML reading first while the test runs; after the
    test's call, the readings end with the one taken when it returned.
    """

    def __init__(self, watch: ItemWatch) -> None:
        self._watch = watch
        self._since = time.monotonic()

    @property
    def reason(self) -> str | None:
        """Why nothing is measured (no NVML, no driver), or None when sampling works."""
        return self._watch.nvml_reason

    @property
    def available(self) -> bool:
        return self.reason is None

    def usage(self) -> memory.MemoryUse | None:
        """Return the readings so far, summarized; None when GPU memory is not measured."""
        if not self.available:
            return None
        readings = self._watch.sample()
        if readings is None or readings.get("nvml"):
            return None
        return memory.analyse(readings.get("rounds") or [], self._since, os.getpid(),
                              readings.get("processes") or {})

    def peak(self) -> int | None:
        """Return the most GPU memory the test's processes held at one time, in bytes."""
        use = self.usage()
        return None if use is None else use.peak

    def per_process(self) -> dict[int, int | None]:
        """Return each process's peak GPU memory in bytes (summed over its GPUs; None: hidden)."""
        use = self.usage()
        if use is None:
            return {}
        peaks: dict[int, int | None] = {}
        for process in use.processes:
            old = peaks.get(process.pid, 0)
            peaks[process.pid] = None if old is None or process.peak is None else old + process.peak
        return peaks
