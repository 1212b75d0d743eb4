"""Triton: GPU kernels written in Python (``@triton.jit``), usually over PyTorch tensors.

Importing Triton and decorating kernels touch no GPU. The first use of the active driver
(``triton.runtime.driver.active``: launching a kernel, asking for the current target or
device, benchmarking) picks a backend by asking each one ``is_active()``. The NVIDIA
backend answers with ``torch.cuda.is_available()`` up to Triton 3.7, with a raw
``cuInit(0)`` on Triton's main branch since triton-lang/triton PR 9578, and again through
PyTorch when PyTorch is imported in the 3.8 release branch (PR 10935): every version runs
cuInit, unless PyTorch's NVML check is on and PyTorch answers. A child forked after that
cannot initialize CUDA: PyTorch raises "Cannot re-initialize CUDA in forked subprocess";
Triton's own probe fails, and the launch reports "0 active drivers ([]). There should only
be one." (pytorch/pytorch issue 184643; vLLM issue 46996 is an import-time probe of this
kind before its engine forks).

``@triton.autotune`` looks up the driver's benchmarker lazily, when it first benchmarks
(a ``cached_property`` since Triton 3.3); Triton 3.2 and older looked it up when the
decorator ran, at import.
"""

from __future__ import annotations

from gpudoctor.knowledge.framework import Framework
from gpudoctor.knowledge.table import DRIVER_INIT, INERT, RUNTIME_INIT, Api

FW = "triton"
DRIVER = "https://github.com/triton-lang/triton/blob/main/python/triton/runtime/driver.py"
NVIDIA = "https://github.com/triton-lang/triton/blob/main/third_party/nvidia/backend/driver.py"
TESTING = "https://github.com/triton-lang/triton/blob/main/python/triton/testing.py"
AUTOTUNER = "https://github.com/triton-lang/triton/blob/main/python/triton/runtime/autotuner.py"


def _api(pattern: str, effect: str, source: str) -> Api:
    return Api(pattern, effect, FW, source)


TABLE = (
    _api("triton.*", INERT, "import triton; triton.jit, triton.Config, triton.cdiv, triton.language build no "
                            "CUDA state"),
    _api("triton.autotune", INERT, AUTOTUNER + " (the benchmarker is looked up when it first benchmarks)"),
    # Any use of the active driver selects it: the NVIDIA backend's is_active() runs cuInit.
    _api("triton.runtime.driver.active.*", DRIVER_INIT, DRIVER + " (LazyProxy: first use runs is_active())"),
    _api("triton.runtime.driver.active.get_current_device", RUNTIME_INIT, NVIDIA + " (the current CUDA device)"),
    _api("triton.runtime.driver.active.get_current_target", RUNTIME_INIT, NVIDIA + " (the device's capability)"),
    _api("triton.runtime.driver.active.get_current_stream", RUNTIME_INIT, NVIDIA),
    _api("triton.runtime.driver.active.get_device_capability", RUNTIME_INIT, NVIDIA),
    _api("triton.runtime.driver.active.get_empty_cache_for_benchmark", RUNTIME_INIT,
         NVIDIA + " (allocates a 256 MB buffer on the device)"),
    _api("triton.backends.nvidia.driver.CudaDriver.is_active", DRIVER_INIT, NVIDIA + " (cuInit, or torch's check)"),
    _api("triton.testing.do_bench", RUNTIME_INIT, TESTING + " (runs the function, times it with CUDA events)"),
    _api("triton.testing.do_bench_cudagraph", RUNTIME_INIT, TESTING),
)

FRAMEWORK = Framework(
    name=FW,
    display="Triton",
    modules=("triton",),
    table=TABLE,
    consequence='fail to initialize CUDA (Triton: "0 active drivers ([]). There should only be one."; '
                'PyTorch: "Cannot re-initialize CUDA in forked subprocess")',
    # Triton has no device objects of its own: its kernels read and write PyTorch tensors.
    host_copy="t.cpu()",
    kernel_decorators=("triton.jit",),
)
