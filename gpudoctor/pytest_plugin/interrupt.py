"""Interrupt the test's main thread from the watcher process when its deadline passes.

The signal must reach the main thread itself: Python runs signal handlers there, and
a blocking wait (``Pool.map`` waiting on a condition) returns early only when the
signal interrupts that very thread. ``kill()`` would let the kernel pick any thread,
so the watcher uses ``tgkill(pid, pid, sig)``: a process's main thread has the
process's own ID. A real-time signal, so that neither ``SIGALRM`` (pytest-timeout,
the test's own alarms) nor the stack-dump signal is taken.
"""

from __future__ import annotations

import ctypes
import os
import platform
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

INTERRUPT_SIGNAL = signal.SIGRTMIN + 6

# tgkill's system call number, for a libc without the tgkill() wrapper (glibc < 2.30).
_SYS_TGKILL = {"x86_64": 234, "aarch64": 131, "ppc64le": 250, "s390x": 241}


def signal_main_thread(pid: int, signum: int) -> bool:
    """Send ``signum`` to the main thread of process ``pid``; return whether it was sent."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        tgkill = getattr(libc, "tgkill", None)
        if tgkill is not None:
            return int(tgkill(pid, pid, int(signum))) == 0
        number = _SYS_TGKILL.get(platform.machine())
        if number is not None:
            return int(libc.syscall(number, pid, pid, int(signum))) == 0
    except OSError:
        pass
    try:  # no way to aim at one thread: any thread will do, the handler still runs
        os.kill(pid, signum)
    except OSError:
        return False
    return True


class Interrupt:
    """The test process's side: raise in the main thread when the watcher signals."""

    def __init__(self, raise_expired: Callable[[], None]) -> None:
        self._raise = raise_expired
        self.armed = False

    def _handler(self, signum: int, frame: FrameType | None) -> None:
        if self.armed:  # a repeated signal after the test's call returned is ignored
            self._raise()

    def disarm(self) -> None:
        """Stop raising; the handler stays installed so a late signal cannot kill pytest."""
        self.armed = False


@contextmanager
def interruptible(raise_expired: Callable[[], None]) -> Iterator[Interrupt]:
    """While active, the interrupt signal calls ``raise_expired`` in the main thread.

    Off the main thread Python cannot install signal handlers: the interrupt stays
    disarmed, and the deadline still dumps the stacks and kills the children.
    """
    interrupt = Interrupt(raise_expired)
    if threading.current_thread() is not threading.main_thread():
        yield interrupt
        return
    previous = signal.signal(INTERRUPT_SIGNAL, interrupt._handler)
    interrupt.armed = True
    try:
        yield interrupt
    finally:
        interrupt.disarm()
        signal.signal(INTERRUPT_SIGNAL, previous)
