"""Record process starts, forks and exits of a supervised tree for ``gpudoctor probe``.

``gpudoctor probe -- COMMAND`` puts this file's directory first on ``PYTHONPATH``,
so every Python process of the tree runs it at startup (``python -S``/``-I``
skip it). It then

* appends one JSON line per event to the file named by ``GPUDOCTOR_EVENTS``:
  ``start`` (exec/spawn), ``fork-parent`` and ``fork-child`` (``os.register_at_fork``,
  with the forking process's native thread count and the GPU runtimes it had
  initialized), ``exit``, and ``reaped`` (the status of a child it reaped with
  ``os.waitpid``, as multiprocessing and subprocess do);
* records the exception a process dies of (``exception``: its type, message and
  frames), read where CPython leaves it, with no hook the program could notice: an
  uncaught one from ``sys.last_value`` at exit, and one that ends a
  ``multiprocessing.Process``'s ``run`` (its ``_bootstrap`` prints it and exits 1) as
  ``_bootstrap`` names the process in its report (see ``_watch_process_run``).
  Identical failures of many children are told apart from different ones by these
  records, and the user's line is read from their frames. In a child process, a
  ``sys.exit`` with a failure status is recorded too (type ``SystemExit``, with the
  caller's frames): it ends a ``Pool`` worker without a result and without a traceback;
* records the exception that ends a thread (``thread-exception``: the thread's name, the
  exception and its frames; its target is gone by then, its frames name it) as
  ``threading``'s default excepthook reports it, see ``_watch_thread_deaths``: a
  ``multiprocessing.Pool``'s result-handler thread that died leaves its pool waiting for
  ever;
* records which ``multiprocessing`` Process a child is (``process``: its name and the
  function it runs, ``BaseManager._run_server`` for a Manager's server), see
  ``_hook_multiprocessing`` and ``_watch_start_method``;
* registers ``faulthandler`` on signal ``GPUDOCTOR_DUMP_SIGNAL`` (SIGRTMIN+5 by
  default: real-time signals are rarely used by programs and, unlike SIGUSR1, not
  claimed by common libraries) writing to ``GPUDOCTOR_STACKS/<pid>.txt``, so the
  supervisor can dump the Python stacks of a hung process; its events carry the
  file's descriptor so the supervisor can check the program has not closed (and
  reused) it before sending the signal;
* enables ``faulthandler`` for fatal signals (SIGSEGV, SIGABRT, ...) on the same
  file, unless the program already enabled it (``-X faulthandler``): a process
  that crashes leaves "Fatal Python error: Segmentation fault" and its stacks
  there, even when its parent reaps it before the supervisor sees its exit status;
* runs the ``sitecustomize`` that this one shadows, if any.

Imported under another name (``gpudoctor.probe.bootstrap.sitecustomize``, as the
pytest plugin does for ``initialized_runtimes`` and ``native_threads``) it does
nothing at import.

It must never change what the program does: it imports only the standard library,
detects GPU runtimes only by looking at modules already in ``sys.modules``, never
loads a CUDA library, starts no thread, and swallows its own errors.
"""

from __future__ import annotations

import faulthandler
import json
import os
import sys
import time

# typing is not imported at run time: this file runs at the start of every process.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from types import FrameType, TracebackType
    from typing import NoReturn

_EVENTS = os.environ.get("GPUDOCTOR_EVENTS")
_STACKS = os.environ.get("GPUDOCTOR_STACKS")
_SIGNAL = os.environ.get("GPUDOCTOR_DUMP_SIGNAL")
# What tells the runtimes of a process apart (gpudoctor.knowledge.runtimes.bootstrap_tables):
# the frameworks' top-level modules and how each runtime is seen initialized. Read from the
# JSON file GPUDOCTOR_TABLES names (the probe writes it for the processes it starts), or
# given with ``configure`` (the pytest plugin and IPython, which import this module).
_tables: list[dict[str, list[object]]] = []


def configure(tables: dict[str, list[object]]) -> None:
    """Use these tables (gpudoctor.knowledge.runtimes.bootstrap_tables) from now on."""
    _tables[:] = [tables]


