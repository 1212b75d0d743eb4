"""Sorting a captured stack's lines for the report: the user's, library, native, gpudoctor's own."""

from __future__ import annotations

from pathlib import Path

from gpudoctor.probe import stack_frames, stacks
from gpudoctor.probe.stack_frames import BOOTSTRAP, HEADER, LIBRARY, NATIVE, THREAD, USER

# A launcher waiting for its child: gpudoctor's bootstrap wraps os.waitpid, so its frame
# is the innermost Python one; a native frame with debug information names a C file.
PY_SPY = """\
Process 20: python launcher.py
Python v3.11.7 (/usr/bin/python3.11)

Thread 20 (idle): "MainThread"
    __futex_abstimed_wait_common (libc.so.6)
    waitpid (gpudoctor/probe/bootstrap/sitecustomize.py:160)
    Popen._try_wait (subprocess.py:1959)
    Popen.wait (subprocess.py:1264)
    <module> (launcher.py:3)
Thread 21 (idle): "Thread-1"
    select_poll_poll_impl (selectmodule.c:655)
    Thread.run (threading.py:982)
"""

TF_WORKER = """\
Thread 11 (idle): "MainThread"
    pthread_cond_wait (libc.so.6)
    Eigen::ThreadPoolDevice::parallelFor (tensorflow/libtensorflow_cc.so.2)
    fill (tensorflow/python/ops/gen_array_ops.py:3620)
    work (/home/me/freeze.py:8)
"""

FAULTHANDLER = """\
Thread 0x00007f0000000001 (most recent call first):
  File "/usr/lib/python3.11/threading.py", line 320 in wait
Current thread 0x00007f0000000002 (most recent call first):
  File "/usr/lib/python3.11/threading.py", line 327 in wait
  File "/home/me/train.py", line 12 in main
  File "/home/me/train.py", line 20 in <module>
"""


def _kinds(found: list[stack_frames.Line]) -> list[tuple[str, str]]:
    return [(line.kind, line.text.strip()) for line in found]


def test_py_spy_frames_are_sorted_and_the_bootstrap_is_its_own() -> None:
    found = stack_frames.lines(PY_SPY, "py-spy", stacks.blocked_in_native(PY_SPY))
    assert _kinds(found) == [
        (HEADER, "Process 20: python launcher.py"), (HEADER, "Python v3.11.7 (/usr/bin/python3.11)"),
        (THREAD, 'Thread 20 (idle): "MainThread"'),
        (NATIVE, "__futex_abstimed_wait_common (libc.so.6)"),
        (BOOTSTRAP, "waitpid (gpudoctor/probe/bootstrap/sitecustomize.py:160)"),
        (LIBRARY, "Popen._try_wait (subprocess.py:1959)"), (LIBRARY, "Popen.wait (subprocess.py:1264)"),
        (USER, "<module> (launcher.py:3)"),
        (THREAD, 'Thread 21 (idle): "Thread-1"'),
        (NATIVE, "select_poll_poll_impl (selectmodule.c:655)"),  # a C file, not the user's Python
        (LIBRARY, "Thread.run (threading.py:982)"),
    ]
    # The frame the explanation names: the innermost Python frame that is not gpudoctor's.
    assert [line.text.strip() for line in found if line.blocked] == ["Popen._try_wait (subprocess.py:1959)"]


def test_the_native_frame_a_tensorflow_worker_waits_in_is_the_blocked_one() -> None:
    blocked_in = stacks.blocked_in_native(TF_WORKER)
    assert blocked_in is not None and blocked_in.startswith("Eigen::ThreadPoolDevice::parallelFor, Python fill")
    found = stack_frames.lines(TF_WORKER, "py-spy", blocked_in)
    assert [line.text.strip() for line in found if line.blocked] == \
        ["Eigen::ThreadPoolDevice::parallelFor (tensorflow/libtensorflow_cc.so.2)"]
    assert [line.text.strip() for line in found if line.kind == USER] == ["work (/home/me/freeze.py:8)"]


def test_faulthandler_frames_and_the_current_thread() -> None:
    blocked_in = stacks.blocked_in_python(FAULTHANDLER)
    found = stack_frames.lines(FAULTHANDLER, "faulthandler", blocked_in)
    assert [line.kind for line in found] == [THREAD, LIBRARY, THREAD, LIBRARY, USER, USER]
    marked = [i for i, line in enumerate(found) if line.blocked]
    assert marked == [3]  # in the current (signal-handling) thread, not the first one listed


def test_without_a_diagnosis_nothing_is_marked() -> None:
    assert not any(line.blocked for line in stack_frames.lines(TF_WORKER, "py-spy", None))


def test_a_scenario_scripts_frames_are_the_users() -> None:
    """The scenario scripts stand for the user's program, though they ship inside gpudoctor."""
    text = ('Thread 5 (idle): "MainThread"\n'
            "    work (gpudoctor/probe/scenarios/tensorflow_fork_after_init.py:44)\n"
            "    catalogue (gpudoctor/probe/scenarios/__init__.py:100)\n")
    assert [line.kind for line in stack_frames.lines(text, "py-spy", None)] == [THREAD, USER, LIBRARY]


