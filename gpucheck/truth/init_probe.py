"""The child of ``truth_table``: import a framework, call one API, say how far CUDA got.

Run as ``python -m gpucheck.truth.init_probe SPEC`` where SPEC is a JSON object with
``imports``, ``setup`` and ``call`` (Python statements) and ``distributions`` (whose
versions to report).
It prints one JSON line: the driver/context state after the import, after the setup and
after the call, or why it could not tell. Standard library only (nvidia-ml-py if present):
it must not initialize anything itself.

How the state is read, from inside this process:

- Driver initialized: ``cuDeviceGetCount`` of libcuda.so.1 returns
  CUDA_ERROR_NOT_INITIALIZED (3) until some code of the process ran ``cuInit`` (the CUDA
  driver API reference, "Initialization": every driver function but a few version
  queries returns it before ``cuInit``), and CUDA_SUCCESS after. The probe never calls
  ``cuInit``. ``dlopen`` of the soname returns the copy the framework already loaded.
- Context: NVML's compute-process list of device 0 holds this PID, the same test
  ``nvidia-smi`` makes (any context, on any thread, made by any library). Second,
  ``cuDevicePrimaryCtxGetState`` says whether the device's primary context is active:
  process-wide, and the context every framework here uses. ``cuCtxGetCurrent`` is
  recorded too, but only as a detail: it is thread-local, and JAX makes its contexts
  current on its own threads, so "no current context" here proves nothing.
"""

from __future__ import annotations

import ctypes
import json
import os
import sys
import time
import traceback
from typing import Any

CUDA_SUCCESS = 0
CUDA_ERROR_NOT_INITIALIZED = 3
# How long to wait for NVML to list a process whose primary context is already active.
_NVML_SETTLE = 2.0


def _load_driver() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None


def _nvml_pids() -> tuple[set[int] | None, str | None]:
    """The PIDs with a compute context on device 0, or why NVML cannot say."""
    try:
        import pynvml
    except ImportError:
        return None, "nvidia-ml-py is not installed"
    try:
        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        listed = pynvml.nvmlDeviceGetComputeRunningProcesses(handle)
    except Exception as error:  # every NVMLError, a missing library
        return None, f"NVML: {error}"
    return {int(item.pid) for item in listed}, None


def state(driver: ctypes.CDLL | None) -> dict[str, Any]:
    """The driver and context state of this process, right now."""
    if driver is None:
        return {"driver": None, "reason": "no CUDA driver: libcuda.so.1 cannot be loaded"}
    count = ctypes.c_int(0)
    code = int(driver.cuDeviceGetCount(ctypes.byref(count)))
    found: dict[str, Any] = {"device_count_code": code}
    if code == CUDA_ERROR_NOT_INITIALIZED:
        found.update(driver=False, primary_active=False, current_context=False)
    elif code != CUDA_SUCCESS:
        found.update(driver=None, reason=f"cuDeviceGetCount returned {code}")
        return found
    else:
        found["driver"] = True
        found.update(_contexts(driver, count.value))
    pids, why = _nvml_pids()
    deadline = time.monotonic() + _NVML_SETTLE
    while pids is not None and found.get("primary_active") and os.getpid() not in pids \
            and time.monotonic() < deadline:
        time.sleep(0.05)
        pids, why = _nvml_pids()
    found["nvml_listed"] = None if pids is None else os.getpid() in pids
    if why:
        found["nvml_reason"] = why
    return found


def _contexts(driver: ctypes.CDLL, devices: int) -> dict[str, Any]:
    """Whether device 0's primary context is active, and whether this thread has a context."""
    current = ctypes.c_void_p(None)
    current_code = int(driver.cuCtxGetCurrent(ctypes.byref(current)))
    found: dict[str, Any] = {"current_context": current_code == CUDA_SUCCESS and bool(current.value)}
    if devices < 1:
        found.update(primary_active=False, devices=0)
        return found
    device = ctypes.c_int(0)
    flags, active = ctypes.c_uint(0), ctypes.c_int(0)
    code = int(driver.cuDeviceGet(ctypes.byref(device), 0))
    if code == CUDA_SUCCESS:
        code = int(driver.cuDevicePrimaryCtxGetState(device, ctypes.byref(flags), ctypes.byref(active)))
    found.update(devices=devices, primary_active=bool(active.value) if code == CUDA_SUCCESS else None)
    if code != CUDA_SUCCESS:
        found["primary_state_code"] = code
    return found


def level(found: dict[str, Any]) -> str | None:
    """"none", "driver" or "context" (None: unknown) for one :func:`state`."""
    if found.get("driver") is None:
        return None
    if not found["driver"]:
        return "none"
    if found.get("nvml_listed") or found.get("primary_active"):
        return "context"
    return "driver"


def _step(name: str, code: str, scope: dict[str, Any], driver: ctypes.CDLL | None,
          report: dict[str, Any]) -> bool:
    """Run ``code``; record the state after it (or the error); return whether it ran."""
    try:
        exec(compile(code, f"<{name}>", "exec"), scope)  # noqa: S102 - the check's own table
    except BaseException as error:  # an API that raises is a finding, not a crash
        report["error"] = {"step": name, "type": type(error).__name__, "message": str(error)[:500],
                           "traceback": traceback.format_exc()[-1500:]}
        report[name] = state(driver)
        return False
    report[name] = state(driver)
    return True


def _versions(distributions: list[str]) -> dict[str, str]:
    """The installed version of each distribution that is installed."""
    import importlib.metadata

    found = {}
    for name in distributions:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return found


def main(argv: list[str]) -> int:
    spec = json.loads(argv[1])
    report: dict[str, Any] = {"pid": os.getpid(), "python": sys.version.split()[0]}
    scope: dict[str, Any] = {"__name__": "__probe__"}
    driver = _load_driver()
    report["before_import"] = state(driver)
    try:
        exec(compile(spec["imports"], "<imports>", "exec"), scope)  # noqa: S102
    except BaseException as error:  # the framework is not importable here
        report["import_error"] = f"{type(error).__name__}: {error}"[:500]
        print(json.dumps(report), flush=True)
        return 0
    report["versions"] = _versions(spec.get("distributions", ()))
    report["after_import"] = state(driver)
    if spec.get("setup") and not _step("after_setup", spec["setup"], scope, driver, report):
        print(json.dumps(report), flush=True)
        return 0
    if spec.get("call"):
        _step("after_call", spec["call"], scope, driver, report)
    print(json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    # Skip the interpreter's teardown: a framework's exit handlers (XLA's clients, CUDA
    # contexts) can take seconds, times some hundred children, and the report is out.
    status = main(sys.argv)
    sys.stdout.flush()
    os._exit(status)
