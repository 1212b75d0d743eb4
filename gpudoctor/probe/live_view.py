"""Show a watched tree while the probe runs, on stderr: a live view or plain progress lines.

On a terminal the view is a rich ``Live`` region redrawn at most four times a second,
only when its text changed, and erased when closed, before any report is printed:
stdout and ``--json`` carry exactly what they carry without it. The supervised
command's own output passes above the region (a line written under it would be
overwritten by the next redraw). Where stderr is not a terminal (a CI log, a pipe)
only what changed is written, one plain line each. ``--quiet`` opens no view at all.

A view only observes: whatever fails in it turns it off and never stops the run.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any, Protocol

from gpudoctor.probe import live_render
from gpudoctor.probe.live_snapshot import Snapshot

# The terminal view is redrawn at most this often; plain lines are decided as often.
_REDRAW_EVERY = 0.25
# A child's line that never ends is shown once this much of it is waiting.
_PARTIAL_LIMIT = 4096


class View(Protocol):
    """What the supervisor, the scenario runner and ``--pid`` tell a view."""

    wants_runtimes: bool

    def due(self, now: float) -> bool: ...
    def show(self, snapshot: Snapshot) -> None: ...
    def line(self, text: str) -> None: ...
    def verdict(self, text: str) -> None: ...
    def done(self) -> None: ...
    def echo(self, sink: Any, fd: int) -> Any: ...
    def close(self) -> None: ...


class PlainView:
    """Progress as plain lines: the start, processes appearing and ending, the idle time
    crossing a third and two thirds of ``--hang-after``, the stop and the verdict."""

    wants_runtimes = False

    def __init__(self, stream: IO[str], announce: bool = True) -> None:
        self._stream: IO[str] | None = stream
        self._announce = announce
        self._before: Snapshot | None = None
        self._last = float("-inf")

    def _write(self, lines: list[str]) -> None:
        if not lines or self._stream is None:
            return
        try:
            self._stream.write("".join(line + "\n" for line in lines))
            self._stream.flush()
        except (OSError, ValueError):  # stderr closed: nobody reads the progress any more
            self._stream = None

    def due(self, now: float) -> bool:
        return now - self._last >= _REDRAW_EVERY

    def show(self, snapshot: Snapshot) -> None:
        self._last = time.monotonic()
        lines = [live_render.start_line(snapshot)] if self._before is None and self._announce else []
        self._write(lines + live_render.progress_lines(self._before, snapshot))
        self._before = snapshot

    def line(self, text: str) -> None:
        self._write([text])

    def verdict(self, text: str) -> None:
        self._write([text])

    def done(self) -> None:
        self._before = None

    def echo(self, sink: Any, fd: int) -> Any:
        return sink

    def close(self) -> None:
        pass


class _AboveLive:
    """A sink for the command's output that prints whole lines above the live region."""

    def __init__(self, view: TerminalView) -> None:
        self._view = view
        self._pending = b""

    def write(self, chunk: bytes) -> None:
        data = self._pending + chunk
        head, newline, rest = data.rpartition(b"\n")
        if not newline:
            head, rest = (data, b"") if len(data) > _PARTIAL_LIMIT else (b"", data)
        self._pending = rest
        if head or newline:
            self._view.print_output(head.decode(errors="replace"))

    def flush(self) -> None:
        pass  # lines are shown whole; a partial one waits for its end

    def finish(self) -> None:
        if self._pending:
            self._view.print_output(self._pending.decode(errors="replace"))
            self._pending = b""


class TerminalView:
    """The live region on a terminal (rich ``Live``, redrawn by hand: no refresh thread)."""

    wants_runtimes = True

    def __init__(self, stream: IO[str]) -> None:
        from rich.console import Console
        from rich.live import Live

        self._console = Console(file=stream, highlight=False)
        self._live = Live(console=self._console, auto_refresh=False, transient=True,
                          redirect_stdout=False, redirect_stderr=False)
        self._lock = threading.RLock()
        self._shown: list[str] | None = None
        self._started = False
        self._off = False
        self._last = float("-inf")
        self._sinks: list[_AboveLive] = []

    def _guarded(self, action: Any) -> None:
        if self._off:
            return
        try:
            with self._lock:
                action()
        except Exception:  # the view observes; a terminal that went away must not stop the run
            self._off = True

    def due(self, now: float) -> bool:
        return not self._off and now - self._last >= _REDRAW_EVERY

    def show(self, snapshot: Snapshot) -> None:
        self._last = time.monotonic()
        lines = live_render.view_lines(snapshot, self._console.width, self._console.height)
        if lines == self._shown:
            return
        self._shown = lines

        def draw() -> None:
            from rich.text import Text

            text = Text("\n".join(lines), no_wrap=True, overflow="ellipsis")
            text.stylize("bold", 0, len(lines[0]))
            if not self._started:
                self._live.start()
                self._started = True
            self._live.update(text, refresh=True)

        self._guarded(draw)

    def line(self, text: str) -> None:
        self._guarded(lambda: self._console.print(text, markup=False, soft_wrap=True))

    def print_output(self, text: str) -> None:
        """Print the command's output (``text``: whole lines) above the region."""
        from rich.text import Text

        self._guarded(lambda: self._console.print(Text.from_ansi(text), soft_wrap=True))

    def verdict(self, text: str) -> None:
        pass  # the report that follows says it

    def done(self) -> None:
        """The run ended: empty the region until the next run (scenarios) or the close."""
        for sink in self._sinks:
            sink.finish()
        self._shown = None

        def clear() -> None:
            from rich.text import Text

            if self._started:
                self._live.update(Text(""), refresh=True)

        self._guarded(clear)

    def echo(self, sink: Any, fd: int) -> Any:
        """The sink the command's output on ``fd`` should go to while the view is drawn:
        above the region when it goes to this terminal, unchanged elsewhere (a file)."""
        if not _same_terminal(fd, self._console.file):
            return sink
        above = _AboveLive(self)
        self._sinks.append(above)
        return above

    def close(self) -> None:
        for sink in self._sinks:
            sink.finish()
        if self._started:
            try:
                with self._lock:
                    self._live.stop()  # transient: the region is erased
            except Exception:
                pass
            self._started = False


def _same_terminal(fd: int, stream: IO[str]) -> bool:
    try:
        if not os.isatty(fd):
            return False
        mine, theirs = os.fstat(stream.fileno()), os.fstat(fd)
    except (OSError, ValueError):
        return False
    return mine.st_rdev == theirs.st_rdev


def _terminal(stream: IO[str]) -> bool:
    try:
        return stream.isatty() and os.environ.get("TERM") != "dumb"
    except (OSError, ValueError):
        return False


@contextmanager
def opened(quiet: bool, announce: bool = True, stream: IO[str] | None = None) -> Iterator[View | None]:
    """Yield the view for stderr (None with ``quiet``) and close it on the way out.

    ``announce``: a plain view writes a start line of its own (a scenario run writes
    its own line before each variant instead).
    """
    if quiet:
        yield None
        return
    stream = sys.stderr if stream is None else stream
    view: View = TerminalView(stream) if _terminal(stream) else PlainView(stream, announce)
    try:
        yield view
    finally:
        view.close()