# A server's main thread waiting in poll(): the C module's frame has a file and a line, as
# Python's do; ``python -c`` code is the file "<string>".
SERVER = """\
Thread 30 (idle): "MainThread"
    __GI___poll (libc.so.6)
    select_poll_poll_impl (selectmodule.c:655)
    serve (/home/me/server.py:12)
    <module> (<string>:1)
"""


def test_a_native_frame_with_a_c_file_and_line_is_native_for_the_diagnosis_and_the_report() -> None:
    # poll is a wait primitive, which says nothing of why it waits: the Python caller does.
    blocked_in = stacks.blocked_in_native(SERVER)
    assert blocked_in == "Python serve (/home/me/server.py:12)"
    found = stack_frames.lines(SERVER, "py-spy", blocked_in)
    assert _kinds(found)[1:] == [
        (NATIVE, "__GI___poll (libc.so.6)"), (NATIVE, "select_poll_poll_impl (selectmodule.c:655)"),
        (USER, "serve (/home/me/server.py:12)"), (USER, "<module> (<string>:1)"),
    ]
    assert [line.text.strip() for line in found if line.blocked] == ["serve (/home/me/server.py:12)"]


def test_the_diagnosis_and_the_report_agree_on_every_frame() -> None:
    for dump in (PY_SPY, TF_WORKER, SERVER):
        for line in stack_frames.lines(dump, "py-spy", None):
            frame = stacks.py_spy_frame(line.text.strip())
            if line.kind in (NATIVE, USER, LIBRARY, BOOTSTRAP) and frame is not None:
                assert frame.python == (line.kind != NATIVE), line


def _fake_py_spy(tmp_path: Path, native_fails_with: str) -> str:
    """A py-spy whose --native dump fails as real py-spy does on some libraries' frames,
    and whose plain dump works."""
    fake = tmp_path / "py-spy"
    fake.write_text("#!/bin/sh\n"
                    'case "$*" in\n'
                    f'  *--native*) printf "Error: Failed to get stack traces\\n\\nCaused by:\\n'
                    f'    {native_fails_with}\\n"; exit 1;;\n'
                    '  *) printf "Process 7: python work.py\\nPython v3.11.7\\n\\n'
                    'Thread 7 (idle): \\"MainThread\\"\\n    work (/home/me/work.py:8)\\n";;\n'
                    "esac\n")
    fake.chmod(0o755)
    return str(fake)


def test_a_native_stack_that_cannot_be_unwound_falls_back_to_the_python_stack(tmp_path: Path) -> None:
    """py-spy's UNW_EINVAL: the native unwinding failed, the Python stack can be read. The
    dump is taken again without --native and says so; no error (no ptrace advice) remains."""
    py_spy = _fake_py_spy(tmp_path, "UNW_EINVAL: unsupported operation or bad value")
    dumps, error = stacks.native_stacks({7}, py_spy, lambda pid: None)
    assert error is None
    assert dumps[7].startswith(f"{stacks.NO_NATIVE} (py-spy --native failed: Failed to get stack traces: UNW_EINVAL")
    stack = stacks.combine(None, dumps[7])
    assert stack is not None and stack.blocked_in == "Python work (/home/me/work.py:8)"


def test_a_refused_trace_is_not_retried_and_stays_an_error(tmp_path: Path) -> None:
    py_spy = _fake_py_spy(tmp_path, "Permission denied (os error 1)")
    dumps, error = stacks.native_stacks({7}, py_spy, lambda pid: None)
    assert dumps == {} and error is not None and "Permission denied" in error


def test_a_faulthandler_dump_taken_by_another_thread_still_reads_the_main_thread() -> None:
    # The kernel gave the dump signal to a Pool's handler thread spinning on a CPU, so
    # faulthandler's "Current thread" is that one; the main thread is the one threading
    # did not start.
    dump = (
        'Current thread 0x00007f10 (most recent call first):\n'
        '  File "/usr/lib/python3.11/multiprocessing/pool.py", line 522 in _handle_workers\n'
        '  File "/usr/lib/python3.11/threading.py", line 982 in run\n'
        '  File "/usr/lib/python3.11/threading.py", line 1045 in _bootstrap_inner\n'
        '  File "/usr/lib/python3.11/threading.py", line 1002 in _bootstrap\n'
        '\n'
        'Thread 0x00007f00 (most recent call first):\n'
        '  File "/usr/lib/python3.11/threading.py", line 1112 in join\n'
        '  File "/usr/lib/python3.11/multiprocessing/pool.py", line 665 in join\n'
        '  File "/tmp/vowels.py", line 21 in <module>\n'
    )
    from gpudoctor.probe import stacks

    assert stacks.python_frames(dump, "faulthandler")[-1] == ("<module>", "/tmp/vowels.py:21")
    assert "in your code <module> (/tmp/vowels.py:21)" in (stacks.blocked_in_python(dump) or "")
