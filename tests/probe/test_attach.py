"""``gpudoctor probe --pid``: attach to a running tree, explain it, and never stop it.

The frozen tree is started by the test itself, outside gpudoctor, in a process group of
its own: the test (not gpudoctor) kills that group at the end and checks nothing is left.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from gpudoctor.cli import main
from gpudoctor.probe import attach, stacks
from tests.probe.helpers import (
    WRITE_PIDS,
    FakeNvml,
    gpudoctor,
    gpudoctor_json,
    read_pids,
    running,
    script,
    unused_pid,
    wait_gone,
)
from tests.probe.test_tensorflow_fork import FREEZE

# A deadline only a stuck machine reaches: the parent imports TensorFlow and runs an op
# before it forks, 5-20 s on a loaded 2-core machine.
STARTUP = 300
GIB = 1 << 30


def _cpu(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        times = psutil.Process(pid).cpu_times()
        total += times.user + times.system
    return total


def _wait_frozen(parent: subprocess.Popen[bytes], workers: int) -> list[int]:
    """Wait until the parent has ``workers`` children and their CPU time stops moving."""
    deadline = time.monotonic() + STARTUP
    reads: list[float] = []
    while time.monotonic() < deadline:
        assert parent.poll() is None, "the frozen program exited on its own"
        children = [c.pid for c in psutil.Process(parent.pid).children()]
        if len(children) == workers:
            reads.append(_cpu(children))
            # Blocked workers burn nothing: three reads a second apart agree (one quiet
            # second could be a worker not yet scheduled on a loaded machine).
            if len(reads) >= 3 and reads[-1] - reads[-3] < 0.01:
                return children
        time.sleep(1.0)
    pytest.fail(f"the fork pool did not freeze within {STARTUP} s")


@pytest.fixture
def frozen_pool(tmp_path: Path) -> Iterator[tuple[int, list[int]]]:
    """A real TensorFlow fork pool, frozen, started outside gpudoctor in its own group."""
    source = script(tmp_path, "freeze.py", FREEZE)
    parent = subprocess.Popen([sys.executable, str(source), "fork"], start_new_session=True,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    tree = [parent.pid]
    try:
        workers = _wait_frozen(parent, 2)
        tree += workers
        yield parent.pid, workers
    finally:
        # Only what the test started: its own process group.
        os.killpg(parent.pid, signal.SIGKILL)
        parent.wait(60)
    assert wait_gone(tree) == []


@pytest.mark.tensorflow
@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None, reason="needs TensorFlow")
def test_attach_explains_a_frozen_tensorflow_fork_pool_without_stopping_it(
        frozen_pool: tuple[int, list[int]]) -> None:
    parent, workers = frozen_pool
    code, doc, stderr = gpudoctor_json(["--pid", str(parent), "--watch", "2"], timeout=STARTUP)
    assert (code, doc["verdict"], doc["stop_reason"]) == (1, "hung", "attached"), stderr
    by_pid = {p["pid"]: p for p in doc["processes"]}
    assert set(by_pid) == {parent, *workers}
    assert by_pid[parent]["start"] == "root"
    for pid in workers:
        assert by_pid[pid]["start"] == "fork"
        assert by_pid[pid]["ppid"] == parent
        assert by_pid[pid]["runtimes_at_fork"] == ["tensorflow"]
        assert by_pid[pid]["verdict"] == "hung"
    explanation = doc["explanation"]
    assert doc["schema_version"] >= 1 and "machine" in doc
    [cause] = [c for c in doc["causes"] if c["kind"] == "fork-after-init"]
    assert cause["rule"] == "GD101" and cause["parent"] == parent and set(cause["processes"]) == set(workers)
    assert f"were forked from pid {parent}, which had TensorFlow loaded at the fork" in explanation  # maps: loaded
    assert 'multiprocessing.get_context("spawn")' in explanation  # the fix
    seen = {p["pid"]: p for p in doc["attached"]["processes"]}
    assert "tensorflow" in seen[parent]["runtimes_loaded"]
    assert seen[parent]["threads"] > 1
    # Attaching stopped nothing: the whole tree still runs, as frozen as before.
    assert running([parent, *workers]) == [parent, *workers]
    if not any(by_pid[pid]["stack_source"] == "py-spy" for pid in workers):
        pytest.skip(f"py-spy could not read the stacks here (ptrace not permitted?): {doc['notes']}")
    assert "Blocked in " in explanation
    assert any(name in explanation for name in ("parallelFor", "parallel_for", "ThreadPool"))
    assert "in your code work (freeze.py:" in explanation


def test_attach_to_a_missing_pid_is_one_line_and_exit_2() -> None:
    done = gpudoctor(["probe", "--pid", str(unused_pid())])
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0
    assert "no process with pid" in done.stderr
    assert "Traceback" not in done.stderr


def test_attach_to_another_users_process_is_one_line_and_exit_2(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    def denied(self: psutil.Process) -> None:
        raise psutil.AccessDenied(self.pid)

    monkeypatch.setattr(attach, "_owned", denied)
    assert main(["probe", "--pid", str(os.getppid())]) == 2
    err = capsys.readouterr().err
    assert f"pid {os.getppid()} belongs to another user" in err
    assert "Traceback" not in err


def test_attach_to_a_process_that_exits_while_examined_is_a_clear_line(tmp_path: Path) -> None:
    target = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                              stdin=subprocess.PIPE, start_new_session=True)
    probe = subprocess.Popen([sys.executable, "-m", "gpudoctor", "probe", "--pid", str(target.pid),
                              "--watch", "300"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert probe.stderr is not None
        # gpudoctor says when its window starts: the target then ends by itself (end of input).
        line = probe.stderr.readline()
        assert f"watching 1 process under pid {target.pid}" in line, line
        assert target.stdin is not None
        target.stdin.close()
        target.wait(60)
        out, err = probe.communicate(timeout=120)
    finally:
        for process in (probe, target):
            if process.poll() is None:
                process.kill()
                process.wait(60)
    assert probe.returncode == 2, (out, err)
    assert f"pid {target.pid} exited while gpudoctor examined it" in err
    assert "Traceback" not in err
    assert wait_gone([target.pid, probe.pid], timeout=10) == []


def test_pid_cannot_be_combined_with_a_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["probe", "--pid", "1", "--", "true"]) == 2
    assert "--pid cannot be combined with a command" in capsys.readouterr().err


def test_loaded_runtimes_reads_the_maps_of_a_process() -> None:
    # This interpreter has mapped none of the GPU runtime libraries (the probe never loads them).
    assert attach.loaded_runtimes(os.getpid()) == {}


# A parent that forks one child (no exec) and starts one exec'd child, writes the PIDs,
# and all three wait forever without using CPU.
FORK_AND_EXEC = """\
import os, signal, subprocess, sys
""" + WRITE_PIDS + """
child = os.fork()
if child == 0:
    signal.pause()
    os._exit(0)
