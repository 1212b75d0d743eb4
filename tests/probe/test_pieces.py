"""Small parts of the probe: sizes, bounded capture, stack parsing, events, cgroups, PID reuse."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpudoctor.cli import main
from gpudoctor.probe import events, host, stacks
from gpudoctor.probe.capture import Capture
from gpudoctor.probe.tree import Tree
from gpudoctor.probe.units import format_size, parse_size

# A py-spy dump of a TensorFlow fork worker hung on this machine (trimmed).
PY_SPY_DUMP = textwrap.dedent("""\
    Process 4305: /work/main/.venv/bin/python hang.py fork
    Python v3.11.7 (/root/.pyenv/versions/3.11.7/bin/python3.11)

    Thread 4305 (idle): "MainThread"
        0x7f68d22a3f16 (libc.so.6)
        pthread_cond_wait (libc.so.6)
        std::condition_variable::wait (libstdc++.so.6.0.30)
        Eigen::ThreadPoolDevice::parallelFor (tensorflow/libtensorflow_cc.so.2)
        tensorflow::FillOp<Eigen::ThreadPoolDevice, float, int>::Compute (tensorflow/libtensorflow_cc.so.2)
        TFE_Py_FastPathExecute_C (tensorflow/python/lib_pywrap_tensorflow_common.so)
        fill (tensorflow/python/ops/gen_array_ops.py:3620)
        ones (tensorflow/python/ops/array_ops.py:3100)
        f (hang.py:4)
        worker (multiprocessing/pool.py:125)
    Thread 4307 (idle): "Thread-1 (_handle_workers)"
        select (selectors.py:415)
""")

FAULTHANDLER_DUMP = textwrap.dedent("""\
    Thread 0x00007f1 (most recent call first):
      File "/usr/lib/python3.11/threading.py", line 327 in wait
    Current thread 0x00007f2 (most recent call first):
      File "/usr/lib/python3.11/threading.py", line 327 in wait
      File "/home/me/train.py", line 12 in main