def _known() -> dict[str, list[object]]:
    if not _tables:
        found: dict[str, list[object]] = {"gpu_modules": [], "runtimes": []}
        path = os.environ.get("GPUDOCTOR_TABLES")
        if path:
            try:
                with open(path) as source:
                    read = json.load(source)
                if isinstance(read, dict):
                    found.update((key, value) for key, value in read.items() if isinstance(value, list))
            except (OSError, ValueError):
                pass
        _tables.append(found)
    return _tables[0]

_at_fork: dict[str, object] = {}
# The stack file faulthandler writes to: (descriptor, st_dev, st_ino). A raw descriptor,
# not a file object, so that nothing ever closes it behind faulthandler's back.
_stack: list[tuple[int, int, int]] = []
_fatal_enabled: list[bool] = []  # this bootstrap enabled faulthandler for fatal signals
# The sys.last_value a fork child inherited (its parent's, not its own exception).
_inherited_error: list[object] = []
# Set in a child process (a fork child, or one multiprocessing spawned): its sys.exit
# calls are recorded (see _record_sys_exit), not the program's own.
_in_child: list[bool] = []
# multiprocessing's after-fork registry holds this object weakly: kept alive here.
_hooked: list[object] = []
_threads_watched: list[bool] = []  # Thread.name is wrapped (see _watch_thread_deaths)
_recorded_process: list[int] = []  # the pid whose Process was recorded (a fork child inherits the list)


