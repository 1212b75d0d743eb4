"""Helpers of the truth-check tests: a fake libcuda.so.1, a fake GPU framework, a Context."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from gpucheck.part import Context
from gpucheck.truth.invocations import FrameworkSetup

REPO = Path(__file__).resolve().parents[2]
FAKE_CUDA_SOURCE = Path(__file__).parent / "fake_cuda" / "fake_cuda.c"

# A stand-in for a GPU framework: importing it touches nothing, its functions reach the
# levels the check tells apart, through the (fake) driver as a real one would.
FAKE_FRAMEWORK = textwrap.dedent('''
    import ctypes

    _driver = ctypes.CDLL("libcuda.so.1")

    def count():
        _driver.cuInit(0)

    def tensor():
        _driver.cuInit(0)
        context = ctypes.c_void_p()
        _driver.cuDevicePrimaryCtxRetain(ctypes.byref(context), 0)

    def broken():
        raise RuntimeError("no such device")
''')

# A stand-in for alloc_child: it "allocates" by writing its own process line into the fake
# NVML's state, the context costing 300 MiB, and reports what a framework would count.
FAKE_ALLOCATOR = textwrap.dedent('''
    import json, os, sys
    state = os.environ["GPUDOCTOR_FAKE_NVML_STATE"]
    base = open(state).read()
    def nvml_says(used):
        with open(state + ".tmp", "w") as f:
            f.write(base + f"proc 0 {os.getpid()} {used}\\n")
        os.replace(state + ".tmp", state)
    MIB = 1 << 20
    drift = [0, 3 * MIB, 100 * MIB]  # the last step is off by more than 5 %
    held = 2 * MIB
    nvml_says(300 * MIB + held)
    print(json.dumps({"step": "baseline", "pid": os.getpid(), "framework_bytes": held}), flush=True)
    for i, size in enumerate(int(s) for s in sys.argv[1:]):
        if not sys.stdin.readline():
            break
        held += size
        nvml_says(300 * MIB + held + drift[i])
        print("a framework's own chatter")
        print(json.dumps({"step": "alloc", "size": size, "framework_bytes": held}), flush=True)
    sys.stdin.readline()
''')

FAKE_SETUP = FrameworkSetup("fakegpu", "fakegpu", "import fakegpu", ("pytest",))


def build_fake_cuda(out: Path) -> Path:
    """Compile the fake libcuda.so.1 into ``out``; return that folder."""
    compiler = shutil.which("gcc") or shutil.which("cc")
    if compiler is None:
        pytest.skip("needs a C compiler to build the fake libcuda.so.1")
    out.mkdir(parents=True, exist_ok=True)
    subprocess.run([compiler, "-shared", "-fPIC", "-O1", "-Wall", "-Wextra", "-Werror",
                    "-Wl,-soname,libcuda.so.1", "-o", str(out / "libcuda.so.1"), str(FAKE_CUDA_SOURCE)],
                   check=True, capture_output=True)
    return out


def fake_framework(folder: Path) -> Path:
    """Write the fake framework module into ``folder``; return the folder."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "fakegpu.py").write_text(FAKE_FRAMEWORK)
    return folder


def context(tmp_path: Path, seconds: float = 300) -> Context:
    """A Context for this interpreter and this clone, reporting under ``tmp_path``."""
    return Context(out=tmp_path / "out", python=sys.executable, repo=REPO, deadline=time.monotonic() + seconds)


def prepend(variable: str, *folders: Path) -> str:
    """``folders`` in front of the current value of a path-like environment variable."""
    return os.pathsep.join([*(str(f) for f in folders), *filter(None, [os.environ.get(variable)])])
