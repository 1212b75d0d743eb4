"""gpudoctor's GPU markers on real PyTorch work; ``gpucheck/parts/plugin.py`` says which
outcome each test must have (several must fail: that is the marker working)."""

import multiprocessing

import pytest
import torch

MIB = 1 << 20
kept: list[torch.Tensor] = []  # what the leaking test leaves behind


def fill(mib: int) -> torch.Tensor:
    tensor = torch.empty(mib * MIB, dtype=torch.uint8, device="cuda").fill_(1)
    torch.cuda.synchronize()
    return tensor


@pytest.mark.gpu_memory_limit("4 GiB")
def test_budget_that_holds() -> None:
    """256 MiB (plus the context) against a 4 GiB budget: passes."""
    assert fill(256).numel() == 256 * MIB


@pytest.mark.gpu_memory_limit("1 GiB")
def test_budget_that_is_exceeded() -> None:
    """2 GiB against a 1 GiB budget: fails with the measured peak in the message."""
    assert fill(2048).numel() == 2048 * MIB


@pytest.mark.gpu_memory_leak_limit("64 MiB")
def test_leak_is_caught() -> None:
    """512 MiB kept alive after the test (a module-level list): more than 64 MiB leaked."""
    kept.append(fill(512))


@pytest.mark.gpu_memory_leak_limit("64 MiB")
def test_released_memory_is_no_leak() -> None:
    """The same 512 MiB, freed and given back to the driver before the end: passes."""
    tensor = fill(512)
    del tensor
    torch.cuda.empty_cache()


def square(i: int) -> int:
    return i * i  # host work only: the fork itself is what fork_safe judges


@pytest.mark.fork_safe
def test_fork_after_cuda_init() -> None:
    """CUDA is initialized in this process (the session fixture), then a fork Pool: fails."""
    fill(1)
    with multiprocessing.get_context("fork").Pool(2) as pool:
        assert pool.map(square, range(4)) == [0, 1, 4, 9]


@pytest.mark.fork_safe
def test_spawn_after_cuda_init() -> None:
    """The same pool with spawn: passes."""
    fill(1)
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        assert pool.map(square, range(4)) == [0, 1, 4, 9]
