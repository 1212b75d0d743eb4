"""The live evidence: read only, in the probe's terms, never initializing anything."""

from __future__ import annotations

import multiprocessing
import sys
import types

import pytest

from gpudoctor.ipython import live_state


@pytest.mark.parametrize(("runtime", "framework"), [
    ("tensorflow", "tensorflow"), ("torch.cuda", "torch"), ("jax:cpu", "jax"), ("numba.cuda", "numba"),
    ("pycuda", "pycuda"), ("cuda-driver", None), ("cuda-context", None)])
def test_each_runtime_of_the_probe_belongs_to_its_framework(runtime: str, framework: str | None) -> None:
    assert live_state.framework_of(runtime) == framework
    assert live_state.evidence(runtime) != "seen initialized"


def test_the_start_method_is_read_without_being_fixed() -> None:
    chosen = multiprocessing.get_start_method(allow_none=True)
    method, was_chosen = live_state.start_method()
    assert multiprocessing.get_start_method(allow_none=True) == chosen  # reading it fixed nothing
    assert (method, was_chosen) == ((chosen, True) if chosen else (multiprocessing.get_all_start_methods()[0], False))


def test_an_imported_framework_module_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "cupyx", types.ModuleType("cupyx"))
    assert "cupy" in live_state.imported_frameworks()
    state = live_state.read()
    assert "cupy" in state.imported and state.python_threads >= 1