""")


@pytest.mark.parametrize(("text", "expected"), [
    ("512", 512), ("2GiB", 2 << 30), ("1.5 GB", 1_500_000_000), ("64KiB", 65536), ("3m", 3_000_000),
])
def test_parse_size(text: str, expected: int) -> None:
    assert parse_size(text) == expected


def test_bad_size_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["probe", "--memory-limit", "lots", "--", "true"]) == 2
    assert "not a size" in capsys.readouterr().err


def test_format_size() -> None:
    assert format_size(None) == "n/a"
    assert format_size(3 << 30) == "3.0 GiB"


def test_capture_keeps_head_and_tail_and_tees_everything() -> None:
    read, write = os.pipe()
    sink = io.BytesIO()
    capture = Capture(os.fdopen(read, "rb"), sink, limit=10)
    data = b"HEAD-12345" + b"x" * 100_000 + b"TAIL-67890"
    with os.fdopen(write, "wb") as pipe:
        pipe.write(data)
    capture.join(10)
    assert sink.getvalue() == data
    kept = capture.text()
    assert kept.startswith("HEAD-12345") and kept.endswith("TAIL-67890")
    assert "[... 100000 bytes not kept ...]" in kept


def test_blocked_in_native_names_the_runtime_frame_and_the_user_frame() -> None:
    assert stacks.blocked_in_native(PY_SPY_DUMP) == (
        "Eigen::ThreadPoolDevice::parallelFor, Python fill (tensorflow/python/ops/gen_array_ops.py:3620), "
        "in your code f (hang.py:4)"
    )


def test_blocked_in_python_uses_the_signalled_thread() -> None:
    assert stacks.blocked_in_python(FAULTHANDLER_DUMP) == (
        "Python wait (/usr/lib/python3.11/threading.py:327), in your code main (/home/me/train.py:12)"
    )


def test_events_tolerate_a_torn_last_line(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    good = [
        {"event": "start", "pid": 10, "ppid": 1, "t": 100.0, "how": "exec", "dump_fd": 3},
        {"event": "fork-child", "pid": 11, "ppid": 10, "t": 101.5, "threads_at_fork": 9,
         "runtimes_at_fork": ["tensorflow"], "dump_fd": 4},
        {"event": "exit", "pid": 11, "ppid": 10, "t": 102.0, "code": 3, "how": "os._exit"},
        {"event": "exit", "pid": 11, "ppid": 10, "t": 102.1, "code": None, "how": "atexit"},
    ]
    path.write_text("".join(json.dumps(e) + "\n" for e in good) + '{"event": "fork-ch')
    found = events.read(path, start_epoch=100.0)
    assert [e["t"] for e in found] == [0.0, 1.5, 2.0, 2.1]
    origin = events.origins(found)[11]
    assert (origin.how, origin.parent, origin.threads_at_fork, origin.runtimes_at_fork, origin.dump_fd) == (
        "fork", 10, 9, ("tensorflow",), 4)
    assert events.exit_codes(found) == {11: 3}


def test_a_parents_reaped_record_is_the_exit_status() -> None:
    found = [
        {"event": "exit", "pid": 12, "ppid": 10, "t": 0.5, "code": None, "how": "atexit"},
        {"event": "reaped", "pid": 10, "ppid": 1, "t": 0.6, "child": 12, "code": 3},
        {"event": "reaped", "pid": 10, "ppid": 1, "t": 0.7, "child": 13, "code": -11},
        {"event": "exit", "pid": 14, "ppid": 10, "t": 0.8, "code": None, "how": "atexit"},
    ]
    assert events.exit_codes(found) == {12: 3, 13: -11, 14: None}


V1_CGROUP = "12:pids:/docker/abc\n4:memory:/docker/abc\n0::/docker/abc\n"
V2_CGROUP = "0::/user.slice/job.scope\n"


def test_cgroup_v1_limit_and_unlimited(tmp_path: Path) -> None:
    limit_file = tmp_path / "memory" / "docker" / "abc" / "memory.limit_in_bytes"
    limit_file.parent.mkdir(parents=True)
    limit_file.write_text("9223372036854771712\n")  # v1's "no limit"
    assert host.cgroup_memory_limit(tmp_path, V1_CGROUP) is None
    limit_file.write_text(f"{4 << 30}\n")
    assert host.cgroup_memory_limit(tmp_path, V1_CGROUP) == 4 << 30
    # Not mounted at its host path (a container): the controller's root is read.
    assert host.cgroup_memory_limit(tmp_path, "4:memory:/elsewhere\n") is None
    (tmp_path / "memory" / "memory.limit_in_bytes").write_text(f"{2 << 30}\n")
    assert host.cgroup_memory_limit(tmp_path, "4:memory:/elsewhere\n") == 2 << 30


def test_cgroup_v2_limit_and_unlimited(tmp_path: Path) -> None:
    limit_file = tmp_path / "user.slice" / "job.scope" / "memory.max"
    limit_file.parent.mkdir(parents=True)
    limit_file.write_text("max\n")
    assert host.cgroup_memory_limit(tmp_path, V2_CGROUP) is None
    limit_file.write_text(f"{3 << 30}\n")
    assert host.cgroup_memory_limit(tmp_path, V2_CGROUP) == 3 << 30
    # A v1 memory line is looked for in the v1 layout only.
    assert host.cgroup_memory_limit(tmp_path, "4:memory:/user.slice/job.scope\n") is None


def test_cgroup_oom_kill_counter_v1_and_v2(tmp_path: Path) -> None:
    v2 = tmp_path / "user.slice" / "job.scope"
    v2.mkdir(parents=True)
    (v2 / "memory.events").write_text("low 0\nhigh 0\nmax 4\noom 2\noom_kill 2\noom_group_kill 0\n")
    assert host.cgroup_oom_kills(tmp_path, V2_CGROUP) == 2
    v1 = tmp_path / "memory" / "docker" / "abc"
    v1.mkdir(parents=True)
    (v1 / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 5\n")
    assert host.cgroup_oom_kills(tmp_path, "4:memory:/docker/abc\n") == 5
    (v1 / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\n")  # kernel < 4.13
    assert host.cgroup_oom_kills(tmp_path, "4:memory:/docker/abc\n") is None
    assert host.cgroup_oom_kills(tmp_path, "") is None


def test_capture_with_a_zero_limit_drains_a_large_writer() -> None:
    writer = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdout.write('x' * 300_000)"],
                              stdout=subprocess.PIPE)
    try:
        assert writer.stdout is not None
        capture = Capture(writer.stdout, None, limit=0)
        assert writer.wait(timeout=60) == 0  # a capture that stopped reading would block it
        capture.join(10)
        assert capture.total == 300_000
        assert capture.kept() == (b"", 300_000, b"")
        assert capture.text() == "\n[... 300000 bytes not kept ...]\n"
    finally:
        writer.kill()
        writer.wait()


def test_a_reused_pid_is_a_new_process(tmp_path: Path) -> None:
    token = "test-" + tmp_path.name
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"],
                             env=dict(os.environ, GPUDOCTOR_RUN=token))
    try:
        tree = Tree(child.pid, token, set())
        tree.scan()
        first = tree.tracks[child.pid]
        first.exit_code, first.rss_peak = 3, 1 << 40
        # As if that process had ended and the kernel had given its PID to a new one.
        assert first.create_time is not None
        first.create_time -= 100
        tree.scan()
        now = tree.tracks[child.pid]
        assert now is not first and now.alive and now.exit_code is None and now.rss_peak < 1 << 40
        assert tree.retired == [first] and not first.alive
        # One the supervisor reaped: its PID seen again is a new process as well.
        tree.record_exit(child.pid, 0)
        tree.scan()
        assert tree.tracks[child.pid].exit_code is None and tree.retired == [first, now]
        assert tree.all_tracks() == [first, now, tree.tracks[child.pid]]
    finally:
        child.kill()
        child.wait()


@settings(max_examples=50, deadline=None)
@given(chunks=st.lists(st.binary(min_size=1, max_size=300), max_size=20), limit=st.integers(0, 500))
def test_capture_bounds_hold_for_any_output(chunks: list[bytes], limit: int) -> None:
    read, write = os.pipe()
    capture = Capture(os.fdopen(read, "rb"), None, limit=limit)
    with os.fdopen(write, "wb") as pipe:
        for chunk in chunks:
            pipe.write(chunk)
    capture.join(10)
    data = b"".join(chunks)
    head, dropped, tail = capture.kept()
    assert capture.total == len(data)
    assert head == data[:limit]
    assert len(tail) <= limit and data.endswith(tail)
    assert len(head) + dropped + len(tail) == len(data)
    # Only what does not fit in the head and the tail is dropped.
    assert dropped == max(0, len(data) - 2 * limit)


def test_short_command_keeps_the_arguments_of_a_deep_interpreter_path() -> None:
    from gpudoctor.probe.command_text import short_command

    deep = "/check/" + "d" * 90 + "/.venv/bin/python"
    assert short_command([deep, "-c", "import os\n\nos.fork()"]) == "python -c import os os.fork()"
    cut = short_command(["python", "-c", "x" * 200], limit=20)
    assert cut == "python -c xxxxxxxxx…" and len(cut) == 20
    assert short_command([]) == ""


def test_gpudoctors_bootstrap_is_never_where_a_process_is_blocked() -> None:
    """A launcher waiting in ``p.wait()`` goes through the bootstrap's os.waitpid wrapper."""
    bootstrap = Path(stacks.__file__).resolve().with_name("bootstrap") / "sitecustomize.py"
    dump = textwrap.dedent(f"""\
        Current thread 0x00007f2 (most recent call first):
          File "{bootstrap}", line 262 in waitpid
          File "/usr/lib/python3.11/subprocess.py", line 1959 in _wait
          File "/home/me/launch.py", line 7 in main
    """)
    assert stacks.blocked_in_python(dump) == (
        "Python _wait (/usr/lib/python3.11/subprocess.py:1959), in your code main (/home/me/launch.py:7)")
    native = PY_SPY_DUMP.replace("        f (hang.py:4)\n",
                                 "        waitpid (sitecustomize.py:262)\n        f (hang.py:4)\n")
    assert "sitecustomize" not in (stacks.blocked_in_native(native) or "")
    assert "in your code f (hang.py:4)" in (stacks.blocked_in_native(native) or "")
    under_package = native.replace("(sitecustomize.py:262)", "(gpudoctor/probe/bootstrap/sitecustomize.py:262)")
    assert "sitecustomize" not in (stacks.blocked_in_native(under_package) or "")