execd = subprocess.Popen([sys.executable, "-c", "import signal; signal.pause()"])
write_pids(sys.argv[1], [os.getpid(), child, execd.pid])
signal.pause()
"""


@pytest.fixture
def waiting_tree(tmp_path: Path) -> Iterator[list[int]]:
    """A waiting parent, its fork child and its exec'd child: [parent, fork, exec]."""
    source = script(tmp_path, "tree.py", FORK_AND_EXEC)
    parent = subprocess.Popen([sys.executable, str(source), str(tmp_path / "pids")], start_new_session=True)
    tree = [parent.pid]
    try:
        tree = read_pids(tmp_path / "pids", 3)
        yield tree
    finally:
        os.killpg(parent.pid, signal.SIGKILL)
        parent.wait(60)
    assert wait_gone(tree) == []


def test_attach_tells_a_fork_from_an_exec_and_reads_nvml_memory(
        waiting_tree: list[int], fake_nvml: FakeNvml) -> None:
    parent, forked, execd = waiting_tree
    fake_nvml.add_device(used=3 * GIB)
    fake_nvml.processes = [(0, forked, GIB)]
    page = fake_nvml.state.with_name("attached.html")
    code, doc, stderr = gpudoctor_json(["--pid", str(parent), "--watch", "1", "--html", str(page)],
                                       env=fake_nvml.env())
    # Waiting with nothing loaded before the fork and no telling frame: idle, not hung.
    assert (code, doc["verdict"], doc["stop_reason"], doc["tracking"]) == (0, "idle", "attached", "attached"), \
        stderr
    by_pid = {p["pid"]: p for p in doc["processes"]}
    assert {pid: by_pid[pid]["start"] for pid in waiting_tree} == {parent: "root", forked: "fork", execd: "exec"}
    assert by_pid[forked]["runtimes_at_fork"] == []
    assert by_pid[forked]["gpu_memory_peak"] == {"0": GIB}
    evidence = {p["pid"]: p for p in doc["attached"]["processes"]}
    assert "a fork, no exec" in evidence[forked]["fork_evidence"]
    assert evidence[execd]["fork_evidence"] is None
    assert "forked from a parent with" not in doc["explanation"]  # nothing was loaded before the fork
    assert running(waiting_tree) == waiting_tree
    html = page.read_text()
    assert "attached to a running process tree" in html
    assert f"pid {forked}" in html or str(forked) in html


