"""The runtimes of the framework records: the probe's ids, names, CUDA state and libraries."""

from __future__ import annotations

from gpudoctor.knowledge.runtimes import FRAMEWORK_OF, LIBRARIES, RUNTIMES, holds_cuda, legend, runtime, said
from gpudoctor.probe.maps import runtimes_in


def test_every_runtime_id_is_one_records_and_each_framework_runtime_names_its_framework() -> None:
    ids = [r.id for r in RUNTIMES]
    assert len(ids) == len(set(ids))
    assert FRAMEWORK_OF == {"tensorflow": "tensorflow", "cupy": "cupy", "torch.cuda": "torch", "jax": "jax",
                            "numba.cuda": "numba", "pycuda": "pycuda"}


def test_a_jax_backend_is_jaxs_runtime_and_holds_cuda_only_on_a_gpu() -> None:
    assert runtime("jax:cpu") is runtime("jax:cuda") is runtime("jax")
    assert (said("jax:cpu"), legend("jax:cpu")) == ("JAX (cpu backend)", "JAX cpu")
    assert [holds_cuda(r) for r in ("jax:cpu", "jax:cuda", "jax:rocm", "jax")] == [False, True, True, False]
    assert [holds_cuda(r) for r in ("tensorflow", "torch.cuda", "cupy", "cuda-driver", "nvrtc")] == \
        [False, True, True, True, True]
    assert said("cuda-driver") == "the CUDA driver (cuInit had run)" and said("unknown-thing") == "unknown-thing"


def test_mapped_libraries_name_their_runtimes_and_jaxlibs_other_libraries_are_not_jax() -> None:
    maps = [
        "7f0000-7f1000 r-xp 00000000 08:01 1 /venv/site-packages/tensorflow/libtensorflow_framework.so.2",
        "7f2000-7f3000 r-xp 00000000 08:01 2 /usr/lib/x86_64-linux-gnu/libcuda.so.550.54",
        "7f4000-7f5000 r-xp 00000000 08:01 3 /venv/lib/python3.11/site-packages/jaxlib/cpu/_lapack.so",
        "7f6000-7f7000 r-xp 00000000 08:01 4 /venv/lib/python3.11/site-packages/torch/lib/libtorch_cuda.so",
    ]
    assert list(runtimes_in(maps)) == ["tensorflow", "cuda-driver", "torch.cuda"]
    assert list(runtimes_in(["7f8000-7f9000 r-xp 0 08:01 5 /venv/site-packages/jaxlib/_jax.so"])) == ["jax"]
    assert ("jaxlib/_jax.", "jax") in LIBRARIES
