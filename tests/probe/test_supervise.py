"""``gpudoctor probe -- COMMAND``: verdicts from exit statuses, output and events."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from gpudoctor.cli import main
from tests.probe.helpers import gpudoctor, gpudoctor_json, script

PY = sys.executable


def _root(document: dict) -> dict:
    return next(p for p in document["processes"] if p["start"] == "root")


def test_successful_command(tmp_path: Path) -> None:
    code, doc, stderr = gpudoctor_json(["--", PY, "-c", "print('hello from the command')"])
    assert code == 0
    assert (doc["verdict"], doc["exit_code"], doc["stop_reason"]) == ("ok", 0, "exited")
    assert doc["command"] == [PY, "-c", "print('hello from the command')"]
    # --json keeps stdout for the document: the command's output is shown on stderr.
    assert "hello from the command" in stderr
    assert _root(doc)["verdict"] == "ok"
    assert any(e["event"] == "start" and e["pid"] == _root(doc)["pid"] for e in doc["events"])


def test_terminal_output_tees_the_command_and_explains() -> None:
    done = gpudoctor(["probe", "--", PY, "-c", "print('visible'); raise SystemExit(3)"])
    assert done.returncode == 1
    assert "visible" in done.stdout
    assert "verdict: failed" in done.stdout
    assert "exited with status 3" in done.stdout


def test_failing_command_is_failed_with_its_last_error(tmp_path: Path) -> None:
    code, doc, _ = gpudoctor_json(["--", PY, "-c", "raise ValueError('bad input file')"])
    assert code == 1
    assert (doc["verdict"], doc["exit_code"]) == ("failed", 1)
    assert "ValueError: bad input file" in doc["explanation"]


def test_command_not_found_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["probe", "--", "no-such-program-gpudoctor"]) == 2
    err = capsys.readouterr().err
    assert "command not found: no-such-program-gpudoctor" in err and "Traceback" not in err


def test_abort_is_reported_as_exit_minus_6() -> None:
    code, doc, _ = gpudoctor_json(["--", PY, "-c", "import os; os.abort()"])
    assert code == 1
    assert (doc["verdict"], doc["exit_code"]) == ("crashed", -6)
    assert "SIGABRT" in doc["explanation"]


def test_sigkill_is_reported_apart_from_abort() -> None:
    code, doc, _ = gpudoctor_json(["--", PY, "-c", "import os; os.kill(os.getpid(), 9)"])
    assert code == 1
    assert (doc["verdict"], doc["exit_code"]) == ("killed", -9)
    assert "SIGKILL (exit -9), not by gpudoctor" in doc["explanation"]
    assert "OOM killer" in doc["explanation"]


def test_tensorflow_fork_abort_string_is_the_cause(tmp_path: Path) -> None:
    source = script(tmp_path, "tf_child.py", (
        "import os, sys\n"
        "print('E external/local_xla/xla/stream_executor/cuda/cuda_driver.cc:282] failed call to "
        "cuInit: CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected', file=sys.stderr)\n"
        "print('F tensorflow/compiler/xla/stream_executor/cuda/cuda_driver.cc:148] Failed setting "
        "context: CUDA_ERROR_NOT_INITIALIZED: initialization error', file=sys.stderr, flush=True)\n"
        "os.abort()\n"))
    code, doc, _ = gpudoctor_json(["--", PY, str(source)])
    assert code == 1
    assert (doc["verdict"], doc["exit_code"]) == ("crashed", -6)
    rows = {(m["row"], m["kind"]) for m in doc["matches"]}
    assert rows == {(14, "cause"), (16, "context")}
    explanation = doc["explanation"]
    assert "Cause: TensorFlow aborted in a forked child" in explanation
    # cuInit NO_DEVICE is context on a CPU host, never the cause.
    assert "Cause: TensorFlow found no usable GPU" not in explanation
    assert "Context (not the cause): TensorFlow found no usable GPU" in explanation


def test_gpu_oom_string_gives_oom(tmp_path: Path) -> None:
    source = script(tmp_path, "oom.py", (
        "import sys\n"
        "print('torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has "
        "a total capacity of 15.77 GiB of which 1.12 GiB is free.', file=sys.stderr)\n"
        "sys.exit(1)\n"))
    code, doc, _ = gpudoctor_json(["--", PY, str(source)])
    assert code == 1
    assert doc["verdict"] == "oom"
    assert _root(doc)["verdict"] == "oom"
    assert "PyTorch ran out of GPU memory" in doc["explanation"]


def test_config_after_init_string_fails_with_cause(tmp_path: Path) -> None:
    source = script(tmp_path, "cfg.py", (
        "raise RuntimeError('Physical devices cannot be modified after being initialized')\n"))
    code, doc, _ = gpudoctor_json(["--", PY, str(source)])
    assert (code, doc["verdict"]) == (1, "failed")
    assert "device configuration ran after TensorFlow had initialized" in doc["explanation"]


def test_fork_events_record_threads_of_the_parent(tmp_path: Path) -> None:
    source = script(tmp_path, "threads.py", (
        "import os, threading\n"
        "stop = threading.Event()\n"
        "threads = [threading.Thread(target=stop.wait) for _ in range(3)]\n"
        "for t in threads: t.start()\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    os._exit(7)\n"
        "os.waitpid(pid, 0)\n"
        "stop.set()\n"))
    code, doc, _ = gpudoctor_json(["--", PY, "-W", "ignore", str(source)])
    assert code == 0, doc["explanation"]
    (child,) = [p for p in doc["processes"] if p["start"] == "fork"]
    assert child["threads_at_fork"] == 4  # main + 3
    assert child["runtimes_at_fork"] == []
    assert child["exit_code"] == 7  # recorded by the bootstrap's os._exit hook
    assert child["ppid"] == _root(doc)["pid"]


def test_existing_sitecustomize_still_runs(tmp_path: Path) -> None:
    own = tmp_path / "own"
    own.mkdir()
    (own / "sitecustomize.py").write_text("import builtins\nbuiltins.MARKER = 'chained'\n")
    import os

    env = dict(os.environ, PYTHONPATH=str(own))
    code, doc, stderr = gpudoctor_json(["--", PY, "-c", "print('marker:', MARKER)"], env=env)
    assert code == 0, stderr
    assert "marker: chained" in stderr
    assert any(e["event"] == "start" for e in doc["events"])


LAUNCHER = """\
import subprocess, sys
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
child.wait()
"""


def test_a_launcher_waiting_on_its_child_is_blocked_in_its_own_wait_line(tmp_path: Path) -> None:
    # The bootstrap wraps os.waitpid in every process: its frame is innermost, never named.
    source = script(tmp_path, "launcher.py", LAUNCHER)
    code, doc, _ = gpudoctor_json(["--hang-after", "1", "--", sys.executable, str(source)])
    assert (code, doc["verdict"]) == (1, "hung"), doc["explanation"]
    root = next(p for p in doc["processes"] if p["start"] == "root")
    assert f"in your code <module> ({source}:3)" in root["blocked_in"] or \
        "in your code <module> (launcher.py:3)" in root["blocked_in"], root["blocked_in"]
    assert "sitecustomize" not in root["blocked_in"] and "sitecustomize" not in doc["explanation"]
    # The sampler records each process's CPU time beside its RSS: the report's CPU lanes.
    cpu = [s["cpu"] for s in doc["samples"] if s["kind"] == "rss" and s["pid"] == root["pid"]]
    assert len(cpu) >= 2 and all(isinstance(c, float) for c in cpu) and cpu == sorted(cpu)


def test_faulthandler_is_signalled_only_where_py_spy_gave_no_stack(monkeypatch: pytest.MonkeyPatch) -> None:
    # faulthandler's dump walks every thread's frames from inside the process while they
    # run: a Pool thread spinning in Python can make it crash the process (SIGSEGV). py-spy
    # reads from outside and goes first; the signal is for what it could not dump.
    from gpudoctor.probe import events, stacks, supervise
    from gpudoctor.probe.record import Limits

    started = [{"event": "start", "pid": pid, "ppid": 1, "t": 0.0, "how": "exec", "dump_fd": 7} for pid in (10, 11)]
    signalled: list[dict[int, int]] = []

    def python_stacks(fds: dict[int, int], *args: object, **kwargs: object) -> dict[int, str]:
        signalled.append(dict(fds))
        return {pid: 'Current thread 0x1 (most recent call first):\n  File "a.py", line 3 in f\n' for pid in fds}

    monkeypatch.setattr(events, "read", lambda *args: started)
    monkeypatch.setattr(stacks, "find_py_spy", lambda: "/opt/py-spy")
    monkeypatch.setattr(stacks, "native_stacks", lambda pids, *args, **kwargs: (
        {10: "Thread 10 (idle): \"MainThread\"\n    wait (a.py:3)\n"}, "Failed to get process executable name"))
    monkeypatch.setattr(stacks, "python_stacks", python_stacks)
    supervisor = supervise.Supervisor([PY, "-c", "pass"], Limits(), None, None)
    try:
        dumped = supervisor._dump_stacks({10, 11}, 0.0, set())
    finally:
        supervise._remove(supervisor._workdir.root)
    assert signalled == [{11: 7}]
    assert (dumped[10].source, dumped[11].source) == ("py-spy", "faulthandler")
