"""ProcessPoolExecutor with spawn and no ``if __name__ == "__main__":`` guard.

Report: https://github.com/alex-sherman/unsync/issues/50 (``BrokenProcessPool`` with
"RuntimeError: An attempt has been made to start a new process before the current process
has finished its bootstrapping phase"); also https://github.com/banteg/multicall.py/issues/42.

The script (written on macOS, where spawn is the default; here the spawn context is chosen
explicitly) creates a ProcessPoolExecutor and submits work at module level, without the main
guard. Each spawned worker re-imports the main module to find ``checksum``; the import runs
the module body again, which creates another executor and submits to it: in the child this
raises ``RuntimeError: An attempt has been made to start a new process before the current
process has finished its bootstrapping phase`` and the worker exits with status 1 before
taking any task. The parent's executor notices its workers died and fails every future with
``concurrent.futures.process.BrokenProcessPool: A process in the process pool was
terminated abruptly while the future was running or pending.`` -- exit 1.
Fix: put the executor code under ``if __name__ == "__main__":`` (and keep module level free
of side effects).
"""
import hashlib
import multiprocessing as mp
from concurrent.futures import ProcessPoolExecutor


def checksum(i):
    return hashlib.sha256(str(i).encode() * 10000).hexdigest()[:8]


executor = ProcessPoolExecutor(max_workers=2, mp_context=mp.get_context("spawn"))
futures = [executor.submit(checksum, i) for i in range(8)]
print([f.result() for f in futures])
executor.shutdown()