def test_stdout_and_stderr_to_one_file_are_written_in_whole_lines(tmp_path: Path) -> None:
    from gpudoctor.probe.capture import whole_lines

    with open(tmp_path / "terminal", "wb") as shared, open(tmp_path / "other", "wb") as other:
        out, err = whole_lines(shared, shared)
        out.write(b"to std")  # the start of a line ...
        err.write(b"to stderr\n")  # ... does not let the other stream's line cut in
        out.write(b"out\nand a prompt: ")
        assert out.waiting
        out.finish()  # what Capture calls once the pipe is quiet (the prompt waits for input)
        assert whole_lines(shared, other) == (shared, other)  # two destinations: untouched
    assert (tmp_path / "terminal").read_bytes() == b"to stderr\nto stdout\nand a prompt: "


# Two threads write whole lines in bursts larger than a pipe's read (64 KiB), one to stdout
# and one to stderr: gpudoctor reads each pipe in chunks that end mid-line.
TWO_STREAMS = """\
import os, threading
def lines(fd, letter):
    for i in range(20):
        os.write(fd, (letter * 150 + "\\n").encode() * 1000)
threads = [threading.Thread(target=lines, args=(fd, letter)) for fd, letter in ((1, "o"), (2, "e"))]
for t in threads: t.start()
for t in threads: t.join()
"""


