"""GPU memory markers and ``gpu_monitor``, with unmodified nvidia-ml-py reading the fake NVML library.

The inner tests play a GPU program: they write their processes' GPU memory into the
fake's state file, as a driver would report it. The fake is loaded through
LD_LIBRARY_PATH, read only at process start, so the inner sessions run in a
subprocess with that environment.
"""

from __future__ import annotations

from xml.etree import ElementTree

import pytest

from tests.probe.helpers import FakeNvml, real_driver_present

GIB = 1 << 30

INNER_CONFTEST = """\
import os

import pytest

STATE = os.environ["GPUDOCTOR_FAKE_NVML_STATE"]


def hold(pid, nbytes):
    '''Say that process ``pid`` holds ``nbytes`` on GPU 0 (0: nothing).'''
    with open(STATE) as f:
        lines = [line for line in f.read().splitlines() if not line.startswith(f"proc 0 {pid} ")]
    if nbytes:
        lines.append(f"proc 0 {pid} {nbytes}")
    with open(STATE + ".new", "w") as f:
        f.write("\\n".join(lines) + "\\n")
    os.replace(STATE + ".new", STATE)


@pytest.fixture(autouse=True)
def fresh_device():
    with open(STATE) as f:
        original = f.read()
    yield
    with open(STATE, "w") as f:
        f.write(original)
"""

LIMITS = """\
import os
import subprocess
import sys

import pytest

from conftest import hold

GIB = 1 << 30
MIB = 1 << 20


@pytest.mark.gpu_memory_limit("2 GiB")
def test_over_the_limit(gpu_monitor):
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        hold(child.pid, GIB)
        hold(os.getpid(), 2 * GIB)
        assert gpu_monitor.peak() == 3 * GIB  # a reading now, while the child holds its share
        assert gpu_monitor.per_process() == {os.getpid(): 2 * GIB, child.pid: GIB}
    finally:
        child.kill()
        child.wait()
    hold(child.pid, 0)


@pytest.mark.gpu_memory_limit("2 GiB")
def test_within_the_limit():
    hold(os.getpid(), GIB)


@pytest.mark.gpu_memory_leak_limit("64 MiB")
def test_leaks_too_much():
    hold(os.getpid(), 100 * MIB)


@pytest.mark.gpu_memory_leak_limit("64 MiB")
def test_releases_what_it_took():
    hold(os.getpid(), 512 * MIB)
    hold(os.getpid(), 10 * MIB)
"""


@pytest.fixture
def fake_gpu(fake_nvml: FakeNvml, monkeypatch: pytest.MonkeyPatch) -> FakeNvml:
    """One fake 16 GiB GPU, seen by the inner pytest subprocess and its watcher."""
    fake_nvml.add_device(total=16 * GIB, used=GIB)
    for key, value in fake_nvml.env().items():
        monkeypatch.setenv(key, value)
    return fake_nvml


def test_limits_fail_with_the_per_process_table(pytester: pytest.Pytester, fake_gpu: FakeNvml) -> None:
    pytester.makeconftest(INNER_CONFTEST)
    pytester.makepyfile(test_limits=LIMITS)
    # NVML is there (the fake): requiring it changes nothing.
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-o", "gpudoctor_sample_interval=0.1",
                                           "--gpudoctor-require-nvml", timeout=120)
    result.assert_outcomes(passed=2, failed=2)
    result.stdout.fnmatch_lines([
        "*_ test_over_the_limit _*",
        "gpu_memory_limit: the test's processes held 3.0 GiB of GPU memory together, over the limit of 2.0 GiB",
        "*- gpudoctor gpu_memory_limit -*",
        "pid * GPU * peak * at start * at end * process",
        "* 0 * 2.0 GiB * 0 B * 2.0 GiB * test process",
        "* 0 * 1.0 GiB * 0 B * 0 B * child of *: python* -c import time; time.sleep(600)",
        "all * 3.0 GiB * 0 B * 2.0 GiB * together (* NVML readings)",
        "*_ test_leaks_too_much _*",
        "gpu_memory_leak_limit: the test's processes held 100.0 MiB more GPU memory at its end than at its "
        "start, over the limit of 64.0 MiB",
        "*- gpudoctor gpu_memory_leak_limit -*",
    ])
    assert "not checked" not in result.stdout.str()


NO_NVML = """\
import pytest

@pytest.mark.gpu_memory_limit("1 MiB")
def test_limited():
    pass

@pytest.mark.gpu_memory_leak_limit("1 MiB")
def test_leak_limited():
    pass

def test_monitor(gpu_monitor):
    assert gpu_monitor.peak() is None
    assert gpu_monitor.per_process() == {}
    assert "no NVIDIA driver" in gpu_monitor.reason

@pytest.mark.gpu_memory_limit("1 MiB")
def test_fails_on_its_own():
    assert 1 == 2

def test_unmarked():
    pass
"""
NO_DRIVER = "no NVML (no NVIDIA driver: libnvidia-ml.so.1 not found)"
no_real_driver = pytest.mark.skipif(real_driver_present(), reason="this machine has a real NVIDIA driver")


