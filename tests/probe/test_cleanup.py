"""The supervisor cleans up whatever happens: its watchdog, its own failures, its process flags.

The supervisor runs in a child process here (a harness script), never in pytest's
own process: it makes its process a child subreaper while it runs.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from gpudoctor.probe import launch
from tests.probe.helpers import WRITE_PIDS, read_pids, running, script, wait_gone

PY = sys.executable

# argv: mode, Limits as JSON, then the command. Prints one JSON line: what happened.
HARNESS = """\
import ctypes, json, os, subprocess, sys
from gpudoctor.probe import diagnose, reaper, supervise
from gpudoctor.probe.supervise import Limits, Supervisor

mode, limits, command = sys.argv[1], Limits(**json.loads(sys.argv[2])), sys.argv[3:]
report = {"killpg": [], "root": None}

real_killpg = os.killpg
def killpg(group, signum):
    report["killpg"].append(group)
    real_killpg(group, signum)
os.killpg = killpg

class Popen(subprocess.Popen):
    def __init__(self, args, *rest, **options):
        super().__init__(args, *rest, **options)
        if list(args) == command:
            report["root"] = self.pid
supervise.subprocess.Popen = Popen

def fail(*args, **kwargs):
    raise RuntimeError(mode)
if mode == "capture fails":  # right after the command started
    supervise.Capture = fail
elif mode == "kill fails":
    reaper.kill_tree = fail

try:
    run = Supervisor(command, limits, None, None).run()
    report.update(stop_reason=run.stop_reason, verdict=diagnose.diagnose(run).verdict)
except RuntimeError as error:
    report["error"] = str(error)
flag = ctypes.c_int(-1)
ctypes.CDLL(None).prctl(37, ctypes.byref(flag), 0, 0, 0)  # PR_GET_CHILD_SUBREAPER
report["subreaper"] = bool(flag.value)
print(json.dumps(report))
"""

# Writes its PID to argv[1], then sleeps.
SLEEPER = WRITE_PIDS + """\
import os, sys, time
write_pids(sys.argv[1], [os.getpid()])
time.sleep(600)
"""


def _harness(tmp_path: Path, mode: str, limits: dict[str, Any], command: list[str]) -> dict[str, Any]:
    harness = script(tmp_path, "harness.py", HARNESS)
    done = subprocess.run([PY, str(harness), mode, json.dumps(limits), *command],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


@pytest.mark.parametrize("mode", ["capture fails", "kill fails"])
def test_a_failing_supervisor_still_leaves_nothing_running(tmp_path: Path, mode: str) -> None:
    # "capture fails": between Popen and the watch, outside the old try/finally that killed
    # the tree. "kill fails": the supervisor cannot stop the tree, so it must not tell the
    # watchdog "done": the watchdog kills the tree instead.
    sleeper = script(tmp_path, "sleeper.py", SLEEPER)
    out = tmp_path / "pid"
    report = _harness(tmp_path, mode, {"grace": 0.5, "timeout": 2.0}, [PY, str(sleeper), str(out)])
    assert report["error"] == mode
    assert report["root"] is not None
    assert wait_gone([report["root"]], timeout=30) == []
    if out.exists():
        assert wait_gone(read_pids(out, 1), timeout=30) == []


def test_supervisor_resets_its_subreaper_flag_and_never_signals_a_reaped_root(tmp_path: Path) -> None:
    report = _harness(tmp_path, "run", {"grace": 0.5}, [PY, "-c", "pass"])
    assert (report["stop_reason"], report["verdict"]) == ("exited", "ok")
    assert report["subreaper"] is False
    # The root exited and was reaped: its PID may belong to another process by now.
    assert report["root"] is not None and report["root"] not in report["killpg"]


def test_zero_output_limit_keeps_the_pipe_drained(tmp_path: Path) -> None:
    # With nothing to keep, the capture must still read everything, or the writer blocks.
    writer = [PY, "-c", "import sys; sys.stdout.write('x' * 300_000); sys.stdout.flush()"]
    report = _harness(tmp_path, "run", {"output_limit": 0, "hang_after": 5.0, "timeout": 60.0}, writer)
    assert (report["stop_reason"], report["verdict"]) == ("exited", "ok")


def _handles(pid: int, signum: int, field: str) -> bool:
    """Tell whether ``pid`` catches (SigCgt) or ignores (SigIgn) ``signum`` yet."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return bool(int(line.split()[1], 16) >> (signum - 1) & 1)
    return False


def _marked_sleeper(token: str) -> subprocess.Popen[bytes]:
    env = dict(os.environ, GPUDOCTOR_RUN=token)
    return subprocess.Popen([PY, "-c", "import time; time.sleep(600)"], env=env)


def _ready(watchdog: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while not (_handles(watchdog.pid, signal.SIGTERM, "SigCgt")
               and _handles(watchdog.pid, signal.SIGTSTP, "SigIgn")):
        assert time.monotonic() < deadline, "the watchdog never installed its handlers"
        time.sleep(0.02)


def test_watchdog_gives_the_supervisor_its_grace_after_sigterm(tmp_path: Path) -> None:
    token = "test-" + tmp_path.name
    sleeper = _marked_sleeper(token)
    watchdog = launch.start_watchdog(token, grace=5.0)
    try:
        _ready(watchdog)
        os.kill(watchdog.pid, signal.SIGTERM)  # e.g. a shutdown terminating every process
        launch.stop_watchdog(watchdog)  # the supervisor cleaned up in time and says "done"
        assert watchdog.returncode == 0
        assert running([sleeper.pid]) == [sleeper.pid]  # not swept from under the supervisor
    finally:
        sleeper.kill()
        sleeper.wait()


def test_watchdog_ignores_terminal_signals_and_sweeps_when_the_supervisor_dies(tmp_path: Path) -> None:
    token = "test-" + tmp_path.name
    sleeper = _marked_sleeper(token)
    watchdog = launch.start_watchdog(token, grace=0.5)
    _ready(watchdog)
    for signum in (signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGTSTP):
        os.kill(watchdog.pid, signum)
    launch.stop_watchdog(watchdog, done=False)  # end of file without "done"
    assert watchdog.returncode == 0
    sleeper.wait(timeout=30)
    assert sleeper.returncode == -signal.SIGKILL
