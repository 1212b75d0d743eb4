"""The fake libnvidia-ml.so.1 of the probe's tests, for the runner's GPU-present paths."""

from tests.probe.conftest import fake_nvml, fake_nvml_dir  # noqa: F401  (fixtures, used by name)
