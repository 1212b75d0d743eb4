"""Analyse linted files in worker processes, started the safe way.

A tool that explains why forking a process with threads or an initialized GPU runtime
breaks does not fork the process it runs in: workers come from a fork server (a fresh,
single-threaded interpreter that imported the analysis once) or are spawned. They ignore
Ctrl-C from the moment they exist; the parent handles it by terminating them, so an
interrupted run leaves no process behind and prints no traceback per worker.

Nothing of the linted project runs in them. ``multiprocessing`` starts the fork server and
the resource tracker with ``python -c``, which puts the working folder first on their
import path, and hands each worker the parent's import path and main script to import
again: a ``signal.py`` or ``random.py`` in the folder being linted would run there. They
are started with ``PYTHONSAFEPATH`` set and without ``PYTHONPATH``, and each worker gets
the installed import path (``gpudoctor.safe_path``) and no main module to re-run. The
option that does this for the fork server only exists from Python 3.11; before it, lint
analyses in its own process.

A worker that dies (killed, out of memory) loses nothing: the files it had not returned are
analysed in this process (see ``gpudoctor.lint.engine``). A worker outlives nothing either:
each one watches this process and ends when it is gone, even when it was killed with
SIGKILL, which no handler sees; SIGTERM and SIGHUP stop the workers as Ctrl-C does.

Nor does it speak after this process is gone. A worker being started when this process
was killed reads half its start-up data (``UnpicklingError``), one at work finds its queues
closed, and the resource tracker warns of "leaked semaphore objects" as it removes the
queues' locks: each prints to its standard error, which was this process's, the user's
terminal, after the shell showed its prompt. So the processes launched here get a pipe as
their standard error, which a thread of this process passes on to its own: what they say
while it lives reaches the user, and what they say once it is gone reaches nobody.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from concurrent.futures import ProcessPoolExecutor

    from gpudoctor.knowledge.processes import Target
    from gpudoctor.lint.file_analysis import Outcome
    from gpudoctor.lint.frontend.prescan import Prescan
    from gpudoctor.lint.frontend.text_facts import Facts
    from gpudoctor.lint.limits import Limits


# What a worker imports, imported once by the fork server (each worker would otherwise
# import the rules and the rest of the analysis again, after the fork): these and every
# rule module.
PRELOAD = ("gpudoctor.lint.workers", "gpudoctor.lint.file_analysis", "gpudoctor.lint.analysis.executor",
           "gpudoctor.lint.analysis.analyzer", "gpudoctor.lint.analysis.flows", "gpudoctor.lint.analysis.project",
           "gpudoctor.lint.frontend.parsed", "gpudoctor.lint.frontend.skeleton", "gpudoctor.lint.gc_pause",
           "gpudoctor.lint.rules._registry")


def _preload() -> list[str]:
    import pkgutil

    from gpudoctor.lint import rules

    return [*PRELOAD, *(f"{rules.__name__}.{info.name}" for info in pkgutil.iter_modules(rules.__path__)
                        if not info.name.startswith("_"))]


# PYTHONSAFEPATH (Python 3.11) keeps ``python -c`` from putting the working folder first.
SUPPORTED = sys.version_info >= (3, 11)


@contextmanager
def _clean_launch() -> Iterator[None]:
    """Start processes (the fork server, the resource tracker, workers) that import nothing
    from the working folder, ``PYTHONPATH`` or the main script: the environment their
    interpreter starts with, and the import path and main module each worker is told to
    take (read from this process as it starts them), are set for the launch and restored.
    Their standard error is this process's through a relay (see the module's docstring),
    and they start in a folder that exists.
    """
    from gpudoctor.safe_path import installed_path

    saved_environ = {name: os.environ.get(name) for name in ("PYTHONPATH", "PYTHONSAFEPATH")}
    saved_path = sys.path[:]
    saved_main = sys.modules.get("__main__")
    import types

    try:
        os.environ.pop("PYTHONPATH", None)
        os.environ["PYTHONSAFEPATH"] = "1"
        sys.path[:] = installed_path()
        # No main module to import again in the worker (a script's, a console script's).
        sys.modules["__main__"] = types.ModuleType("__main__")
        with _stderr_relayed(), _from_a_folder_that_exists():
            yield
    finally:
        if saved_main is not None:
            sys.modules["__main__"] = saved_main
        sys.path[:] = saved_path
        for name, value in saved_environ.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextmanager
def _from_a_folder_that_exists() -> Iterator[None]:
    """Launch from the root folder when the working folder was deleted under this process:
    ``multiprocessing`` asks for it (``os.getcwd``) to start each process there, and cannot
    start one otherwise. This process goes back to where it was (an open descriptor of the
    deleted folder) afterwards; the analysis reads absolute paths only."""
    try:
        os.getcwd()
    except OSError:
        pass
    else:
        yield
        return
    try:
        here: int | None = os.open(os.curdir, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        here = None
    os.chdir(os.sep)
    try:
        yield
    finally:
        if here is not None:
            os.fchdir(here)
            os.close(here)


# The write end of the pipe the launched processes' standard error is, and the lock that
# makes one per process (see _stderr_relayed).
_relay: int | None = None
_relay_lock = threading.Lock()
_RELAY_CHUNK = 1 << 16
# The signals the relay's thread leaves to the main thread.
_TERMINATING = {signal.SIGINT, signal.SIGTERM, *(s for s in (getattr(signal, "SIGHUP", None),) if s is not None)}


def _relay_pipe() -> int:
    """The write end of this process's relay pipe, made (with the thread that passes what
    comes through it on to this process's standard error) when first asked for."""
    global _relay  # noqa: PLW0603 - one relay per process, as one fork server
    with _relay_lock:
        if _relay is None:
            read, write = os.pipe()  # neither end is inherited by what this process execs
            threading.Thread(target=_pass_on, args=(read,), name="gpudoctor-relay-stderr", daemon=True).start()
            _relay = write
        return _relay


