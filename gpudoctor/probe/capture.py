"""Copy a child's output to the terminal while keeping a bounded head and tail of it."""

from __future__ import annotations

import os
import select
import threading
from collections import deque
from typing import IO, Any

# A partial line (no newline yet) is held back at most this long, and this big, before it
# is written anyway: a prompt ("Password: ") must show, and a line that never ends must too.
_PARTIAL_WAIT = 0.5
_PARTIAL_LIMIT = 4096


class WholeLines:
    """A sink that writes only whole lines (ending in a newline or a carriage return)
    to a stream it shares with another ``WholeLines``, each write under their one lock.

    The command's stdout and stderr are copied by two threads; when both go to one
    terminal (or one file: ``2>&1``), chunks as they come would cut each other's lines
    ("to stdoutto stderr"). A partial line waits for its end, for ``_PARTIAL_WAIT`` of
    quiet on its pipe (``Capture`` calls ``finish``), or until it is ``_PARTIAL_LIMIT`` long.
    """

    def __init__(self, sink: IO[bytes], lock: threading.Lock) -> None:
        self._sink = sink
        self._lock = lock
        self._pending = b""

    @property
    def waiting(self) -> bool:
        """Whether a partial line is held back."""
        return bool(self._pending)

    def write(self, chunk: bytes) -> None:
        data = self._pending + chunk
        cut = max(data.rfind(b"\n"), data.rfind(b"\r")) + 1
        if cut == 0 and len(data) > _PARTIAL_LIMIT:
            cut = len(data)
        self._pending = data[cut:]
        self._out(data[:cut])

    def flush(self) -> None:
        pass  # a line is written whole, with a flush, when it is complete

    def finish(self) -> None:
        """Write the partial line held back (its pipe went quiet, or ended)."""
        data, self._pending = self._pending, b""
        self._out(data)

    def _out(self, data: bytes) -> None:
        if not data:
            return
        with self._lock:
            self._sink.write(data)
            self._sink.flush()


def whole_lines(stdout: Any, stderr: Any) -> tuple[Any, Any]:
    """Return the sinks for the command's stdout and stderr: ``WholeLines`` sharing one
    lock when both are the same open file (the same terminal, pipe or file), else as given
    (two destinations cannot cut each other's lines; each gets its bytes as they come)."""
    try:
        out, err = os.fstat(stdout.fileno()), os.fstat(stderr.fileno())
    except (AttributeError, OSError, ValueError):  # no file behind it (the live view's sink)
        return stdout, stderr
    if (out.st_dev, out.st_ino, out.st_rdev) != (err.st_dev, err.st_ino, err.st_rdev):
        return stdout, stderr
    lock = threading.Lock()
    return WholeLines(stdout, lock), WholeLines(stderr, lock)


class Capture:
    """Tee one pipe to ``sink`` in a thread; remember its first and last ``limit`` bytes.

    A program that prints gigabytes of logs must not grow the supervisor; the error
    that explains a failure is almost always in the head (import-time warnings)
    or the tail (the final traceback).
    """

    def __init__(self, source: IO[bytes], sink: Any, limit: int) -> None:
        self._source = source
        self._sink = sink
        self._limit = limit
        self._head = bytearray()
        self._tail: deque[bytes] = deque()
        self._tail_size = 0
        self._keeping = True
        self.total = 0
        self._thread = threading.Thread(target=self._pump, name="gpudoctor-capture", daemon=True)
        self._thread.start()

    def _keep(self, chunk: bytes) -> None:
        room = self._limit - len(self._head)
        if room > 0:
            self._head += chunk[:room]
            chunk = chunk[room:]
        if not chunk:
            return
        self._tail.append(chunk)
        self._tail_size += len(chunk)
        # Drop whole chunks while the rest still holds the last ``limit`` bytes; the
        # newest chunk always stays (kept() trims it), so any limit, even 0, works.
        while len(self._tail) > 1 and self._tail_size - len(self._tail[0]) >= self._limit:
            self._tail_size -= len(self._tail.popleft())

    def _quiet(self, fd: int) -> bool:
        """Tell whether the sink holds a partial line and the pipe stayed quiet for
        ``_PARTIAL_WAIT``: then the partial line is shown (a prompt waits for input)."""
        if not getattr(self._sink, "waiting", False):
            return False
        try:
            return not select.select([fd], [], [], _PARTIAL_WAIT)[0]
        except (OSError, ValueError):
            return False

    def _pump(self) -> None:
        fd = self._source.fileno()
        while True:
            if self._quiet(fd):
                self._finish()
                continue
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            self.total += len(chunk)
            if self._keeping:
                try:
                    self._keep(chunk)
                except Exception:  # never stop draining: a full pipe would block the program
                    self._keeping = False
            if self._sink is not None:
                try:
                    self._sink.write(chunk)
                    self._sink.flush()
                except (OSError, ValueError):  # terminal gone: keep capturing anyway
                    self._sink = None
        self._finish()
        self._source.close()

    def _finish(self) -> None:
        """Show what a line-keeping sink holds back (``WholeLines``, the live view's)."""
        finish = getattr(self._sink, "finish", None)
        if finish is None:
            return
        try:
            finish()
        except (OSError, ValueError):
            self._sink = None

    def join(self, timeout: float) -> None:
        """Wait until the pipe's writers are all gone (or ``timeout`` passes)."""
        self._thread.join(timeout)

    def kept(self) -> tuple[bytes, int, bytes]:
        """Return (head, number of bytes dropped from the middle, tail)."""
        joined = b"".join(self._tail)
        tail = joined[max(0, len(joined) - self._limit):]
        return bytes(self._head), self.total - len(self._head) - len(tail), tail

    def text(self) -> str:
        """Return the kept output, with a marker where the middle was dropped."""
        head, dropped, tail = self.kept()
        middle = f"\n[... {dropped} bytes not kept ...]\n".encode() if dropped > 0 else b""
        return (head + middle + tail).decode(errors="replace")
