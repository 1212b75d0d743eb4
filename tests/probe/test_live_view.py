"""The probe's live view and progress lines: rendering as data, plain lines through a
pipe, ``--quiet``, scenario progress, and the live region in a real terminal (tmux)."""

from __future__ import annotations

import io
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpudoctor.probe import live_render, live_view
from gpudoctor.probe.live_snapshot import ProcessLine, Snapshot, role
from tests.probe.helpers import gpudoctor

PY = sys.executable
ROOT = Path(__file__).resolve().parents[2]

# Idle until the file named by its argument appears (the test's way to release it).
WAITER = "import os, sys, time\nwhile not os.path.exists(sys.argv[1]):\n    time.sleep(0.05)\n"


def _process(pid: int, **changes: object) -> ProcessLine:
    fields: dict[str, object] = dict(pid=pid, role="launcher", runtimes=(), threads=1, cpu_percent=0.0,
                                     idle_s=0.0, stopped=False, rss=20 << 20, gpu=None)
    fields.update(changes)
    return ProcessLine(**fields)  # type: ignore[arg-type]


def _snapshot(*processes: ProcessLine, **changes: object) -> Snapshot:
    fields: dict[str, object] = dict(title="python train.py", elapsed=12.0, processes=processes,
                                     quiet_s=0.0, hang_after=30.0)
    fields.update(changes)
    return Snapshot(**fields)  # type: ignore[arg-type]


def test_view_lines_show_each_process_and_the_forming_verdict() -> None:
    snapshot = _snapshot(
        _process(4122, runtimes=("tensorflow",), threads=9, idle_s=6.2, rss=300 << 20, gpu=2 << 30),
        _process(4130, role="fork child", runtimes=("tensorflow",), idle_s=6.0),
        _process(4131, role="fork child", cpu_percent=97.0),
        quiet_s=0.3)
    lines = live_render.view_lines(snapshot, width=120)
    assert lines[0].startswith("gpudoctor probe: python train.py — 12 s")
    assert lines[1].split() == ["pid", "role", "GPU", "runtimes", "thr", "cpu", "idle", "rss", "gpu"]
    assert lines[2].split() == ["4122", "launcher", "tensorflow", "9", "0%", "idle", "6", "s", "300.0", "MiB",
                                "2.0", "GiB"]
    assert lines[3].split()[:2] == ["4130", "fork"] and "idle 6 s" in lines[3]
    assert lines[4].split()[-2:] == ["MiB", live_render.DASH]  # no NVML: a dash
    assert "97%" in lines[4] and "running" in lines[4]
    assert lines[5] == ("no progress for 6.2 s in 2 of 3 processes; hang verdict once all have waited 30 s")
    # Columns line up: every row's "idle" cell starts where the header's does.
    column = lines[1].index("idle")
    assert all(line[column:].startswith(("idle", "running")) for line in lines[2:5])


def test_view_lines_fit_the_terminal_and_sum_up_what_does_not() -> None:
    many = [_process(100 + i, role="spawn child", idle_s=40.0) for i in range(30)]
    snapshot = _snapshot(*many, quiet_s=40.0, timeout=600.0)
    lines = live_render.view_lines(snapshot, width=60, height=10)
    assert len(lines) == 9  # the terminal's last line stays for the cursor
    assert all(len(line) <= 60 for line in lines)
    assert lines[-2] == "  … and 25 more processes"
    assert lines[-1].startswith("no progress for 40 s in 30 of 30 processes; hang verdict at")
    assert lines[-1].endswith("…")  # cut, never wrapped


def test_verdict_line_when_stopping_and_when_attached() -> None:
    assert live_render.verdict_line(_snapshot(_process(1), stopping="interrupted: dumping stacks")) == \
        "stopping: interrupted: dumping stacks"
    attached = _snapshot(_process(1, idle_s=1.5), elapsed=1.5, hang_after=2.0, attached=True)
    assert live_render.verdict_line(attached) == \
        "no progress for 1.5 s in 1 of 1 process; verdict at the end of the 2 s watch (0.5 s left)"
    assert live_render.verdict_line(_snapshot(_process(1, cpu_percent=50.0), timeout=60.0)) == \
        "the process is progressing; hang verdict after 30 s without progress in all; --timeout stops it at 60 s"