def _pass_on(read: int) -> None:
    """Copy what comes through the relay pipe to this process's standard error, as it is
    now (a test's capture included). A standard error that is closed: read on regardless,
    so that no launched process blocks on a full pipe."""
    signal.pthread_sigmask(signal.SIG_BLOCK, _TERMINATING)  # signals are the main thread's to act on
    while chunk := os.read(read, _RELAY_CHUNK):
        try:
            while chunk:
                chunk = chunk[os.write(2, chunk):]
        except OSError:
            continue


@contextmanager
def _stderr_relayed() -> Iterator[None]:
    """Make the relay pipe this process's standard error (descriptor 2) while the block
    launches processes, which inherit it as theirs; then put the real one back. Nothing of
    this process's own output is lost meanwhile: it goes through the relay too. Only where
    processes inherit descriptors (POSIX), and only when there is a standard error."""
    if os.name != "posix":
        yield
        return
    try:
        saved = os.dup(2)
    except OSError:  # no standard error: nothing to relay to
        yield
        return
    _flush_stderr()
    os.dup2(_relay_pipe(), 2)
    try:
        yield
    finally:
        _flush_stderr()
        os.dup2(saved, 2)
        os.close(saved)


def _flush_stderr() -> None:
    try:
        sys.stderr.flush()
    except (AttributeError, OSError, ValueError):
        pass


