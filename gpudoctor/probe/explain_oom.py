"""Explain a GPU OOM where one process of the tree holds nearly all of a device.

The shape of "several workers each let TensorFlow or JAX reserve the GPU": NVML
shows one process holding most of the device's memory while other processes of
the same command fail out of memory. Saying so, with the numbers, points at the
allocator's default rather than at the size of the model.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from gpudoctor.hazards import GPU_MEMORY_GRAB_ALL
from gpudoctor.probe.units import format_size
from gpudoctor.probe.verdicts import Verdict
from gpudoctor.probe.wording import plural

if TYPE_CHECKING:
    from gpudoctor.probe.diagnosis import ProcessVerdict
    from gpudoctor.probe.record import RunRecord

# A process that holds this share of a device leaves too little for a second one.
_MOST = 0.7


def one_holds_all(run: RunRecord, judged: Sequence[ProcessVerdict]) -> list[str]:
    """Return the lines that name the process holding most of a GPU while others ran out."""
    peaks = run.peaks
    tree = {p.pid for p in judged}
    lines: list[str] = []
    for device, total in sorted(peaks.device_total.items()):
        held = {pid: b for (d, pid), b in peaks.process_gpu.items() if d == device and pid in tree and b}
        if not total or not held:
            continue
        top, most = max(held.items(), key=lambda item: item[1])
        # A root that used no GPU failed because its workers did: not one of them.
        failed = [p for p in judged if p.verdict == Verdict.OOM and p.pid != top
                  and (p.start != "root" or p.pid in held)]
        if most < _MOST * total or not failed:
            continue
        lines.append(f"pid {top} alone held {format_size(most)} of GPU {device}'s {format_size(total)} "
                     f"({100 * most / total:.0f}%) while "
                     f"{plural(len(failed), 'other process', 'other processes')} of this command "
                     f"ran out of GPU memory: {', '.join(str(p.pid) for p in failed)}.")
    if lines:
        lines += [GPU_MEMORY_GRAB_ALL.why, GPU_MEMORY_GRAB_ALL.fix_line]
    return lines
