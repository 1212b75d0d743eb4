"""Import gpudoctor's own code from where it is installed, never from where it runs.

Python puts the folder a program runs from ahead of the standard library: the working
folder for ``python -c`` and ``python -m`` (and for the fork server and resource tracker of
``multiprocessing``, both started with ``-c``), the script's folder for a script, and every
``PYTHONPATH`` entry. A project that holds ``random.py``, ``signal.py`` or a ``libcst/``
folder would then be imported, that is run, by gpudoctor while it lints that project, and a
folder named ``gpudoctor`` there (a clone's own folder) hides the installed package.

``installed_path`` is the import path with those entries left out: the standard library
first (nothing can shadow it), then the installation folders (site-packages, the user's
site, the folders ``.pth`` files add), then any other entry the process was given. An
entry that was left out is kept, last, only when gpudoctor itself or a library it needs is
installed nowhere else (``python -m gpudoctor`` from a clone, or a launcher that installs
through ``PYTHONPATH``).

The command line's process takes this path as soon as it starts (``apply``); its worker
processes are started with it (see ``gpudoctor.lint.workers``). Whatever the interpreter
imported before gpudoctor's first line ran (``sitecustomize`` from ``PYTHONPATH``, the
modules of the console script itself) is the interpreter's doing, under the user's own
settings.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence

# The packages gpudoctor cannot run without, besides the standard library: a left-out
# ``PYTHONPATH`` entry that is the only place one of them is installed is kept (last).
REQUIRED = ("gpudoctor", "libcst", "pathspec") + (("tomli",) if sys.version_info < (3, 11) else ())


def _normal(entry: str, cwd: str) -> str:
    return os.path.normcase(os.path.realpath(os.path.join(cwd, entry) if entry else cwd))


def working_folder() -> str | None:
    """The working folder, or None when it cannot be named (deleted under this process:
    ``os.getcwd`` raises). Nothing can be imported from a deleted folder, so the entries
    relative to it are left out; they are no path to resolve. (Everything that only shows
    a path relative to the working folder asks here, and shows it whole when it is gone.)"""
    try:
        return os.getcwd()
    except OSError:
        return None


def _standard_library() -> tuple[str, str]:
    """The folder of the standard library and the name of its zipped form."""
    return (os.path.dirname(os.path.realpath(os.__file__)),
            f"python{sys.version_info[0]}{sys.version_info[1]}.zip")


def _is_standard(normal: str, stdlib: str, zipped: str) -> bool:
    if normal == os.path.normcase(stdlib) or os.path.basename(normal) == zipped:
        return True
    inside = normal.startswith(os.path.normcase(stdlib) + os.sep)
    return inside and "site-packages" not in normal and "dist-packages" not in normal


def _script_folder() -> str | None:
    """The folder of the script this interpreter runs (which Python put first on the path),
    or None when it runs a module, a command or nothing."""
    if sys.flags.safe_path if hasattr(sys.flags, "safe_path") else False:
        return None
    main = sys.modules.get("__main__")
    if main is None or getattr(main, "__spec__", None) is not None:
        return None
    file = getattr(main, "__file__", None)
    return os.path.dirname(os.path.abspath(file)) if file else None


def installed_path(path: Sequence[str] | None = None, environ: Mapping[str, str] | None = None,
                   cwd: str | None = None) -> list[str]:
    """``path`` (default ``sys.path``) without the working folder, the script's folder and
    the ``PYTHONPATH`` entries, the standard library first (see the module's docstring)."""
    entries = list(sys.path if path is None else path)
    environ = os.environ if environ is None else environ
    if cwd is None:
        cwd = working_folder()
        if cwd is None:  # a deleted working folder: its relative entries name nothing
            entries = [e for e in entries if isinstance(e, str) and os.path.isabs(e)]
            cwd = os.sep
    stdlib, zipped = _standard_library()
    pythonpath = {_normal(e, cwd) for e in environ.get("PYTHONPATH", "").split(os.pathsep) if e}
    left_out_folders = {*pythonpath, _normal("", cwd)}
    script = _script_folder()
    if script is not None:
        left_out_folders.add(_normal(script, cwd))
    standard: list[str] = []
    installed: list[str] = []
    left_out: list[str] = []
    seen: set[str] = set()
    for entry in entries:
        if not isinstance(entry, str):
            continue
        normal = _normal(entry, cwd)
        standard_folder = _is_standard(normal, stdlib, zipped)
        if normal in seen or (entry == "" and standard_folder):
            continue  # (run from a folder of the standard library: that is kept by its own entry)
        seen.add(normal)
        if entry == "" or (normal in left_out_folders and not standard_folder):
            left_out.append(normal)
        elif standard_folder:
            standard.append(entry)
        else:
            installed.append(entry)
    kept = [*standard, *installed]
    # The working or script folder stays only if gpudoctor itself runs from it (``python -m
    # gpudoctor`` in a clone, or a checkout on PYTHONPATH), and then before the installation,
    # so that this gpudoctor, not an installed one, is what its workers import; a PYTHONPATH
    # entry also stays, last, if a package gpudoctor needs is there only.
    own = _home_of("gpudoctor")
    for normal in left_out:
        if own is not None and normal == _normal(own, cwd):
            kept.insert(len(standard), normal)
        elif normal in pythonpath and any(not _found(name, kept) and _found(name, [normal], hooks=False)
                                             for name in REQUIRED):
            kept.append(normal)
    return kept


def _found(name: str, entries: list[str], hooks: bool = True) -> bool:
    """Is ``name`` importable from ``entries`` as a real module or package (or, with
    ``hooks``, through an installation's import hook, such as an editable install's finder)?"""
    import importlib.machinery

    spec = importlib.machinery.PathFinder.find_spec(name, entries)
    if spec is not None and spec.origin not in (None, "namespace"):
        return True
    for finder in sys.meta_path if hooks else ():  # an editable install's finder maps the name itself
        if finder is importlib.machinery.PathFinder or not hasattr(finder, "find_spec"):
            continue
        if type(finder).__module__ in ("_frozen_importlib", "_frozen_importlib_external"):
            continue
        try:
            found = finder.find_spec(name, None)
        except Exception:  # noqa: BLE001 - a third-party finder's failure means "not here"
            continue
        if found is not None and found.origin not in (None, "namespace"):
            return True
    return False


def _home_of(name: str) -> str | None:
    """The path entry an imported package was loaded from."""
    module = sys.modules.get(name)
    file: str | None = getattr(module, "__file__", None)
    if not file:
        return None
    file = os.path.realpath(file)
    return os.path.dirname(os.path.dirname(file)) if os.path.basename(file) == "__init__.py" \
        else os.path.dirname(file)


def apply() -> None:
    """Give this process the installed path (the command line's entry point calls it first)."""
    sys.path[:] = installed_path()
    import importlib

    importlib.invalidate_caches()
