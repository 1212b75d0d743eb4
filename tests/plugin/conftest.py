"""Fixtures for the plugin's tests: the probe's fake NVML library, the TensorFlow markers."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable

import pytest

from tests.probe.conftest import fake_nvml, fake_nvml_dir

__all__ = ["fake_nvml", "fake_nvml_dir", "needs_tensorflow"]

_TENSORFLOW_MARKS = (
    pytest.mark.tensorflow,
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None, reason="needs TensorFlow"),
)


def needs_tensorflow(test: Callable[..., None]) -> Callable[..., None]:
    """Mark a test that runs TensorFlow-CPU for real (slow; skipped without TensorFlow)."""
    for mark in _TENSORFLOW_MARKS:
        test = mark(test)
    return test