@no_real_driver
def test_without_nvml_the_unchecked_tests_are_listed_and_recorded(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_no_nvml=NO_NVML)
    result = pytester.runpytest("-p", "no:cacheprovider", "--junitxml=junit.xml")
    result.assert_outcomes(passed=4, failed=1)
    result.stdout.fnmatch_lines([
        "*assert 1 == 2*",
        "*= gpudoctor: GPU memory not checked =*",
        f"not checked: {NO_DRIVER}: 3 tests",
        "  test_no_nvml.py::test_limited",
        "  test_no_nvml.py::test_leak_limited",
        "  test_no_nvml.py::test_fails_on_its_own",
        "*= short test summary info =*",
    ])
    assert result.stdout.str().count("not checked:") == 1
    # Each such test carries it as a property, which JUnit XML writes (monitor and unmarked: none).
    cases = {case.get("name"): case for case in ElementTree.parse(pytester.path / "junit.xml").iter("testcase")}
    for name in ("test_limited", "test_leak_limited", "test_fails_on_its_own"):
        [prop] = cases[name].iter("property")
        assert (prop.get("name"), prop.get("value")) == ("gpudoctor_gpu_memory", f"not checked: {NO_DRIVER}")
    assert not list(cases["test_monitor"].iter("property")) and not list(cases["test_unmarked"].iter("property"))


@no_real_driver
def test_a_long_list_is_cut_unless_verbose(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_many="""
        import pytest

        @pytest.mark.parametrize("n", range(12))
        @pytest.mark.gpu_memory_limit("1 MiB")
        def test_limited(n):
            pass
    """)
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.stdout.fnmatch_lines([f"not checked: {NO_DRIVER}: 12 tests", "  test_many.py::test_limited[[]9[]]",
                                 "  ... and 2 more (-v lists them)"])
    verbose = pytester.runpytest("-p", "no:cacheprovider", "-v")
    verbose.stdout.fnmatch_lines([f"not checked: {NO_DRIVER}: 12 tests", "  test_many.py::test_limited[[]11[]]"])
    assert "more (-v lists them)" not in verbose.stdout.str()


@no_real_driver
def test_the_unchecked_tests_are_listed_when_pytest_xdist_runs_them(pytester: pytest.Pytester) -> None:
    """The tests run in xdist's workers; the summary is printed by the process that started them."""
    pytest.importorskip("xdist")
    pytester.makepyfile(test_no_nvml=NO_NVML)
    result = pytester.runpytest("-p", "no:cacheprovider", "-n", "2")
    result.assert_outcomes(passed=4, failed=1)
    result.stdout.fnmatch_lines(["*= gpudoctor: GPU memory not checked =*", f"not checked: {NO_DRIVER}: 3 tests"])
    listed = {line.strip() for line in result.stdout.lines if line.startswith("  test_no_nvml.py::")}
    assert listed == {f"test_no_nvml.py::{name}" for name in ("test_limited", "test_leak_limited",
                                                               "test_fails_on_its_own")}


@no_real_driver
@pytest.mark.parametrize("how", [("--gpudoctor-require-nvml",), ("-o", "gpudoctor_require_nvml=true")])
def test_requiring_nvml_fails_the_unchecked_tests(pytester: pytest.Pytester, how: tuple[str, ...]) -> None:
    pytester.makepyfile(test_no_nvml=NO_NVML)
    result = pytester.runpytest("-p", "no:cacheprovider", *how)
    result.assert_outcomes(passed=2, failed=3)
    result.stdout.fnmatch_lines([
        "*_ test_limited _*",
        f"gpu_memory_limit not checked: {NO_DRIVER}; this run requires GPU memory to be checked "
        "(--gpudoctor-require-nvml or gpudoctor_require_nvml)",
        "*_ test_leak_limited _*",
        f"gpu_memory_leak_limit not checked: {NO_DRIVER}; *",
        "*_ test_fails_on_its_own _*",
        "*assert 1 == 2*",
    ])
    assert "GPU memory not checked =" not in result.stdout.str()


REAL_GPU = """\
import pytest

cupy = pytest.importorskip("cupy")


@pytest.mark.gpu_memory_limit("64 MiB")
def test_allocates_a_gibibyte():
    block = cupy.zeros(1 << 28, dtype=cupy.float32)
    cupy.cuda.Device().synchronize()
    del block
"""


@pytest.mark.gpu
@pytest.mark.skipif(not real_driver_present(), reason="needs a real NVIDIA GPU and driver")
def test_real_allocation_over_the_limit_fails(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_real=REAL_GPU)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-o", "gpudoctor_sample_interval=0.05")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["gpu_memory_limit: the test's processes held * of GPU memory together*"])
