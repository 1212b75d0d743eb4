"""Read the GPU memory of a test's processes through NVML, one round at a time.

The probe's Sampler keeps per-process peaks, each taken at its own moment; a budget
for the test's processes *together* needs the processes of one round summed, and a
leak needs a reading exactly at the start and at the end of the test. So the watcher
takes rounds itself, each one NVML process list per device (~4.5 ms under a
driver-global lock, hence a modest cadence).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from gpudoctor.probe import nvml

Round = tuple[float, dict[str, int | None]]  # (monotonic time, {"device:pid": bytes or None})


@dataclass
class GpuReader:
    """Take rounds of per-process GPU memory for the processes a callable names."""

    reason: str | None = None
    devices: int = 0
    rounds: list[Round] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    _seen: set[int] = field(default_factory=set)

    @classmethod
    def open(cls) -> GpuReader:
        """Initialize NVML; a reader whose ``reason`` is set takes no rounds."""
        reason = nvml.unavailable_reason()
        devices = nvml.device_count() if reason is None else 0
        if reason is None and devices == 0:
            reason = "NVML sees no GPU"
        return cls(reason=reason, devices=devices)

    def read(self, pids: set[int]) -> None:
        """Record one round: the GPU memory NVML reports for each of ``pids``."""
        if self.reason is not None:
            return
        self._seen |= pids
        held: dict[str, int | None] = {}
        for device in range(self.devices):
            listed = nvml.processes(device)
            if listed.processes is None:
                self._note(f"GPU {device}: {listed.reason}")
                continue
            for process in listed.processes:
                if process.pid in pids:
                    held[f"{device}:{process.pid}"] = process.used_memory
            foreign = [pid for pid in listed.foreign_pids if pid not in self._seen]
            if foreign:
                self._note(nvml.ProcessList(None, None, tuple(foreign)).pid_namespace_note or "")
        self.rounds.append((time.monotonic(), held))

    def _note(self, text: str) -> None:
        if text and text not in self.notes:
            self.notes.append(text)
