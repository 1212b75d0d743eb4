"""The signals that stop a supervised run (SIGINT, SIGTERM, SIGHUP), and who sent them.

The first one stops the tree in order: stack dumps (the evidence of a hang), then SIGTERM
and the grace period. A second one from outside the tree means "now": ``hurry`` cuts the
dumps and the grace period short, and the tree is SIGKILLed at once.

Who sent a signal matters. Ctrl-C, ``kill`` or a CI runner cancelling the job is the
user's call; but a supervised program's parent is gpudoctor, so a program that signals
its parent (``os.kill(os.getppid(), signal.SIGTERM)``, meant for the shell or launcher
that usually starts it) signals gpudoctor: that is a finding about the program, and the
report says so instead of "interrupted".

Python's signal handlers are not told the sender. So while a run is watched the three
signals are blocked in gpudoctor's main thread (and so in the threads it starts after),
and a listener thread takes them with ``sigtimedwait``, whose siginfo names the sending
process (``si_pid``; 0 when the kernel sent it, as for Ctrl-C on a terminal). The
handlers stay installed: a thread started before the run does not block them and may
still receive one, and then the sender is not known. A signal mask is inherited across
fork and exec, so the command is started with gpudoctor's own mask back (``in_child``).
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from gpudoctor.probe.record import SignalSender

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_LISTEN = 0.05  # how often the listener looks whether the run is over


def _cmdline(pid: int) -> tuple[str, ...]:
    """The sender's command line (empty: it is gone, or not readable)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            raw = f.read()
    except OSError:
        return ()
    return tuple(part.decode(errors="replace") for part in raw.split(b"\0") if part)


class Stop:
    """Flags the signals set; the supervisor checks them.

    ``member`` tells whether a PID belongs to the supervised tree (the supervisor sets
    it; None: the process is gone and was never seen); it is asked, from the listener
    thread, the moment a signal comes, while its sender most likely still exists.
    """

    def __init__(self) -> None:
        self.event = threading.Event()
        self.hurry = threading.Event()
        self.signum: int | None = None
        self.at: float | None = None  # time.monotonic() of the first signal
        self.sender: SignalSender | None = None  # who sent the first one (None: the kernel, or not known)
        self.member: Callable[[int], bool | None] = lambda pid: None

    def _member(self, pid: int) -> bool | None:
        try:
            return self.member(pid)
        except Exception:  # the listener must live on: a signal it drops would stop nothing
            return None

    def handler(self, signum: int, frame: Any) -> None:
        """The Python-level handler: the sender is not known here."""
        self.received(signum, None)

    def received(self, signum: int, pid: int | None) -> None:
        """Record ``signum`` from process ``pid`` (None: the kernel, or not known)."""
        sender = None if pid is None else SignalSender(pid, _cmdline(pid), self._member(pid))
        if self.signum is None:
            self.signum, self.at, self.sender = signum, time.monotonic(), sender
        elif sender is None or sender.in_tree is not True:
            # A second signal from outside is someone in a hurry (a second Ctrl-C); the
            # tree's own do not cut the evidence of its stop short.
            self.hurry.set()
        self.event.set()


@contextmanager
def routed(stop: Stop) -> Iterator[Callable[[], None] | None]:
    """Route SIGINT/SIGTERM/SIGHUP to ``stop`` while the block runs (main thread only).

    Yields what a child must run before its exec to get gpudoctor's own signal mask back
    (``subprocess.Popen``'s ``preexec_fn``), or None when nothing was blocked.
    """
    if threading.current_thread() is not threading.main_thread():
        yield None
        return
    previous = {s: signal.signal(s, stop.handler) for s in STOP_SIGNALS}
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    done = threading.Event()
    listener = threading.Thread(target=_listen, args=(stop, done), name="gpudoctor-signals", daemon=True)
    try:
        listener.start()  # after the block: it inherits it, and sigtimedwait needs it
        yield lambda: in_child(mask)
    finally:
        done.set()
        if listener.ident is not None:
            listener.join()
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)  # a signal still pending reaches the handler
        for s, old in previous.items():
            signal.signal(s, old)


def in_child(mask: set[int | signal.Signals]) -> None:
    """Set ``mask`` as the signal mask (run in a child between its fork and its exec)."""
    signal.pthread_sigmask(signal.SIG_SETMASK, mask)


def _listen(stop: Stop, done: threading.Event) -> None:
    while not done.is_set():
        info = signal.sigtimedwait(STOP_SIGNALS, _LISTEN)
        # After gpudoctor was stopped (SIGSTOP, Ctrl-Z) for longer than the timeout, CPython's
        # retry of the interrupted wait returns a siginfo it never filled: only a signal
        # asked for is one.
        if info is not None and info.si_signo in STOP_SIGNALS:
            stop.received(info.si_signo, info.si_pid or None)
