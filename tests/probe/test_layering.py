"""The probe's import rules (gpudoctor/probe/ruff.toml): no GPU framework, NVML only in nvml.py."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _ruff(copy: Path, *paths: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", *paths], cwd=copy,
                          capture_output=True, text=True)


def test_probe_bans_frameworks_everywhere_and_pynvml_outside_nvml_py(tmp_path: Path) -> None:
    copy = tmp_path / "repo"
    shutil.copytree(ROOT / "gpudoctor", copy / "gpudoctor", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", copy / "pyproject.toml")
    probe = copy / "gpudoctor" / "probe"
    sneaky = "import pynvml\nimport torch\nimport tensorflow as tf\nfrom jax import numpy\n" \
             "import cupy, numba, pycuda\nprint(pynvml, torch, tf, numpy, cupy, numba, pycuda)\n"
    (probe / "sneaky.py").write_text(sneaky)
    (probe / "bootstrap" / "nvml.py").write_text(sneaky)  # the exception is for probe/nvml.py only
    run = _ruff(copy, "gpudoctor/probe/sneaky.py", "gpudoctor/probe/bootstrap/nvml.py")
    assert run.returncode == 1
    for name in ("pynvml", "torch", "tensorflow", "jax", "cupy", "numba", "pycuda"):
        assert run.stdout.count(f"`{name}` is banned") == 2, run.stdout
    # The real nvml.py imports pynvml, and may.
    run = _ruff(copy, "gpudoctor/probe/nvml.py")
    assert run.returncode == 0, run.stdout
