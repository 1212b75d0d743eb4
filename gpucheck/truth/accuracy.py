"""How far NVML's per-process memory is from what a framework says it holds.

Only the changes from a baseline taken once the CUDA context exists are compared: the
context itself (hundreds of MiB of code, stacks and driver state) is in NVML's figure
and in no framework's count. A change agrees when it is within 5 % or within one
granule: the driver maps device memory in 2 MiB pages, and PyTorch's caching allocator
rounds large blocks to 2 MiB as well, so a 2 MiB difference is the finest either side
can see.
"""

from __future__ import annotations

from dataclasses import dataclass

MIB = 1 << 20
GIB = 1 << 30
GRANULE = 2 * MIB
RELATIVE = 0.05
SIZES = (256 * MIB, 1 * GIB, 4 * GIB)


@dataclass(frozen=True)
class Step:
    """One allocation step: both sides' growth since the baseline, and whether they agree."""

    size: int  # bytes this step added
    framework_delta: int
    nvml_delta: int | None  # None: NVML did not report this process's memory

    @property
    def tolerance(self) -> int:
        return max(int(RELATIVE * self.framework_delta), GRANULE)

    @property
    def difference(self) -> int | None:
        return None if self.nvml_delta is None else self.nvml_delta - self.framework_delta

    @property
    def within(self) -> bool:
        return self.difference is not None and abs(self.difference) <= self.tolerance

    def sentence(self) -> str:
        grown = f"+{self.size / MIB:.0f} MiB: framework +{self.framework_delta / MIB:.1f} MiB"
        if self.nvml_delta is None:
            return grown + ", NVML reported no memory for the process"
        verdict = "within" if self.within else "OUTSIDE"
        difference = self.nvml_delta - self.framework_delta
        return (f"{grown}, NVML +{self.nvml_delta / MIB:.1f} MiB "
                f"(difference {difference / MIB:+.1f} MiB, {verdict} ±{self.tolerance / MIB:.1f} MiB)")


def compare(baseline_framework: int, baseline_nvml: int | None,
            readings: list[tuple[int, int, int | None]]) -> list[Step]:
    """Steps from ``(size, framework bytes, NVML bytes)`` readings taken after each allocation."""
    return [Step(size, framework - baseline_framework,
                 None if nvml is None or baseline_nvml is None else nvml - baseline_nvml)
            for size, framework, nvml in readings]


def granularity(values: list[int | None]) -> int | None:
    """The largest power of two (up to 1 GiB) dividing every value NVML reported: the
    granule it counts in, seen rather than assumed."""
    known = [value for value in values if value]
    if not known:
        return None
    granule = GIB
    while granule > 1 and any(value % granule for value in known):
        granule //= 2
    return granule
