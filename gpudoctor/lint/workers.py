"""Analyse linted files in worker processes, started the safe way.

A tool that explains why forking a process with threads or an initialized GPU runtime
breaks does not fork the process it runs in: workers come from a fork server (a fresh,
single-threaded interpreter that imported the analysis once) or are spawned. They ignore
Ctrl-C from the moment they exist; the parent handles it by terminating them, so an
interrupted run leaves no process behind and prints no traceback per worker.
"""

from __future__ import annotations

import multiprocessing
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpudoctor.lint.analysis.gate import Facts
    from gpudoctor.lint.analysis.prescan import Prescan
    from gpudoctor.lint.producer import Outcome


# What a worker imports, imported once by the fork server (each worker would otherwise
# import the rules and the rest of the analysis again, after the fork): these and every
# rule module.
PRELOAD = ("gpudoctor.lint.producer", "gpudoctor.lint.analysis.walker", "gpudoctor.lint.analysis.analyzer",
           "gpudoctor.lint.analysis.flows", "gpudoctor.lint.analysis.project", "gpudoctor.lint.analysis.parsing",
           "gpudoctor.lint.analysis.skeleton", "gpudoctor.lint.collector", "gpudoctor.lint.rules._registry")


def _preload() -> list[str]:
    import pkgutil

    from gpudoctor.lint import rules

    return [*PRELOAD, *(f"{rules.__name__}.{info.name}" for info in pkgutil.iter_modules(rules.__path__)
                        if not info.name.startswith("_"))]


def _context() -> multiprocessing.context.BaseContext:
    """forkserver where it exists: the server, a fresh single-threaded process, imports the
    analysis once and forks each worker from that clean state. spawn elsewhere."""
    if "forkserver" in multiprocessing.get_all_start_methods():
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(_preload())
        return context
    return multiprocessing.get_context("spawn")


@contextmanager
def _sigint_ignored() -> Iterator[None]:
    """Start processes with SIGINT ignored: an ignored signal stays ignored across exec, so
    they cannot be interrupted halfway through starting. Only in the main thread (signal
    handlers belong to it). The window is kept to launching the processes (milliseconds):
    a Ctrl-C inside it is lost, and the next one works."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@contextmanager
def _sigint_deferred() -> Iterator[None]:
    """Hold a Ctrl-C until the block ends, then raise it: a pool interrupted while it is
    being built cannot be terminated cleanly (its half-started workers would fail loudly)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, _frame: caught.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if caught:
        raise KeyboardInterrupt


def prestart() -> None:
    """Start the fork server now, so that its start (a fresh interpreter importing the
    analysis) overlaps with this process deciding which files to lint."""
    context = _context()
    if context.get_start_method() == "forkserver":
        from multiprocessing import forkserver

        with _sigint_ignored():
            forkserver.ensure_running()


def run_files(root: str, paths: list[str], processes: int, method: str, called: dict[str, list[str]],
              facts: dict[str, tuple[str, Facts]] | None = None,
              scans: dict[str, tuple[str, Prescan]] | None = None) -> list[Outcome]:
    """Analyse the linted files in ``processes`` worker processes; return every outcome, in
    the order of ``paths``.

    A worker takes the next share of files when it is done with one (in the order given:
    the costly first), so none waits long while another still has work: the shares shrink
    as the work left does (see _shares). ``facts`` and ``scans`` are the
    gate's facts and the prescans this process already made (by file and digest): the
    workers do not compute them again.

    A worker that dies (killed, out of memory, a crash in a parser) makes every file not
    analysed yet an internal error, not a hang: the executor, unlike a multiprocessing
    pool, notices a worker that is gone."""
    import pickle
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from concurrent.futures.process import BrokenProcessPool

    from gpudoctor.lint.producer import analyse_in_worker, start_worker

    context = _context()
    setup = (root, method, pickle.dumps((called, facts, scans), protocol=pickle.HIGHEST_PROTOCOL))
    served = context.get_start_method() == "forkserver"
    if served:
        from multiprocessing import forkserver

        with _sigint_ignored():  # quick: starts the server process and returns
            forkserver.ensure_running()
    executor = ProcessPoolExecutor(max_workers=processes, mp_context=context, initializer=start_worker,
                                   initargs=setup)
    found: dict[str, Outcome] = {}
    try:
        # Forked from the server, workers ignore SIGINT as it does; spawned ones are
        # started with it ignored (quick: each is started and left to boot). Submitting
        # starts them.
        shares = {}
        broken = False
        with _sigint_deferred() if served else _sigint_ignored():
            for share in _shares(paths, processes):
                try:
                    shares[executor.submit(analyse_in_worker, share)] = share
                # A worker died already; or while it was being started, and the pipe
                # to it broke (that BrokenPipeError must not reach the CLI, which reads
                # it as its output's reader having gone: ``| head``).
                except (BrokenProcessPool, OSError, EOFError):
                    broken = True
                    found.update((path, _lost(path)) for path in share)
        for done in as_completed(shares):
            try:
                found.update(done.result())
            except BrokenProcessPool:
                broken = True
                found.update((path, _lost(path)) for path in shares[done])
        if broken:
            _stop(executor)  # the other workers may be blocked on the broken pool's queues
        else:
            executor.shutdown()
    except BaseException:
        _stop(executor)
        raise
    return [found[path] for path in paths]


def _lost(path: str) -> Outcome:
    from pathlib import Path

    from gpudoctor.lint.producer import Outcome

    return Outcome(Path(path), errors=[
        f"{path}: not analysed: a worker process ended abruptly (killed, out of memory, or "
        "crashed); `--jobs 1` shows which file it was"])


def _stop(executor: object) -> None:
    """End the workers now: on Ctrl-C (they ignore SIGINT, and would otherwise finish the
    share they are on first), and when one died (before Python 3.12, the executor then
    waits for the others, which may wait on it for ever)."""
    terminate = getattr(executor, "terminate_workers", None)  # Python 3.14
    if terminate is not None:
        terminate()
    else:
        for process in list((getattr(executor, "_processes", None) or {}).values()):
            process.terminate()
    executor.shutdown(wait=True, cancel_futures=True)  # type: ignore[attr-defined]


def _shares(paths: list[str], processes: int) -> Iterator[list[str]]:
    """The files in consecutive shares of about 1/(2 x processes) of what is left: few
    hand-overs between the processes (each costs a round trip), and small shares at the
    end, when a large one would keep one process busy while the others wait."""
    start = 0
    while start < len(paths):
        size = max(1, (len(paths) - start) // (2 * processes))
        yield paths[start:start + size]
        start += size
