"""Fixtures for the probe: a fake libnvidia-ml.so.1, and running gpudoctor in a subprocess.

The probe's tests run ``python -m gpudoctor probe`` in a child process: the dynamic
loader reads LD_LIBRARY_PATH only at process start (so that is how the fake NVML
gets in), and the supervisor makes its process a child subreaper, which a test
must not do to the pytest process itself.
"""

from __future__ import annotations

import importlib.metadata
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.probe.helpers import MARK_VAR, FakeNvml, kill_leftovers, wait_gone

HERE = Path(__file__).parent
FAKE_SOURCE = HERE / "fake_nvml" / "fake_nvml.c"


def _nvml_header() -> Path | None:
    """Find nvml.h among the files of the installed nvidia-nvml-dev-cu12 wheel."""
    try:
        files = importlib.metadata.files("nvidia-nvml-dev-cu12") or []
    except importlib.metadata.PackageNotFoundError:
        return None
    for file in files:
        if file.name == "nvml.h":
            return Path(str(file.locate()))
    return None


@pytest.fixture(scope="session")
def fake_nvml_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Compile the fake libnvidia-ml.so.1 once per session; return its directory."""
    header = _nvml_header()
    compiler = shutil.which("gcc") or shutil.which("cc")
    if header is None or compiler is None:
        pytest.skip("needs gcc and nvml.h from the nvidia-nvml-dev-cu12 wheel (test extra)")
    out = tmp_path_factory.mktemp("fake_nvml")
    library = out / "libnvidia-ml.so.1"
    subprocess.run(
        [compiler, "-shared", "-fPIC", "-O1", "-Wall", "-Wextra", "-Werror",
         "-Wl,-soname,libnvidia-ml.so.1", f"-I{header.parent}", "-o", str(library), str(FAKE_SOURCE)],
        check=True,
        capture_output=True,
    )
    return out


@pytest.fixture
def fake_nvml(fake_nvml_dir: Path, tmp_path: Path) -> FakeNvml:
    """Return a fake NVML with no devices yet; call ``env()`` to use it in a subprocess."""
    return FakeNvml(fake_nvml_dir, tmp_path / "nvml_state.txt")


@pytest.fixture(autouse=True)
def no_leftovers(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Mark the processes a test starts; after it, kill their groups if any still run.

    A failing test must not leave a supervised tree (or a gpudoctor) running into
    the next tests. Tests assert "nothing left running" themselves, by PID.
    """
    mark = uuid.uuid4().hex
    monkeypatch.setenv(MARK_VAR, mark)
    yield mark
    wait_gone(kill_leftovers(mark), timeout=10)