def _write(event: str, **fields: object) -> None:
    """Append one event; a single O_APPEND write keeps lines from different processes whole."""
    if not _EVENTS:
        return
    record = {"event": event, "pid": os.getpid(), "ppid": os.getppid(), "t": time.time()}
    record.update(fields)
    line = (json.dumps(record, default=str) + "\n").encode()
    fd = os.open(_EVENTS, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def native_threads() -> int | None:
    """Return the number of native threads of this process (Python's and the libraries')."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("Threads:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


def _cuda_driver() -> list[str]:
    """Ask an already-loaded libcuda whether cuInit ran; never load it."""
    try:
        with open("/proc/self/maps") as maps:
            path = next((line.split()[-1] for line in maps if "/libcuda.so" in line), None)
    except OSError:
        return []
    if path is None:
        return []
    import ctypes  # only reached when a GPU library already loaded libcuda

    library = ctypes.CDLL(path, mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
    context = ctypes.c_void_p()
    status = library.cuCtxGetCurrent(ctypes.byref(context))
    if status != 0:  # CUDA_ERROR_NOT_INITIALIZED: loaded, cuInit never ran
        return []
    return ["cuda-driver", "cuda-context"] if context.value else ["cuda-driver"]


def initialized_runtimes() -> list[str]:
    """Name the GPU runtimes this process has initialized, from sys.modules alone: read, never
    imported or called (a framework's object may initialize CUDA from its __getattr__, so
    attributes are read through vars())."""
    found: list[str] = []
    modules = sys.modules
    tables = _known()
    for entry in tables["runtimes"]:
        if not (isinstance(entry, list) and len(entry) == 4):
            continue
        name, module, path, test = entry
        try:
            value: object = modules.get(module)
            for attribute in path:
                value = vars(value).get(attribute) if value is not None else None
        except TypeError:  # (an object without __dict__, a malformed entry)
            continue
        if test == "loaded" and module in modules or test == "set" and value is not None or test == "true" and value:
            found.append(name)
        elif test == "keys" and isinstance(value, dict) and value:
            found += [f"{name}:{key}" for key in value]
    if any(name in modules for name in tables["gpu_modules"] if isinstance(name, str)):
        found += _cuda_driver()
    return found


def _safe(function: Callable[..., None]) -> Callable[..., None]:
    """Run ``function`` swallowing its errors: instrumentation must never break the program."""

    def run(*args: object, **kwargs: object) -> None:
        try:
            function(*args, **kwargs)
        except Exception:
            return

    return run


def _inherited_stack_fd() -> int | None:
    """Return the stack file descriptor a fork child inherited, if it still is that file.

    The program may have closed it and reused the number for a file of its own: then
    it is left alone (neither closed nor replaced).
    """
    if not _stack:
        return None
    fd, device, inode = _stack[0]
    try:
        found = os.fstat(fd)
    except OSError:
        return None
    return fd if (found.st_dev, found.st_ino) == (device, inode) else None


@_safe
def _register_dump() -> None:
    """Let the supervisor dump this process's Python stacks by sending a signal.

    Called at start and in each fork child. A child gets a file of its own, put
    under the descriptor it inherited, so that the fatal-error handler it inherited
    writes there too (whoever enabled it). At start, faulthandler is also enabled
    for fatal signals unless the program already did that itself.
    """
    if not (_STACKS and _SIGNAL):
        return
    fd = os.open(os.path.join(_STACKS, f"{os.getpid()}.txt"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    at_start = not _stack
    inherited = _inherited_stack_fd()
    if inherited is not None:
        os.dup2(fd, inherited, inheritable=False)
        os.close(fd)
        fd = inherited
    found = os.fstat(fd)
    _stack[:] = [(fd, found.st_dev, found.st_ino)]
    faulthandler.register(int(_SIGNAL), file=fd, all_threads=True, chain=False)
    if at_start and not faulthandler.is_enabled():
        faulthandler.enable(file=fd, all_threads=True)
        _fatal_enabled[:] = [True]
    elif _fatal_enabled and inherited is None and faulthandler.is_enabled():
        faulthandler.enable(file=fd, all_threads=True)  # ours, but its descriptor was lost


def own_ticks() -> int | None:
    """When this process started, in clock ticks since boot: with the PID it names this
    process to the watchdog, which must not kill a later process given the same PID."""
    try:
        with open("/proc/self/stat", "rb") as f:
            return int(f.read().rsplit(b")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def _dump_fd() -> int | None:
    """Return the descriptor faulthandler writes to, so the supervisor can check it first."""
    return _stack[0][0] if _stack else None


class _Key:
    """What ``multiprocessing.util.register_after_fork`` needs: an object it can hold weakly."""


@_safe
def _record_process(_key: object) -> None:
    """Record which ``multiprocessing`` Process this fork child is (see _record_process_object)."""
    _record_process_object(sys.modules["multiprocessing.process"].current_process())


def _record_process_object(process: object) -> None:
    """Record which ``multiprocessing`` Process this child is: its name and the function it
    runs (``BaseManager._run_server`` for a Manager's server, ``worker`` for a Pool's)."""
    if process is None or _recorded_process == [os.getpid()]:
        return  # a forkserver's child is told by both hooks
    _recorded_process[:] = [os.getpid()]
    target = vars(process).get("_target")
    where = f"{getattr(target, '__module__', '')}.{getattr(target, '__qualname__', '')}".strip(".") \
        if target is not None else None
    # Its target's small int arguments, by position (a launcher's index of the process).
    args = vars(process).get("_args")
    ints = [[i, a] for i, a in enumerate(args[:4]) if type(a) is int] if type(args) is tuple else []
    # A launcher's arguments for the function it runs: the small ints of a tuple argument
    # (``_wrap(fn, i, args, ...)``'s ``args``), and the function's parameter names, by
    # which the probe reads ``train(rank, world_size)``'s world size.
    nested = [[i, j, b] for i, a in enumerate(args[:4]) if type(a) is tuple
              for j, b in enumerate(a[:8]) if type(b) is int] if type(args) is tuple else []
    code = next((a.__code__ for a in args[:4] if type(a).__name__ == "function"), None) \
        if type(args) is tuple else None
    params = list(code.co_varnames[:code.co_argcount]) if code is not None else []
    _write("process", name=str(vars(process).get("_name", "")), target=where,
           kind=type(process).__qualname__, ints=ints, nested=nested, params=params)


@_safe
def _hook_multiprocessing() -> None:
    """Once multiprocessing is in use, have its children record which Process they are:
    the callbacks of ``multiprocessing.util.register_after_fork`` run in every child it
    starts (fork, spawn, forkserver), in ``BaseProcess._bootstrap``, once the child knows
    its Process. Never imports multiprocessing: only when the program has."""
    util = sys.modules.get("multiprocessing.util")
    if _hooked or util is None:
        return
    key = _Key()
    util.register_after_fork(key, _record_process)
    _hooked[:] = [key]


@_safe
def _watch_thread_deaths() -> None:
    """Record the exception that ends a thread, once ``threading`` is in use.

    ``Thread._bootstrap_inner`` catches it and calls the thread's ``invoke_excepthook``,
    whose default hook (``_thread._excepthook``) reads the thread's ``name`` to print
    "Exception in thread NAME:" while ``sys.exc_info()`` is the exception: the ``name``
    property, wrapped, records it when ``invoke_excepthook`` reads it, and returns the
    name unchanged. Installed when the program already imported ``threading`` (never
    imported here): before a fork, when a child is reaped (a Pool's worker handler reaps
    its workers), and at start.
    """
    threading = sys.modules.get("threading")
    thread = getattr(threading, "Thread", None)
    if _threads_watched or thread is None:
        return
    name = vars(thread).get("name")
    if not isinstance(name, property) or name.fget is None or getattr(name.fget, "_gpudoctor", False):
        return
    _threads_watched[:] = [True]
    real = name.fget

    def fget(self: object) -> object:
        # (The C hook reads the name once; a hook of the program's own is another caller.)
        if sys._getframe(1).f_code.co_name == "invoke_excepthook":
            error = sys.exc_info()[1]
            if error is not None:
                _record_thread_exception(self, error)
        return real(self)

    fget._gpudoctor = True  # type: ignore[attr-defined]
    thread.name = property(fget, name.fset, name.fdel, name.__doc__)


@_safe
def _record_thread_exception(thread: object, error: BaseException) -> None:
    name, message = _described(error)
    _write("thread-exception", thread=str(vars(thread).get("_name", "")), type=name,
           message=message, frames=_frames(error.__traceback__))


@_safe
def _before_fork() -> None:
    _hook_multiprocessing()
    _watch_thread_deaths()
    _at_fork.clear()
    # The parent as it forks: by the time the child writes its event, the parent may have
    # exited and the child been adopted by gpudoctor, which os.getppid() would then name.
    _at_fork.update(threads=native_threads(), runtimes=initialized_runtimes(), t=time.time(),
                    parent=os.getpid())
    _write("fork-parent", threads=_at_fork["threads"], runtimes=_at_fork["runtimes"])


@_safe
def _after_fork_in_child() -> None:
    _in_child[:] = [True]
    _register_dump()
    _watch_process_run()
    _inherited_error[:] = [getattr(sys, "last_value", None)]
    parent = _at_fork.get("parent")
    _write(
        "fork-child",
        **({"ppid": parent} if isinstance(parent, int) else {}),
        threads_at_fork=_at_fork.get("threads"),
        runtimes_at_fork=_at_fork.get("runtimes"),
        fork_t=_at_fork.get("t"),
        dump_fd=_dump_fd(),
        ticks=own_ticks(),
    )


# The most frames of an exception recorded: the outermost and the innermost are kept (a
# RecursionError has a thousand frames; the user's call and the raise are at the ends).
_OUTER_FRAMES, _INNER_FRAMES = 16, 48
_MESSAGE_CHARS = 2000


def _frames(traceback: TracebackType | None) -> list[list[object]]:
    """[file, line, function, source line] per frame, outermost first; a file is made
    absolute here, where the process's working folder is still the one it ran in."""
    import linecache

    found: list[list[object]] = []
    while traceback is not None:
        code = traceback.tb_frame.f_code
        name = code.co_filename
        path = name if name.startswith("<") else os.path.abspath(name)
        number = traceback.tb_lineno
        found.append([path, number, getattr(code, "co_qualname", code.co_name),
                      linecache.getline(name, number).strip()[:300]])
        traceback = traceback.tb_next
    if len(found) > _OUTER_FRAMES + _INNER_FRAMES:
        found = found[:_OUTER_FRAMES] + found[-_INNER_FRAMES:]
    return found


@_safe
def _record_exception(error: BaseException, how: str) -> None:
    name, message = _described(error)
    _write("exception", type=name, message=message, frames=_frames(error.__traceback__), how=how)


def _described(error: BaseException) -> tuple[str, str]:
    """The exception's type as a traceback names it (``ValueError``, ``pkg.mod.Error``)
    and its message, shortened (one whose ``__str__`` fails has none)."""
    kind = type(error)
    name = kind.__qualname__ if kind.__module__ in ("builtins", "__main__", "__mp_main__") \
        else f"{kind.__module__}.{kind.__qualname__}"
    try:
        message = str(error)[:_MESSAGE_CHARS]
    except Exception:
        message = ""
    return name, message


@_safe
def _record_exit(code: object, how: str) -> None:
    if how == "atexit":
        # Left by CPython's report of an uncaught exception, which ends the process.
        error = getattr(sys, "last_value", None)
        if isinstance(error, BaseException) and not isinstance(error, SystemExit) \
                and not any(error is inherited for inherited in _inherited_error):
            _record_exception(error, "uncaught")
    _write("exit", code=code if isinstance(code, int) else None, how=how)


def _stack_frames(frame: FrameType | None) -> list[list[object]]:
    """[file, line, function, source line] per frame from ``frame`` outwards, outermost
    first, as ``_frames`` gives a traceback's."""
    import linecache

    found: list[list[object]] = []
    while frame is not None:
        code = frame.f_code
        name = code.co_filename
        path = name if name.startswith("<") else os.path.abspath(name)
        number = frame.f_lineno
        found.append([path, number, getattr(code, "co_qualname", code.co_name),
                      linecache.getline(name, number).strip()[:300]])
        frame = frame.f_back
    found.reverse()
    if len(found) > _OUTER_FRAMES + _INNER_FRAMES:
        found = found[:_OUTER_FRAMES] + found[-_INNER_FRAMES:]
    return found


@_safe
def _record_sys_exit(code: object) -> None:
    """Record a ``sys.exit`` with a failure code in a child process, with where it was
    called: SystemExit is no Exception, so a ``multiprocessing.Pool`` worker whose task
    calls it exits without a result (and without a traceback anyone could read)."""
    if not _in_child or code is None or code == 0:
        return
    caller = sys._getframe(3)  # this function, _safe's wrapper, the sys.exit wrapper, its caller
    if f"multiprocessing{os.sep}" in caller.f_code.co_filename:
        return  # spawn_main passing on the exit status of a process whose run ended: not the program's call
    _write("exception", type="SystemExit", message=str(code)[:_MESSAGE_CHARS],
           frames=_stack_frames(caller), how="sys.exit")


def _wrap_sys_exit() -> None:
    """Record calls of ``sys.exit`` (see ``_record_sys_exit``); the exit itself is unchanged."""
    real = sys.exit

    def exit(status: object = None, /) -> NoReturn:  # sys.exit's own parameter name
        _record_sys_exit(status)
        real(status)  # type: ignore[arg-type]  # any object, as sys.exit takes it

    sys.exit = exit


def _wrap_os_exit() -> None:
    """Record exits through os._exit, which multiprocessing's fork workers use."""
    real = os._exit

    def _exit(status: int) -> NoReturn:  # os._exit's own parameter name
        _record_exit(status, "os._exit")
        real(status)

    os._exit = _exit


@_safe
def _watch_process_run() -> None:
    """Record the exception that ends a ``multiprocessing.Process``'s ``run``.

    ``BaseProcess._bootstrap`` catches it, writes ``"Process NAME:"`` and the traceback,
    and exits 1, so it never reaches ``sys.last_value``. Its ``except`` branch reads
    ``self.name`` for that first line (CPython 3.10 to 3.13) while ``sys.exc_info()`` is
    the exception: the ``name`` property, wrapped, records it when ``_bootstrap`` itself
    reads it. The wrapper adds no frame to the traceback the child prints, and is
    installed in a child only (a fork child, or a spawned one): never in the program's
    own process.
    """
    module = sys.modules.get("multiprocessing.process")
    cls = getattr(module, "BaseProcess", None)
    if cls is None:
        return
    name, bootstrap = vars(cls).get("name"), vars(cls).get("_bootstrap")
    if not isinstance(name, property) or name.fget is None or getattr(name.fget, "_gpudoctor", False) \
            or bootstrap is None:
        return
    real, caller = name.fget, bootstrap.__code__

    def fget(self: object) -> object:
        if sys._getframe(1).f_code is caller:
            error = sys.exc_info()[1]
            if error is not None and not isinstance(error, SystemExit):
                _record_exception(error, "process")
        return real(self)

    fget._gpudoctor = True  # type: ignore[attr-defined]
    cls.name = property(fget, name.fset, name.fdel, name.__doc__)


@_safe
def _record_reaped(child: int, status: int) -> None:
    if os.WIFSIGNALED(status):
        _write("reaped", child=child, code=-os.WTERMSIG(status))
    elif os.WIFEXITED(status):
        _write("reaped", child=child, code=os.WEXITSTATUS(status))


def _wrap_os_waitpid() -> None:
    """Record the exit status of each child this process reaps (multiprocessing, subprocess).

    A worker's parent usually reaps it at once, before the supervisor's next look;
    without this its exit status (0, or -11 after a segfault) would be unknown.
    """
    real = os.waitpid

    def waitpid(pid: int, options: int, /) -> tuple[int, int]:
        if not _threads_watched:
            _watch_thread_deaths()
        found = real(pid, options)
        if found[0] > 0:
            _record_reaped(found[0], found[1])
        return found

    os.waitpid = waitpid


@_safe
def _start() -> None:
    if not _EVENTS:
        return
    with open("/proc/self/cmdline", "rb") as cmdline:
        argv = [a.decode(errors="replace") for a in cmdline.read().split(b"\0") if a]
    # multiprocessing's spawn and forkserver start "python -c 'from multiprocessing...'".
    spawned = any(a.startswith("from multiprocessing") or a == "--multiprocessing-fork"
                  for a in argv)
    _register_dump()
    _write("start", how="spawn" if spawned else "exec", argv=argv[:16],
           dump_fd=_dump_fd(), ticks=own_ticks())
    os.register_at_fork(before=_before_fork, after_in_child=_after_fork_in_child)
    _wrap_os_exit()
    _wrap_sys_exit()
    _wrap_os_waitpid()
    import atexit

    atexit.register(_record_exit, None, "atexit")
    _watch_thread_deaths()
    if spawned:
        _in_child[:] = [True]
        _import_multiprocessing()
        _watch_process_run()


@_safe
def _import_multiprocessing() -> None:
    """Import what a spawned child imports next anyway, to run its process object."""
    import multiprocessing.context  # noqa: F401  (spawn_main imports it next)
    import multiprocessing.process  # noqa: F401
    import multiprocessing.util  # noqa: F401

    _hook_multiprocessing()
    _watch_start_method()


@_safe
def _watch_start_method() -> None:
    """Record which Process a spawned child is. Its ``_after_fork`` runs no after-fork
    callbacks (``SpawnProcess._after_fork`` does nothing), but ``BaseProcess._bootstrap``
    first calls ``context._force_start_method`` with the Process as its ``self``: the
    function, wrapped, reads it from that caller only, and the call goes on unchanged."""
    context = sys.modules.get("multiprocessing.context")
    process = sys.modules.get("multiprocessing.process")
    real = getattr(context, "_force_start_method", None)
    bootstrap = vars(getattr(process, "BaseProcess", object)).get("_bootstrap")
    if real is None or bootstrap is None or getattr(real, "_gpudoctor", False):
        return
    caller = bootstrap.__code__

    def force(method: object) -> object:
        frame = sys._getframe(1)
        if frame.f_code is caller:
            _safe(_record_process_object)(frame.f_locals.get("self"))
        return real(method)

    force._gpudoctor = True  # type: ignore[attr-defined]
    context._force_start_method = force  # type: ignore[union-attr]


def _chain() -> None:
    """Run the sitecustomize this file shadows, as site.py would have."""
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    try:
        spec.loader.exec_module(module)
    except Exception as error:  # site.py reports, and goes on, the same way
        print(f"Error in sitecustomize; set PYTHONVERBOSE for traceback:\n"
              f"{type(error).__name__}: {error}", file=sys.stderr)


if __name__ == "sitecustomize":  # run by site.py, not imported as a library
    _start()
    _chain()
