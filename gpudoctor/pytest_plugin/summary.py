"""The session's summary of the tests whose GPU memory markers could not be checked.

Shaped like pytest's own summaries of skipped tests: a section with one group per
reason, the tests of each listed by node ID. A suite of many memory-marked tests run
on a machine without NVML would bury the rest of the output, so each group lists a few
tests unless ``-v`` is given.
"""

from __future__ import annotations

SHOWN = 10  # tests listed per reason without -v


def not_checked_lines(by_reason: dict[str, list[str]], verbose: bool) -> list[str]:
    """Return the section's lines: per reason, how many tests and which."""
    lines = []
    for reason, nodeids in by_reason.items():
        count = "1 test" if len(nodeids) == 1 else f"{len(nodeids)} tests"
        lines.append(f"not checked: {reason}: {count}")
        shown = nodeids if verbose else nodeids[:SHOWN]
        lines += [f"  {nodeid}" for nodeid in shown]
        if len(shown) < len(nodeids):
            lines.append(f"  ... and {len(nodeids) - len(shown)} more (-v lists them)")
    return lines
