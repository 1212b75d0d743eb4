"""Copy a child's output to the terminal while keeping a bounded head and tail of it."""

from __future__ import annotations

import os
import threading
from collections import deque
from typing import IO


class Capture:
    """Tee one pipe to ``sink`` in a thread; remember its first and last ``limit`` bytes.

    A program that prints gigabytes of logs must not grow the supervisor; the error
    that explains a failure is almost always in the head (import-time warnings)
    or the tail (the final traceback).
    """

    def __init__(self, source: IO[bytes], sink: IO[bytes] | None, limit: int) -> None:
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

    def _pump(self) -> None:
        fd = self._source.fileno()
        while True:
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
        self._source.close()

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
