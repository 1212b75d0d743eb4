"""Fixtures for the IPython extension: an in-process shell, and a stand-in TensorFlow.

The fast tests drive the extension through IPython's own ``InteractiveShell`` in the
pytest process. Real TensorFlow never runs there (it would poison every later fork of
the test session, which the pytest plugin's tests make): a stand-in package named
``tensorflow`` does what gpudoctor looks for, its first op creating the eager context
that ``initialized_runtimes`` reads. The real thing runs in a real kernel
(test_real_kernel.py).
"""

from __future__ import annotations

import builtins
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

STAND_IN_TENSORFLOW = '''\
"""A stand-in for TensorFlow: its first op makes the eager context gpudoctor looks for."""
import sys
import types


class _Context:
    def __init__(self):
        self._context_handle = object()


def _initialize():
    if "tensorflow.python.eager.context" not in sys.modules:
        context = types.ModuleType("tensorflow.python.eager.context")
        context._context = _Context()
        sys.modules["tensorflow.python.eager.context"] = context


def ones(shape):
    _initialize()
    return shape


def matmul(a, b):
    _initialize()
    return a
'''


def _tensorflow_modules() -> dict[str, Any]:
    return {name: module for name, module in sys.modules.items() if name.split(".", 1)[0] == "tensorflow"}


@pytest.fixture
def stand_in_tensorflow(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """``import tensorflow`` imports the stand-in for the test; sys.modules is put back after."""
    package = tmp_path / "stand_in" / "tensorflow"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(STAND_IN_TENSORFLOW)
    monkeypatch.syspath_prepend(str(package.parent))
    saved = _tensorflow_modules()
    for name in saved:
        del sys.modules[name]
    try:
        yield
    finally:
        for name in _tensorflow_modules():
            del sys.modules[name]
        sys.modules.update(saved)


@pytest.fixture
def shell(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A fresh IPython shell, its history in memory, run from an empty project folder.

    IPython makes its user module ``sys.modules["__main__"]`` and adds names to builtins;
    both are put back, so that later tests (multiprocessing's spawn reads ``__main__``)
    see the pytest process as it was.
    """
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    project = tmp_path / "project"
    project.mkdir()
    monkeypatch.chdir(project)
    main, names = sys.modules["__main__"], dict(vars(builtins))
    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    created = InteractiveShell(config=config)
    try:
        yield created
    finally:
        created.run_line_magic("unload_ext", "gpudoctor")
        created.history_manager.end_session()
        sys.modules["__main__"] = main
        for name in set(vars(builtins)) - set(names):
            delattr(builtins, name)


def run(shell: Any, source: str) -> Any:
    """Run one cell as a notebook runs it (kept in the history, with an execution count)."""
    return shell.run_cell(textwrap.dedent(source), store_history=True)