def test_progress_lines_say_only_what_changed() -> None:
    first = _snapshot(_process(1), elapsed=0.1)
    assert live_render.progress_lines(None, first) == ["gpudoctor: 0.1 s pid 1 started (launcher)"]
    assert live_render.progress_lines(first, first) == []
    worker = _process(2, role="fork child", runtimes=("tensorflow",))
    second = _snapshot(_process(1), worker, elapsed=0.5)
    assert live_render.progress_lines(first, second) == [
        "gpudoctor: 0.5 s pid 2 started (fork child, tensorflow loaded)"]
    # Idle crossing a third of --hang-after (30 s): one line, then nothing until two thirds.
    waiting = [_snapshot(_process(1, idle_s=t), _process(2, role="fork child", idle_s=t), elapsed=t, quiet_s=t)
               for t in (9, 11, 15, 21)]
    said = [live_render.progress_lines(a, b) for a, b in zip([second, *waiting], waiting, strict=False)]
    assert said[0] == [] and said[2] == []
    assert said[1] == ["gpudoctor: 11 s no progress for 11 s in 2 of 2 processes; hang verdict at 30 s"]
    assert said[3] == ["gpudoctor: 21 s no progress for 21 s in 2 of 2 processes; hang verdict at 30 s"]
    moving = _snapshot(_process(1, cpu_percent=80.0), elapsed=22.0)
    assert live_render.progress_lines(waiting[-1], moving) == [
        "gpudoctor: 22 s pid 2 ended (fork child)", "gpudoctor: 22 s progress again"]
    stopping = _snapshot(_process(1), elapsed=30.0, stopping="hung")
    assert live_render.progress_lines(moving, stopping) == ["gpudoctor: 30 s stopping: hung"]


def test_roles_come_from_what_the_probe_knows() -> None:
    from gpudoctor.probe.events import Origin

    assert role(10, 10, ("python", "train.py"), None) == "launcher"
    assert role(11, 10, ("python", "train.py"), Origin("fork", 10, 0.1)) == "fork child"
    assert role(12, 10, ("python", "-c", "from multiprocessing.spawn import spawn_main; spawn_main()"),
                Origin("spawn", 10, 0.1)) == "spawn child"
    assert role(13, 10, ("python", "-c", "from multiprocessing.resource_tracker import main;main(5)"),
                Origin("spawn", 10, 0.1)) == "resource tracker"
    assert role(14, 10, ("/usr/bin/nvidia-smi",), Origin("exec", 10, 0.1)) == "exec nvidia-smi"


def test_plain_view_writes_lines_and_the_terminal_view_erases_itself() -> None:
    stream = io.StringIO()
    view = live_view.PlainView(stream)
    view.show(_snapshot(_process(1), elapsed=0.0))
    view.line("a line of its own")
    assert stream.getvalue().splitlines() == [
        "gpudoctor: supervising python train.py (hang verdict after 30 s without progress)",
        "gpudoctor: 0.0 s pid 1 started (launcher)", "a line of its own"]
    with live_view.opened(quiet=True) as quiet:
        assert quiet is None


SUPERVISED = """
import os, sys, time
print("to stdout")
print("to stderr", file=sys.stderr)
pid = os.fork()
if pid == 0:
    while not os.path.exists(sys.argv[1]):
        time.sleep(0.05)
    os._exit(0)
os.waitpid(pid, 0)
"""