def test_attach_to_several_pids(waiting_tree: list[int]) -> None:
    parent, forked, execd = waiting_tree
    code, doc, stderr = gpudoctor_json(["--pid", str(forked), "--pid", str(execd), "--watch", "0.5",
                                        "--no-native-stacks"])
    assert code == 0, stderr
    assert doc["attached"]["pids"] == [forked, execd]
    assert {p["pid"]: p["start"] for p in doc["processes"]} == {forked: "root", execd: "root"}


def test_a_busy_process_is_running_not_hung(capsys: pytest.CaptureFixture[str]) -> None:
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
    try:
        code = main(["probe", "--json", "--pid", str(busy.pid), "--watch", "1", "--no-native-stacks"])
    finally:
        busy.kill()
        busy.wait(60)
    doc = json.loads(capsys.readouterr().out)
    assert (code, doc["verdict"]) == (0, "ok")
    assert doc["processes"][0]["explanation"].startswith("running: ")


def test_without_py_spy_the_report_says_how_to_get_stacks(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(stacks, "find_py_spy", lambda: None)
    sleeper = subprocess.Popen([sys.executable, "-c", "import signal; signal.pause()"], start_new_session=True)
    try:
        code = main(["probe", "--pid", str(sleeper.pid), "--watch", "0.5"])
    finally:
        sleeper.kill()
        sleeper.wait(60)
    out = capsys.readouterr().out
    assert code == 0
    assert "py-spy is not installed (it comes with the report extra: " in out
    assert "pip install py-spy" not in out


def test_attaching_to_gpudoctor_itself_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["probe", "--pid", str(os.getpid())]) == 2
    assert "is this gpudoctor itself" in capsys.readouterr().err


