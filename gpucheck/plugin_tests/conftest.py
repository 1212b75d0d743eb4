"""The GPU marker tests share one process: make CUDA's fixed cost and PyTorch's cache
leave each test's readings alone.

PyTorch's CUDA context (hundreds of MiB in NVML's per-process count) is created once,
before the first test, so that no test's start-to-end difference includes it; the
caching allocator's free blocks are given back before each test, so that a test's
allocations show in NVML instead of reusing what an earlier test left cached.
"""

import gc

import pytest
import torch


@pytest.fixture(scope="session", autouse=True)
def cuda_context() -> None:
    torch.ones(1, device="cuda")
    torch.cuda.synchronize()


@pytest.fixture(autouse=True)
def empty_cache(cuda_context: None) -> None:
    gc.collect()
    torch.cuda.empty_cache()
