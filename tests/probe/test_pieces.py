"""Small parts of the probe: sizes, bounded capture, stack parsing, events, cgroup limits."""

from __future__ import annotations

import io
import json
import os
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpudoctor.cli import main
from gpudoctor.probe import events, host, stacks
from gpudoctor.probe.capture import Capture
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


def test_cgroup_v1_limit_and_unlimited(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    memory.mkdir()
    (memory / "memory.limit_in_bytes").write_text("9223372036854771712\n")
    assert host.cgroup_memory_limit(tmp_path) is None
    (memory / "memory.limit_in_bytes").write_text(f"{4 << 30}\n")
    limit = host.cgroup_memory_limit(tmp_path)
    # Only when this process's cgroup file names the memory controller (v1) is it read.
    assert limit in (4 << 30, None)


@settings(max_examples=50, deadline=None)
@given(chunks=st.lists(st.binary(min_size=1, max_size=300), max_size=20), limit=st.integers(1, 500))
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