def _supervise(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    source = tmp_path / "forker.py"
    source.write_text(SUPERVISED)
    release = tmp_path / "release"
    probe = subprocess.Popen([PY, "-m", "gpudoctor", "probe", "--json", *extra, "--", PY, source.name, release.name],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        assert probe.stderr is not None
        # Plain lines arrive as they happen: the fork child's line, then release it.
        seen = []
        if "--quiet" not in extra:
            for line in probe.stderr:
                seen.append(line)
                if "(fork child)" in line:
                    break
        release.touch()
        out, err = probe.communicate(timeout=120)
    finally:
        release.touch()
        if probe.poll() is None:
            probe.kill()
            probe.wait(60)
    return subprocess.CompletedProcess(probe.args, probe.returncode, out, "".join(seen) + err)


def test_plain_progress_lines_on_stderr_and_none_with_quiet(tmp_path: Path) -> None:
    done = _supervise(tmp_path)
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)  # stdout is the JSON document alone
    root = next(p["pid"] for p in document["processes"] if p["start"] == "root")
    child = next(p["pid"] for p in document["processes"] if p["start"] == "fork")
    ours = [line for line in done.stderr.splitlines() if line.startswith("gpudoctor:")]
    assert ours[0].startswith("gpudoctor: supervising python forker.py release (hang verdict after 30 s")
    assert any(line.endswith(f"pid {root} started (launcher)") for line in ours), ours
    assert any(line.endswith(f"pid {child} started (fork child)") for line in ours), ours
    assert ours[-1].startswith("gpudoctor: verdict ok after ")
    assert "to stderr" in done.stderr and "to stdout" in done.stderr  # --json: the command's output on stderr
    assert "\x1b[" not in done.stderr  # not a terminal: no control sequences

    quiet = _supervise(tmp_path, "--quiet")
    assert quiet.returncode == 0, quiet.stderr
    # The command's own output alone (its two pipes are copied by two threads: in any order).
    assert sorted(quiet.stderr.replace("to stderr", "").replace("to stdout", "").split()) == []
    assert "to stderr" in quiet.stderr and "to stdout" in quiet.stderr
    assert set(json.loads(quiet.stdout)) == set(document)


def test_scenario_progress_comes_before_and_after_each_variant_on_stderr() -> None:
    done = gpudoctor(["probe", "--scenario", "process-in-daemonic-worker"], timeout=120)
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("[")]
    assert [line.split(":")[0] for line in lines] == [
        "[1/2] process-in-daemonic-worker unsafe", "[1/2] process-in-daemonic-worker unsafe",
        "[2/2] process-in-daemonic-worker safe", "[2/2] process-in-daemonic-worker safe"]
    assert lines[0].endswith("(timeout 30 s)") and "Process" in lines[0]
    assert lines[1].startswith("[1/2] process-in-daemonic-worker unsafe: crashed (")
    assert lines[1].endswith("s, as expected)")
    assert lines[3].startswith("[2/2] process-in-daemonic-worker safe: ok (")
    assert "[1/2]" not in done.stdout  # stdout: the reports alone
    quiet = gpudoctor(["probe", "--quiet", "--scenario", "process-in-daemonic-worker"], timeout=120)
    assert quiet.returncode == 0 and quiet.stderr == "", quiet.stderr


def _pane(session: str) -> str:
    return subprocess.run(["tmux", "capture-pane", "-p", "-t", session], capture_output=True, text=True,
                          check=False).stdout


def _wait_for_pane(session: str, predicate: object, timeout: float = 90.0) -> str:
    deadline = time.monotonic() + timeout
    text = ""
    while time.monotonic() < deadline:
        text = _pane(session)
        if predicate(text):  # type: ignore[operator]
            return text
        time.sleep(0.1)
    pytest.fail(f"the pane never showed what was expected within {timeout:g} s:\n{text}")


@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux (apt-get install tmux)")
def test_live_view_in_a_real_terminal(tmp_path: Path) -> None:
    release = tmp_path / "release"
    report = tmp_path / "report.txt"
    waiter = tmp_path / "waiter.py"
    waiter.write_text(WAITER)
    session = f"gpudoctor-live-{os.getpid()}"
    command = " ".join(shlex.quote(a) for a in [PY, "-m", "gpudoctor", "probe", "--", PY, waiter.name, release.name])
    # COLUMNS/LINES, when the test runner's environment has them, would override the pane's size.
    env = f"-u COLUMNS -u LINES PYTHONPATH={shlex.quote(str(ROOT))} TERM=xterm-256color"
    # stdout to a file: the report must be there whole, with nothing of the view in it.
    shell = f"cd {shlex.quote(str(tmp_path))} && env {env} {command} > {shlex.quote(str(report))}; " \
            f"echo gpudoctor-exit=$?; sleep 600"
    subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "140", "-y", "30", shell], check=True)
    try:
        # A detached session's pane may start at tmux's default size and be resized to 140
        # columns a moment later: the view follows at its next redraw. Wait for that one.
        pane = _wait_for_pane(session, lambda text: "launcher" in text and "idle" in text
                              and any(line.rstrip().endswith("rss        gpu") for line in text.splitlines()))
        lines = pane.splitlines()
        title = next(i for i, line in enumerate(lines) if line.startswith("gpudoctor probe: python waiter.py"))
        assert lines[title + 1].split() == ["pid", "role", "GPU", "runtimes", "thr", "cpu", "idle", "rss", "gpu"]
        row = lines[title + 2].split()
        assert row[0].isdigit() and row[1] == "launcher" and row[2] == live_render.DASH and row[3].isdigit()
        assert row[-1] == live_render.DASH or row[-1] in ("MiB", "GiB", "KiB")
        assert lines[title + 3].startswith(("no progress for", "the process is progressing",
                                            "all 3 processes are progressing"))
        release.touch()
        pane = _wait_for_pane(session, lambda text: "gpudoctor-exit=" in text)
        assert "gpudoctor-exit=0" in pane
        assert "gpudoctor probe: python waiter.py" not in pane  # the region was erased
        text = report.read_text()
        assert "verdict: ok" in text and "\x1b[" not in text
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True, check=False)
        release.touch()