def test_a_commands_stdout_and_stderr_on_one_terminal_never_cut_each_others_lines(tmp_path: Path) -> None:
    program = tmp_path / "two_streams.py"
    program.write_text(TWO_STREAMS)
    done = subprocess.run([sys.executable, "-m", "gpudoctor", "probe", "--quiet", "--", sys.executable,
                           str(program)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300)
    lines = done.stdout.decode().splitlines()
    echoed = [line for line in lines if set(line) in ({"o"}, {"e"}) or ("o" in line and "e" in line
                                                                           and set(line) <= {"o", "e"})]
    assert sum(line == "o" * 150 for line in echoed) == 20000 and sum(line == "e" * 150 for line in echoed) == 20000, \
        [line for line in echoed if line not in ("o" * 150, "e" * 150)][:3]


# A process that forks a child which execs `sleep` only once the file named by argv[1]
# exists: between the fork and the exec the child has its parent's command line. With
# argv[2] "detach" it first leaves its parent (double fork), prints its PID and forks only
# once a line comes on stdin.
FORK_THEN_EXEC = """\
import os, sys, time
if sys.argv[2:] == ["detach"]:
    if os.fork():
        os._exit(0)
    print(os.getpid(), flush=True)
    sys.stdin.readline()
pid = os.fork()
if pid == 0:
    while not os.path.exists(sys.argv[1]):
        time.sleep(0.01)
    os.execvp("sleep", ["sleep", "600"])
print(pid, flush=True)
os.waitpid(pid, 0)
"""


def test_a_child_seen_before_its_exec_is_named_by_the_program_it_execs(tmp_path: Path) -> None:
    go = tmp_path / "go"
    token = "test-" + tmp_path.name
    parent = subprocess.Popen([sys.executable, "-c", FORK_THEN_EXEC, str(go)], stdout=subprocess.PIPE, text=True,
                              env=dict(os.environ, GPUDOCTOR_RUN=token))
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    try:
        tree = Tree(parent.pid, token, set())
        tree.scan()
        tree.scan()  # the parent may be tracked after the child in one scan: compared at the next
        assert tree.tracks[child].cmdline == tree.tracks[parent.pid].cmdline and tree.tracks[child].unexeced
        go.touch()
        deadline = time.monotonic() + 60
        while tree.tracks[child].cmdline != ("sleep", "600") and time.monotonic() < deadline:
            tree.scan()
            time.sleep(0.02)
        assert tree.tracks[child].cmdline == ("sleep", "600") and not tree.tracks[child].unexeced
    finally:
        os.kill(child, signal.SIGKILL)
        parent.wait(60)


def test_the_interpreters_own_frames_are_not_your_code() -> None:
    """torchrun's agent runs under ``<frozen runpy>``, a spawned worker and the resource
    tracker under ``python -c "from multiprocessing... "``: neither is the user's code; a
    user's own ``python -c`` program is."""
    runpy = textwrap.dedent("""\
        Thread 10 (idle): "MainThread"
            time_sleep (libpython3.11.so.1.0)
            _invoke_run (torch/distributed/elastic/agent/server/api.py:923)
            _run_code (<frozen runpy>:88)
    """)
    assert "your code" not in (stacks.blocked_in_native(runpy) or "")
    tracker = textwrap.dedent("""\
        Thread 11 (idle): "MainThread"
            read (libc.so.6)
            main (multiprocessing/resource_tracker.py:201)
            <module> (<string>:1)
    """)
    assert "your code" not in (stacks.blocked_in_native(tracker) or "")
    own = textwrap.dedent("""\
        Thread 12 (idle): "MainThread"
            clock_nanosleep (libc.so.6)
            <module> (<string>:1)
    """)
    assert stacks._native_blocked(own).user == "<module> (<string>:1)"