def test_when_py_spy_may_not_trace_the_report_says_how_to_enable_it(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # What py-spy answers where ptrace is refused (yama ptrace_scope, a container without
    # SYS_PTRACE): its reason is passed on with the way to allow it.
    monkeypatch.setattr(stacks, "find_py_spy", lambda: "py-spy")
    monkeypatch.setattr(stacks, "native_stacks",
                        lambda pids, py_spy, started, stopped, until=None: ({}, "Permission denied (os error 1)"))
    sleeper = subprocess.Popen([sys.executable, "-c", "import signal; signal.pause()"], start_new_session=True)
    try:
        code = main(["probe", "--json", "--pid", str(sleeper.pid), "--watch", "0.5"])
    finally:
        sleeper.kill()
        sleeper.wait(60)
    doc = json.loads(capsys.readouterr().out)
    assert code == 0
    note = next(n for n in doc["notes"] if n.startswith("No stacks of pid"))
    assert "py-spy failed (Permission denied (os error 1))" in note
    assert "--cap-add SYS_PTRACE" in note


def test_the_ptrace_hint_is_given_for_python_processes_only() -> None:
    from gpudoctor.probe.attach import Observed, _is_python

    def seen(exe: str | None, *argv: str) -> Observed:
        return Observed(pid=1, ppid=0, create_time=0.0, exe=exe, cmdline=argv)

    assert _is_python(seen("/usr/bin/python3.11", "python3", "train.py"))
    assert _is_python(seen("/opt/venv/bin/python", "gunicorn: worker"))
    assert _is_python(seen(None, "whatever"))  # unreadable: the hint may help
    assert not _is_python(seen("/usr/bin/sleep", "sleep", "60"))


SERVER = """\
import socket, sys
server = socket.create_server(("127.0.0.1", 0))
print(server.getsockname()[1], flush=True)
server.accept()
"""


@pytest.mark.parametrize("program", ["sleep", "server"])
def test_an_idle_process_is_idle_not_hung(program: str, capsys: pytest.CaptureFixture[str]) -> None:
    # `sleep 1000` and a server waiting on its socket make no CPU progress, and nothing
    # about them shows a hang: no fork from a loaded parent, no known hang site, no lock.
    command = ["sleep", "1000"] if program == "sleep" else [sys.executable, "-c", SERVER]
    idle = subprocess.Popen(command, start_new_session=True, stdout=subprocess.PIPE)
    try:
        if program == "server":
            assert idle.stdout is not None and idle.stdout.readline().strip().isdigit()  # listening
        code = main(["probe", "--json", "--pid", str(idle.pid), "--watch", "1"])
    finally:
        idle.kill()
        idle.wait(60)
    doc = json.loads(capsys.readouterr().out)
    assert (code, doc["verdict"]) == (0, "idle"), doc["explanation"]
    (process,) = doc["processes"]
    assert process["verdict"] == "idle" and process["explanation"].startswith("idle (no CPU progress for 1 s)")
    assert "hung would take a fork from a parent with a GPU runtime loaded" in process["explanation"]
    lines = doc["explanation"].splitlines()
    assert lines[0].endswith("without stopping or signalling anything: idle (no CPU progress for 1 s).")
    assert any(line.startswith(f"Idle, not hung: pid {idle.pid} made no CPU progress for 1 s") and
               "It would be a hang with" in line for line in lines)
    assert "Hung" not in doc["explanation"] and doc["causes"] == []


def test_what_shows_an_attached_process_is_hung_not_idle() -> None:
    def seen(start: str = "exec", runtimes: tuple[str, ...] = (), threads: int = 1) -> attach.Observed:
        return attach.Observed(pid=7, ppid=3, create_time=0.0, exe=None, cmdline=(), threads=threads,
                               start=start, runtimes_at_fork=runtimes)

    assert attach.hang_evidence(seen(), None) is None
    assert attach.hang_evidence(seen(), "select_poll_poll_impl, Python accept (socket.py:294)") is None
    assert attach.hang_evidence(seen("fork", ("tensorflow",)), None) == \
        "forked from pid 3, which had TensorFlow loaded at the fork"
    blocked = "Eigen::ThreadPoolDevice::parallelFor, Python fill (tensorflow/python/ops/gen_array_ops.py:3620)"
    assert attach.hang_evidence(seen(), blocked).startswith("blocked in Eigen::ThreadPoolDevice::parallelFor, where")
    lock = "PyThread_acquire_lock_timed, Python wait (threading.py:320)"
    assert attach.hang_evidence(seen(threads=1), lock) == \
        "blocked on a lock (PyThread_acquire_lock_timed) with no other thread left to release it"
    assert attach.hang_evidence(seen(threads=4), lock) is None  # another thread may release it (a join)


def test_the_missing_py_spy_note_says_how_to_install_it_the_way_gpudoctor_was_installed(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from gpudoctor.probe import install_hint

    seen = {1: attach.Observed(pid=1, ppid=0, create_time=0.0, exe=None, cmdline=())}
    monkeypatch.setattr(stacks, "find_py_spy", lambda: None)
    monkeypatch.setattr(install_hint, "source_checkout", lambda: tmp_path)
    (note,) = attach._stacks({1}, seen, True)[1]
    assert f"{sys.executable} -m pip install -e '{tmp_path}[report]'" in note
    monkeypatch.setattr(install_hint, "source_checkout", lambda: None)
    (note,) = attach._stacks({1}, seen, True)[1]
    assert f"{sys.executable} -m pip install matplotlib py-spy" in note


def test_a_library_under_jaxlib_is_not_jax_s_runtime() -> None:
    # Keras maps jaxlib's LAPACK helpers for its linear algebra: JAX's runtime is not loaded
    # (a --pid run blamed JAX for it). jaxlib's runtime extension is.
    from gpudoctor.probe.maps import runtimes_in

    lapack = "7f00-7f10 r-xp 0 08:01 1 /venv/lib/python3.11/site-packages/jaxlib/cpu/_lapack.so\n"
    runtime = "7f20-7f30 r-xp 0 08:01 2 /venv/lib/python3.11/site-packages/jaxlib/_jax.so\n"  # (jaxlib 0.10.2)
    assert runtimes_in([lapack]) == {}
    assert set(runtimes_in([lapack, runtime])) == {"jax"}
    older = "7f40-7f50 r-xp 0 08:01 3 /venv/lib/python3.11/site-packages/jaxlib/xla_extension.so\n"
    assert set(runtimes_in([older])) == {"jax"}