@contextmanager
def _termination_caught() -> Iterator[None]:
    """Turn SIGTERM and SIGHUP into ``gpudoctor.errors.Terminated`` while the block runs (main thread only):
    the block's cleanup then stops the workers, which a default SIGTERM would leave."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    from gpudoctor.errors import Terminated

    def stop(signum: int, _frame: object) -> None:
        raise Terminated(signum)

    wanted = [s for s in (signal.SIGTERM, getattr(signal, "SIGHUP", None)) if s is not None]
    previous = {}
    for signum in wanted:
        if signal.getsignal(signum) == signal.SIG_DFL:  # a handler someone installed is theirs
            previous[signum] = signal.signal(signum, stop)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


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
    if not SUPPORTED:
        return
    context = _context()
    if context.get_start_method() == "forkserver":
        from multiprocessing import forkserver

        with _sigint_ignored(), _clean_launch():
            forkserver.ensure_running()


def run_files(root: str, paths: list[str], processes: int, target: Target, called: dict[str, list[str]],
              facts: dict[str, tuple[str, Facts]] | None = None,
              scans: dict[str, tuple[str, Prescan]] | None = None,
              *, limits: Limits,
              then: Callable[[list[Outcome]], dict[str, list[str]]] | None = None,
              ) -> tuple[list[Outcome], list[str], list[Outcome] | None]:
    """Analyse the linted files in ``processes`` worker processes; return the outcomes, in
    the order of ``paths``, the files a worker took and did not return (it died), and the
    outcomes of a second batch.

    ``then``, given the outcomes once every file came back, names the files to analyse a
    second time and, for each, the names other files use from it for that analysis
    (engine.py): the same workers, which hold the modules parsed and walked, analyse them.
    The second outcomes are None when there was no such batch or a worker died (the caller
    then analyses it itself).

    A worker takes the next share of files when it is done with one (in the order given:
    the costly first), so none waits long while another still has work: the shares shrink
    as the work left does (see _shares). ``facts`` and ``scans`` are the
    gate's facts and the prescans this process already made (by file and digest): the
    workers do not compute them again. ``limits``: the run's budgets, the workers' too.

    A worker that dies (killed, out of memory, a crash in a parser) is noticed, not waited
    for: the executor, unlike a multiprocessing pool, sees a worker that is gone. The files
    not analysed then are returned as lost, for the caller to analyse itself."""
    import pickle
    from concurrent.futures import ProcessPoolExecutor


    context = _context()
    state = pickle.dumps((called, facts, scans, limits), protocol=pickle.HIGHEST_PROTOCOL)
    setup = (root, target, state)
    served = context.get_start_method() == "forkserver"
    with _termination_caught():
        if served:
            from multiprocessing import forkserver

            with _sigint_ignored(), _clean_launch():  # quick: starts the server process and returns
                forkserver.ensure_running()
        with _clean_launch():  # (its queues may start the resource tracker)
            executor = ProcessPoolExecutor(max_workers=processes, mp_context=context, initializer=_start,
                                           initargs=(os.getpid(), setup))
        second: list[Outcome] | None = None
        try:
            # Forked from the server, workers ignore SIGINT as it does; spawned ones are
            # started with it ignored (quick: each is started and left to boot). Submitting
            # starts them.
            found, broken = _batch(executor, paths, processes, served)
            more = then([found[path] for path in paths]) if then is not None and not broken else {}
            if more:
                again, broken = _batch(executor, list(more), processes, served, more)
                second = None if broken else [again[path] for path in more]
            if broken:
                _stop(executor)  # the other workers may be blocked on the broken pool's queues
            else:
                executor.shutdown()
        except BaseException:
            _stop(executor)
            raise
    return [found[path] for path in paths if path in found], [path for path in paths if path not in found], second


def _batch(executor: ProcessPoolExecutor, paths: list[str], processes: int, served: bool,
           names: dict[str, list[str]] | None = None) -> tuple[dict[str, Outcome], bool]:
    """Hand ``paths`` to the workers in shares (``names``: for a second analysis, the names
    other files use from each); the outcomes that came back, and whether a worker died."""
    from concurrent.futures import as_completed
    from concurrent.futures.process import BrokenProcessPool

    from gpudoctor.lint.file_analysis import analyse_in_worker

    shares = {}
    broken = False
    with _sigint_deferred() if served else _sigint_ignored(), _clean_launch():
        for share in _shares(paths, processes):
            try:
                task = (share,) if names is None else (share, {path: names[path] for path in share})
                shares[executor.submit(analyse_in_worker, *task)] = share
            # A worker died already; or while it was being started, and the pipe to it broke
            # (that BrokenPipeError must not reach the CLI, which reads it as its output's
            # reader having gone: ``| head``).
            except (BrokenProcessPool, OSError, EOFError):
                broken = True
    found: dict[str, Outcome] = {}
    for done in as_completed(shares):
        try:
            found.update(done.result())
        except BrokenProcessPool:
            broken = True
    return found, broken


def _start(parent: int, setup: tuple[str, Target, bytes]) -> None:
    """Worker initializer: end this worker when ``parent`` (the linting process) ends, then
    set the worker up."""
    from gpudoctor.lint.file_analysis import start_worker

    _watch(parent)
    start_worker(*setup)


def _watch(parent: int) -> None:
    """End this process as soon as ``parent`` is gone: a thread waits on it (a pidfd, which
    becomes readable when the process ends; where there is none, it looks twice a second).
    A worker blocked on its task queue would otherwise wait for ever for a parent killed
    with SIGKILL, and keep the fork server and the resource tracker alive."""

    def wait() -> None:
        import select
        import time

        try:
            handle = os.pidfd_open(parent)
        except (AttributeError, OSError):
            handle = None
        if handle is not None:
            select.select([handle], [], [])
        else:
            while _alive(parent):
                time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=wait, name="gpudoctor-watch-parent", daemon=True).start()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _stop(executor: ProcessPoolExecutor) -> None:
    """End the workers now: on Ctrl-C (they ignore SIGINT, and would otherwise finish the
    share they are on first), and when one died (before Python 3.12, the executor then
    waits for the others, which may wait on it for ever). SIGKILL: a worker holds nothing
    to clean up, and a stopped one (SIGSTOP, a debugger) would not act on SIGTERM until it
    is continued, while this process waited on it."""
    import multiprocessing

    kill = getattr(executor, "kill_workers", None)  # Python 3.14
    if kill is not None:
        kill()
    else:
        for process in list((getattr(executor, "_processes", None) or {}).values()):
            process.kill()
    # A worker the executor started but had not yet registered when a signal interrupted
    # it: multiprocessing joins every child it started as this process exits, and a stopped
    # worker left alive would make that wait for ever.
    for process in multiprocessing.active_children():
        process.kill()
    executor.shutdown(wait=True, cancel_futures=True)


def _shares(paths: list[str], processes: int) -> Iterator[list[str]]:
    """The files in consecutive shares of about 1/(2 x processes) of what is left: few
    hand-overs between the processes (each costs a round trip), and small shares at the
    end, when a large one would keep one process busy while the others wait."""
    start = 0
    while start < len(paths):
        size = max(1, (len(paths) - start) // (2 * processes))
        yield paths[start:start + size]
        start += size


def stop_helpers() -> None:
    """Stop the fork server and the resource tracker that this process's workers needed,
    and wait for them: left to notice on their own that gpudoctor has ended, they outlive
    it by a few milliseconds, and a tool that waits for a command's whole process group
    (a CI step, a benchmark) sees them still there. (Their ``_stop`` methods are what
    CPython's own tests use; where one is missing, the helper ends as before.)"""
    from multiprocessing import forkserver, resource_tracker

    for helper in (getattr(forkserver, "_forkserver", None), getattr(resource_tracker, "_resource_tracker", None)):
        stop = getattr(helper, "_stop", None)
        if callable(stop):
            try:
                stop()
            except (OSError, ChildProcessError, RuntimeError):
                pass  # already gone, or never started
