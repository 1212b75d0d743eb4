"""Recognize the frameworks' known error strings in a command's output.

Each pattern cites its row of ``docs/error-strings.md`` (the collected strings and
their sources); the two without a row were verified on real machines. A
``context`` pattern explains the environment but is never the cause of a failure
(TensorFlow's "failed call to cuInit: CUDA_ERROR_NO_DEVICE" on every CPU host).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Kinds, strongest first.
CAUSE, WARNING, CONTEXT = "cause", "warning", "context"

# Categories the diagnosis explains.
FORK_AFTER_INIT = "fork-after-init"
GPU_OOM = "gpu-oom"
CONFIG_AFTER_INIT = "config-after-init"
DAEMONIC = "process-in-daemonic-worker"
MULTITHREADED_FORK = "multithreaded-fork"
CUDA_ERROR = "cuda-error"
NO_DRIVER = "no-driver"
OTHER_TOOL = "other-tool"
IPC_PRODUCER_EXIT = "ipc-producer-exit"
WORKER_NOT_IMPORTABLE = "worker-not-importable"
START_AT_IMPORT = "process-start-at-import"
COLLECTIVES_MISMATCHED = "mismatched-collectives"
# Exceptions that mean something specific when processes share work (explain_exceptions.py
# tells them with the process and the user's line; the words are hazards.py's). Not here:
# BrokenProcessPool and a connection's EOFError, which are effects of another process's end
# (explain_exceptions.py tells them from the records, or leaves them to the cause of that end).
TASK_EXCEPTION_UNPICKLABLE = "task-exception-unpicklable"
TASK_RESULT_UNPICKLABLE = "task-result-unpicklable"
TOO_MANY_OPEN_FILES = "too-many-open-files"
SHARED_MEMORY_FULL = "shared-memory-full"
START_METHOD_SET_TWICE = "start-method-set-twice"


@dataclass(frozen=True)
class Pattern:
    """One known error string."""

    row: int | None  # row of docs/error-strings.md
    framework: str
    kind: str
    category: str
    regex: re.Pattern[str]
    meaning: str


@dataclass(frozen=True)
class Match:
    """A pattern found on one line of output."""

    pattern: Pattern
    line: str


def _p(row: int | None, framework: str, kind: str, category: str, regex: str, meaning: str) -> Pattern:
    return Pattern(row, framework, kind, category, re.compile(regex), meaning)


PATTERNS: tuple[Pattern, ...] = (
    _p(1, "PyTorch", CAUSE, FORK_AFTER_INIT, r"Cannot re-initialize CUDA in forked subprocess",
       "a forked child used CUDA after its parent had touched CUDA"),
    _p(3, "PyTorch", CAUSE, FORK_AFTER_INIT,
       r"CUDA error \(3\): initialization error|THCudaCheck FAIL .*error=3 : initialization error",
       "a forked child used CUDA after its parent had initialized it"),
    _p(5, "PyTorch", CAUSE, GPU_OOM, r"CUDA out of memory\. Tried to allocate",
       "PyTorch ran out of GPU memory"),
    _p(7, "JAX", WARNING, FORK_AFTER_INIT,
       r"os\.fork\(\) was called\. os\.fork\(\) is incompatible with multithreaded code, "
       r"and JAX is multithreaded",
       "the process forked after JAX started its backend: children are likely to hang"),
    _p(8, "JAX", CAUSE, GPU_OOM, r"RESOURCE_EXHAUSTED: Out of memory while trying to allocate",
       "JAX/XLA ran out of GPU memory"),
    _p(9, "JAX", CAUSE, GPU_OOM, r"RESOURCE_EXHAUSTED: Failed to allocate request for",
       "JAX/XLA ran out of GPU memory"),
    _p(10, "XLA/TensorFlow", CONTEXT, GPU_OOM,
       r"ran out of memory trying to allocate .*(is not a failure|not a failure, but)",
       "the BFC allocator was short of memory but did not fail"),
    _p(11, "JAX", CONTEXT, NO_DRIVER,
       r"Unable to initialize backend 'cuda'|operation cuInit\(0\) failed: CUDA_ERROR_NO_DEVICE",
       "JAX found no usable GPU and fell back to the CPU"),
    _p(12, "CuPy", CAUSE, FORK_AFTER_INIT, r"cudaErrorInitializationError",
       "CuPy could not use CUDA in this process: typically a fork child of a process "
       "that had initialized CUDA"),
    _p(13, "CuPy", CAUSE, GPU_OOM, r"Out of memory allocating [\d,]+ bytes",
       "CuPy ran out of GPU memory"),
    _p(14, "TensorFlow", CAUSE, FORK_AFTER_INIT,
       r"Failed setting context: CUDA_ERROR_NOT_INITIALIZED",
       "TensorFlow aborted in a forked child of a process that had initialized CUDA"),
    _p(15, "TensorFlow", WARNING, FORK_AFTER_INIT,
       r"could not retrieve CUDA device count: CUDA_ERROR_NOT_INITIALIZED",
       "TensorFlow silently fell back to the CPU in a forked child of a process that "
       "had initialized CUDA"),
    _p(16, "TensorFlow", CONTEXT, NO_DRIVER, r"failed call to cuInit",
       "TensorFlow found no usable GPU (normal on a CPU-only host)"),
    _p(17, "TensorFlow", CAUSE, GPU_OOM, r"OOM when allocating tensor with shape",
       "TensorFlow ran out of memory for a tensor"),
    _p(18, "TensorFlow", CAUSE, GPU_OOM,
       r"failed to allocate .* from device: CUDA_ERROR_OUT_OF_MEMORY",
       "TensorFlow could not allocate GPU memory: another process holds it"),
    _p(19, "TensorFlow", CAUSE, GPU_OOM,
       r"CUDA runtime implicit initialization on GPU:\d+ failed\. Status: out of memory"
       r"|failed call to cuDevicePrimaryCtxRetain: CUDA_ERROR_OUT_OF_MEMORY",
       "TensorFlow could not even create its CUDA context: the GPU's memory is taken"),
    _p(20, "TensorFlow", CAUSE, CONFIG_AFTER_INIT,
       r"(Physical|Virtual|Visible) devices cannot be modified after being initialized"
       r"|(Intra|Inter) op parallelism cannot be modified after initialization"
       r"|Cannot set memory growth on device when virtual devices configured",
       "TensorFlow device configuration ran after TensorFlow had initialized"),
    _p(22, "Numba", CAUSE, FORK_AFTER_INIT, r"CUDA initialized before forking",
       "a forked child used numba.cuda after its parent had initialized CUDA"),
    _p(23, "CPython", WARNING, MULTITHREADED_FORK,
       r"This process \(pid=\d+\) is multi-threaded, use of fork\(\) may lead to deadlocks",
       "a process forked while it had several threads"),
    _p(24, "PyCUDA", CAUSE, FORK_AFTER_INIT, r"cuInit failed: initialization error",
       "a forked child could not initialize CUDA after its parent had"),
    _p(36, "PyTorch", CAUSE, FORK_AFTER_INIT, r"CUDA driver initialization failed, you might not have a CUDA gpu",
       "PyTorch could not initialize CUDA: in a fork child, the parent had initialized CUDA "
       "outside PyTorch (Triton's driver probe, a raw cuInit); outside a fork, no usable GPU here"),
    _p(37, "Triton", CAUSE, FORK_AFTER_INIT, r"0 active drivers \(\[\]\)\. There should only be one",
       "Triton found no usable GPU backend: in a fork child, the parent had initialized CUDA "
       "before forking; otherwise no GPU here"),
    _p(35, "PyTorch", WARNING, IPC_PRODUCER_EXIT,
       r"Producer process has been terminated before all shared CUDA tensors released",
       "a process that shared CUDA tensors through torch.multiprocessing exited while a receiver "
       "still held them; the memory went with it (keep the sender alive until the receivers are done)"),
    _p(25, "Chainer", CAUSE, FORK_AFTER_INIT,
       r"The CUDA context has been already initialized\. MultiprocessParallelUpdater",
       "CUDA was initialized before Chainer forked its workers"),
    _p(26, "nvidia-ml-py", CONTEXT, NO_DRIVER, r"NVML Shared Library Not Found",
       "no NVIDIA driver library on this host"),
    _p(27, "nvidia-ml-py", CONTEXT, NO_DRIVER, r"NVMLError_DriverNotLoaded",
       "the NVIDIA kernel driver is not loaded"),
    _p(29, "pynvml", CONTEXT, OTHER_TOOL, r"The pynvml package is deprecated",
       "the deprecated pynvml package is installed next to nvidia-ml-py"),
    _p(30, "pytest-timeout", CONTEXT, OTHER_TOOL, r"Timeout \(>[\d.]+s\) from pytest-timeout",
       "pytest-timeout stopped a test that ran too long"),
    _p(None, "CPython", CAUSE, DAEMONIC, r"daemonic processes are not allowed to have children",
       "a Pool worker tried to start a process of its own"),
    # What CPython 3.11 to 3.13 print (seen here): the parent cannot pickle a lambda or a
    # nested function by name; a worker cannot find a function of the main script's
    # `__main__` block or of a notebook cell.
    _p(None, "CPython", CAUSE, WORKER_NOT_IMPORTABLE,
       r"PicklingError: Can't pickle <function|Can't (pickle|get) local object"
       r"|Can't get attribute '[^']+' on <module '__(mp_)?main__'",
       "a function meant for worker processes could not be sent to them, or found by them"),
    # CPython's multiprocessing/spawn.py (_check_not_importing_main), 3.10 to 3.13, seen here: a
    # spawned child whose import of the main module starts a process. The message spans lines
    # in the output; its first line is enough.
    _p(None, "CPython", CAUSE, START_AT_IMPORT,
       r"An attempt has been made to start a new process before the",
       "a spawned child re-ran the main module's process start at import time"),
    # gloo (torch 2.13, seen here): a rank's collective received data of another size than it
    # expected, because the ranks are in different collectives; the rank aborts (SIGABRT).
    _p(None, "PyTorch", CAUSE, COLLECTIVES_MISMATCHED,
       r"Is there a distributed collective mismatch in your code\?",
       "the ranks called different collectives (or the same one with different sizes) at the same point"),
    # CPython 3.10 to 3.13 (threading.excepthook names the thread's target; seen here on 3.11):
    # the Pool's result handler died, most often unpickling a task's exception whose class
    # cannot be rebuilt from its args (python/cpython#79492).
    _p(None, "CPython", CAUSE, TASK_EXCEPTION_UNPICKLABLE, r"^Exception in thread .*\(_handle_results\):",
       "the Pool's result-handler thread died: no task result reaches the parent any more"),
    # multiprocessing/pool.py worker(), 3.8 to 3.13, seen here on 3.11.
    _p(None, "CPython", CAUSE, TASK_RESULT_UNPICKLABLE, r"MaybeEncodingError: Error sending result",
       "a task's return value could not be pickled to be sent back to the parent"),
    # torch/utils/data/dataloader.py (_try_get_data) and torch.multiprocessing's descriptor
    # passing (pytorch/pytorch#973, #11201); errno 24 (EMFILE) from any OSError.
    _p(None, "PyTorch", CAUSE, TOO_MANY_OPEN_FILES,
       r"Too many open files|received 0 items of ancdata|\[Errno 24\]",
       "a process ran out of file descriptors (its open-file limit)"),
    # libtorch's shared-memory allocator and the DataLoader (pytorch/pytorch#5040, #16979;
    # strings read in torch 2.x's libtorch_cpu.so / libtorch_python.so).
    _p(None, "PyTorch", CAUSE, SHARED_MEMORY_FULL,
       r"unable to allocate shared memory\(shm\)|unable to write to file </torch_"
       r"|workers are out of shared memory|insufficient shared memory \(shm\)",
       "a DataLoader worker could not put its batch in /dev/shm (too small)"),
    # multiprocessing/context.py set_start_method, 3.4 to 3.13.
    _p(None, "CPython", CAUSE, START_METHOD_SET_TWICE, r"RuntimeError: context has already been set",
       "set_start_method was called after the start method had been fixed"),
    _p(None, "CuPy", CAUSE, NO_DRIVER, r"cudaErrorInsufficientDriver",
       "CuPy needs a newer (or any) NVIDIA driver"),
    # Generic boilerplate last: a specific row above explains the same line better.
    _p(4, "PyTorch", CAUSE, CUDA_ERROR, r"(RuntimeError|AcceleratorError): CUDA error: ",
       "PyTorch reported a CUDA error"),
)


def find(text: str) -> list[Match]:
    """Return the known strings in ``text``, at most one match per line, in line order.

    A message that goes on over indented lines (CPython's "An attempt has been made to
    start a new process before the / current process has finished its bootstrapping
    phase.") is quoted to the end of its sentence, three lines at most."""
    matches: list[Match] = []
    seen: set[tuple[int | None, str, str]] = set()
    lines = text.splitlines()
    for index, line in enumerate(lines):
        for pattern in PATTERNS:
            if pattern.regex.search(line):
                quoted = _sentence(lines, index)
                key = (pattern.row, pattern.meaning, quoted)
                if key not in seen:
                    seen.add(key)
                    matches.append(Match(pattern, quoted[:500]))
                break
    return matches


def _sentence(lines: list[str], index: int) -> str:
    """Line ``index``, and the indented lines that finish its sentence."""
    quoted = lines[index].strip()
    for following in lines[index + 1:index + 3]:
        if quoted.endswith((".", "!", "?", ")", ":")) or not following[:1].isspace() or not following.strip() \
                or following.lstrip().startswith(("File ", "Traceback ")):
            break
        quoted = f"{quoted} {following.strip()}"
    return quoted
