"""The error-string table recognizes the lines collected in docs/error-strings.md."""

from __future__ import annotations

import pytest

from gpudoctor.probe.error_strings import (
    CAUSE,
    CONFIG_AFTER_INIT,
    CONTEXT,
    FORK_AFTER_INIT,
    GPU_OOM,
    WARNING,
    find,
)

# Real log lines (from the rows' sources), with the row, kind and category each must get.
LINES = [
    ("RuntimeError: Cannot re-initialize CUDA in forked subprocess. To use CUDA with "
     "multiprocessing, you must use the 'spawn' start method", 1, CAUSE, FORK_AFTER_INIT),
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total "
     "capacity of 7.79 GiB of which 3.31 MiB is free.", 5, CAUSE, GPU_OOM),
    ("/x/jax/_src/xla_bridge.py:9: RuntimeWarning: os.fork() was called. os.fork() is incompatible "
     "with multithreaded code, and JAX is multithreaded, so this will likely lead to a deadlock.",
     7, WARNING, FORK_AFTER_INIT),
    ("jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to "
     "allocate 1048576 bytes.", 8, CAUSE, GPU_OOM),
    ("cupy_backends.cuda.api.runtime.CUDARuntimeError: cudaErrorInitializationError: "
     "initialization error", 12, CAUSE, FORK_AFTER_INIT),
    ("cupy.cuda.memory.OutOfMemoryError: Out of memory allocating 4,000,000,000 bytes "
     "(allocated so far: 0 bytes).", 13, CAUSE, GPU_OOM),
    ("F tensorflow/compiler/xla/stream_executor/cuda/cuda_driver.cc:148] Failed setting context: "
     "CUDA_ERROR_NOT_INITIALIZED: initialization error", 14, CAUSE, FORK_AFTER_INIT),
    ("E external/local_xla/xla/stream_executor/cuda/cuda_driver.cc:282] failed call to cuInit: "
     "CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected", 16, CONTEXT, "no-driver"),
    ("tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating tensor "
     "with shape[1024,1024] and type float on /job:localhost/replica:0/task:0/device:GPU:0 by "
     "allocator GPU_0_bfc", 17, CAUSE, GPU_OOM),
    ("E tensorflow/stream_executor/cuda/cuda_driver.cc:806] failed to allocate 3.90G (4188012544 "
     "bytes) from device: CUDA_ERROR_OUT_OF_MEMORY: out of memory", 18, CAUSE, GPU_OOM),
    ("RuntimeError: Physical devices cannot be modified after being initialized",
     20, CAUSE, CONFIG_AFTER_INIT),
    ("numba.cuda.cudadrv.error.CudaDriverError: CUDA initialized before forking",
     22, CAUSE, FORK_AFTER_INIT),
    ("/x/popen_fork.py:66: DeprecationWarning: This process (pid=4122) is multi-threaded, use of "
     "fork() may lead to deadlocks in the child.", 23, WARNING, "multithreaded-fork"),
    ("pynvml.NVMLError_LibraryNotFound: NVML Shared Library Not Found", 26, CONTEXT, "no-driver"),
    ("RuntimeError: CUDA driver initialization failed, you might not have a CUDA gpu.",
     36, CAUSE, FORK_AFTER_INIT),
    ("RuntimeError: 0 active drivers ([]). There should only be one.", 37, CAUSE, FORK_AFTER_INIT),
    # CPython 3.11 to 3.13, seen here: what a spawn worker meets when it cannot load its function.
    ("_pickle.PicklingError: Can't pickle <function <lambda> at 0x7fbf84b27380>: attribute lookup "
     "<lambda> on __main__ failed", None, CAUSE, "worker-not-importable"),
    ("AttributeError: Can't pickle local object 'main.<locals>.f'", None, CAUSE, "worker-not-importable"),
    ("AttributeError: Can't get local object 'main.<locals>.f'", None, CAUSE, "worker-not-importable"),
    ("AttributeError: Can't get attribute 'work' on <module '__main__' (built-in)>", None, CAUSE,
     "worker-not-importable"),
]


@pytest.mark.parametrize(("line", "row", "kind", "category"), LINES)
def test_known_line_is_recognized(line: str, row: int | None, kind: str, category: str) -> None:
    (match,) = find(f"noise before\n{line}\nnoise after")
    assert (match.pattern.row, match.pattern.kind, match.pattern.category) == (row, kind, category)
    assert match.line == line


def test_guide_comments_are_not_errors() -> None:
    # Row 21: these are comments in TF's GPU guide, never raised.
    assert find("# Memory growth must be set before GPUs have been initialized") == []


def test_daemonic_pool_worker() -> None:
    (match,) = find("AssertionError: daemonic processes are not allowed to have children")
    assert match.pattern.category == "process-in-daemonic-worker"


def test_same_line_twice_is_reported_once() -> None:
    text = "Error: CUDA initialized before forking\n" * 3
    assert len(find(text)) == 1


def test_a_cause_named_by_an_error_string_gets_its_rule_and_fix() -> None:
    """A config-after-init or an unloadable worker found in the output is explained as the
    probe explains a fork: the lint rule that finds it in the code, and the fix."""
    from gpudoctor import hazards
    from gpudoctor.probe import explain

    matches = find("Traceback (most recent call last):\n"
                   "RuntimeError: Physical devices cannot be modified after being initialized\n")
    lines = explain._matched(matches, CAUSE, "Cause: ")
    assert lines == ["Cause: TensorFlow device configuration ran after TensorFlow had initialized (GD302): "
                     "RuntimeError: Physical devices cannot be modified after being initialized"]
    assert "docs/error-strings.md" not in lines[0]
    assert explain._string_fixes(matches, []) == [hazards.CONFIG_AFTER_INIT.fix_line]
    assert explain._string_fixes(matches, [hazards.CONFIG_AFTER_INIT.fix_line]) == []  # said once


def test_a_message_over_indented_lines_is_quoted_to_the_end_of_its_sentence() -> None:
    # CPython's spawn.py prints the bootstrapping-phase message over several indented lines;
    # quoting its first line alone ended the explanation mid-sentence ("... before the").
    output = ("Traceback (most recent call last):\n  File \"<string>\", line 1, in <module>\n"
              "RuntimeError: \n        An attempt has been made to start a new process before the\n"
              "        current process has finished its bootstrapping phase.\n\n"
              "        This probably means that you are not using fork to start your\n")
    (match,) = find(output)
    assert match.line == ("An attempt has been made to start a new process before the current process has "
                          "finished its bootstrapping phase.")
