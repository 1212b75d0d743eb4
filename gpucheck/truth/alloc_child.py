"""The child of ``sampler``: hold known amounts of GPU memory, one step at a time.

Run as ``python -m gpucheck.truth.alloc_child FRAMEWORK SIZE...`` (sizes in bytes). It
creates its CUDA context with a one-byte allocation and prints a JSON line ("baseline"),
then for each size waits for a line on standard input, allocates that many more bytes
and prints the framework's own count ("alloc"); after the last it waits for one more
line and exits. Allocations use ``empty`` (no kernel runs), so no kernel module is
loaded between steps: module loading grows the context, which NVML counts and the
framework's allocator does not.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any


def _torch() -> tuple[Any, Any]:
    import torch

    def allocate(size: int) -> Any:
        block = torch.empty(size, dtype=torch.uint8, device="cuda")
        torch.cuda.synchronize()
        return block

    return allocate, torch.cuda.memory_reserved


def _cupy() -> tuple[Any, Any]:
    import cupy

    pool = cupy.get_default_memory_pool()

    def allocate(size: int) -> Any:
        block = cupy.empty(size, dtype=cupy.uint8)
        cupy.cuda.Device().synchronize()
        return block

    return allocate, pool.total_bytes


ALLOCATORS = {"torch": _torch, "cupy": _cupy}


def say(**fields: Any) -> None:
    print(json.dumps(fields), flush=True)


def main(argv: list[str]) -> int:
    framework, sizes = argv[1], [int(size) for size in argv[2:]]
    try:
        allocate, counted = ALLOCATORS[framework]()
    except ImportError as error:
        say(step="error", message=f"{framework} is not importable: {error}")
        return 0
    try:
        held = [allocate(1)]
    except Exception as error:  # no usable GPU for this framework (a CPU-only build, no driver)
        say(step="error", message=f"{framework} could not create a CUDA context: {type(error).__name__}: {error}"[:500])
        return 0
    say(step="baseline", pid=os.getpid(), framework_bytes=int(counted()))
    for size in sizes:
        if not sys.stdin.readline():
            return 0
        try:
            held.append(allocate(size))
        except Exception as error:  # out of memory on a smaller GPU: say so, stop
            say(step="error", message=f"allocating {size} bytes: {type(error).__name__}: {error}"[:500])
            return 0
        say(step="alloc", size=size, framework_bytes=int(counted()))
    sys.stdin.readline()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
