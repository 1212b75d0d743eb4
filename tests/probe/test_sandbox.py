"""The sandbox: deadlines, hangs, memory budget, and no process of the tree left behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.probe.helpers import gpudoctor_json, running, script, wait_gone

PY = sys.executable

# Double-forks a setsid'd grandchild that would outlive everything, writes the PIDs
# of its processes to argv[1], then either exits (argv[2] == "exit") or sleeps.
ESCAPER = """\
import os, sys, time
out, mode = sys.argv[1], sys.argv[2]
pids = [os.getpid()]
child = os.fork()
if child == 0:
    os.setsid()
    grandchild = os.fork()
    if grandchild == 0:
        time.sleep(600)
        os._exit(0)
    with open(out + ".grandchild", "w") as f:
        f.write(str(grandchild))
    os._exit(0)
os.waitpid(child, 0)
while not os.path.exists(out + ".grandchild"):
    time.sleep(0.01)
pids.append(int(open(out + ".grandchild").read()))
with open(out, "w") as f:
    f.write(" ".join(map(str, pids)))
if mode == "exit":
    sys.exit(0)
time.sleep(600)
"""


def _pids(path: Path, timeout: float = 30.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return [int(p) for p in path.read_text().split()]


def test_timeout_stops_a_busy_command() -> None:
    started = time.monotonic()
    code, doc, _ = gpudoctor_json(["--timeout", "2", "--hang-after", "60", "--",
                                   PY, "-c", "while True: pass"])
    assert time.monotonic() - started < 30
    assert (code, doc["verdict"], doc["stop_reason"]) == (1, "killed", "timeout")
    (root,) = doc["processes"]
    assert root["verdict"] == "killed"
    assert "not hung" in doc["explanation"]
    assert running([root["pid"]]) == []


def test_waiting_tree_is_hung_long_before_the_timeout() -> None:
    started = time.monotonic()
    code, doc, _ = gpudoctor_json(["--timeout", "120", "--hang-after", "1.5", "--",
                                   PY, "-c", "import threading; threading.Event().wait()"])
    assert time.monotonic() - started < 60
    assert (code, doc["verdict"], doc["stop_reason"]) == (1, "hung", "hung")
    (root,) = doc["processes"]
    assert root["verdict"] == "hung" and root["stalled_for"] >= 1.5
    # The Python stack came from the bootstrap's faulthandler or from py-spy.
    assert root["stack"] and root["stack_source"] in ("faulthandler", "py-spy")
    assert "wait" in root["blocked_in"]
    assert running([root["pid"]]) == []


def test_stack_signal_is_not_sent_when_the_program_reused_the_descriptor(tmp_path: Path) -> None:
    own = tmp_path / "own-data.txt"
    source = script(tmp_path, "reuse.py", (
        "import os, sys, threading\n"
        "fd = next(int(n) for n in os.listdir('/proc/self/fd')\n"
        "          if '/stacks/' in os.path.realpath(f'/proc/self/fd/{n}'))\n"
        "os.close(fd)\n"
        "mine = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT)\n"
        "assert mine == fd, (mine, fd)\n"
        "threading.Event().wait()\n"))
    code, doc, stderr = gpudoctor_json(["--hang-after", "1", "--timeout", "60", "--no-native-stacks",
                                        "--", PY, str(source), str(own)])
    assert (code, doc["verdict"]) == (1, "hung"), stderr
    assert own.read_text() == ""  # faulthandler would have written the stack into it
    (root,) = doc["processes"]
    assert root["stack"] is None


def test_setsid_grandchild_is_killed_when_the_command_exits(tmp_path: Path) -> None:
    source = script(tmp_path, "escaper.py", ESCAPER)
    out = tmp_path / "pids"
    code, doc, _ = gpudoctor_json(["--grace", "0.5", "--", PY, str(source), str(out), "exit"])
    root, grandchild = _pids(out)
    assert code == 0, doc["explanation"]
    assert doc["verdict"] == "ok"
    assert f"still running after the command exited, killed: {grandchild}" in doc["explanation"]
    assert running([root, grandchild]) == []


def test_memory_limit_stops_the_tree() -> None:
    code, doc, _ = gpudoctor_json([
        "--memory-limit", "150MiB", "--timeout", "60", "--",
        PY, "-c", "import time; x = bytearray(400 << 20); time.sleep(600)"])
    assert (code, doc["verdict"], doc["stop_reason"]) == (1, "oom", "memory-limit")
    assert "--memory-limit 150.0 MiB" in doc["explanation"]
    assert running([p["pid"] for p in doc["processes"]]) == []


def _start_supervised(tmp_path: Path) -> tuple[subprocess.Popen[str], list[int]]:
    source = script(tmp_path, "escaper.py", ESCAPER)
    out = tmp_path / "pids"
    gpudoctor = subprocess.Popen(
        [PY, "-m", "gpudoctor", "probe", "--json", "--grace", "0.5", "--",
         PY, str(source), str(out), "sleep"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return gpudoctor, _pids(out)


def test_sigterm_to_gpudoctor_stops_the_whole_tree(tmp_path: Path) -> None:
    gpudoctor, pids = _start_supervised(tmp_path)
    gpudoctor.send_signal(signal.SIGTERM)
    stdout, _ = gpudoctor.communicate(timeout=60)
    assert gpudoctor.returncode == 128 + signal.SIGTERM
    assert json.loads(stdout)["stop_reason"] == "interrupted"
    assert running(pids) == []


def test_ctrl_c_to_gpudoctor_exits_130(tmp_path: Path) -> None:
    gpudoctor, pids = _start_supervised(tmp_path)
    gpudoctor.send_signal(signal.SIGINT)
    stdout, _ = gpudoctor.communicate(timeout=60)
    assert gpudoctor.returncode == 130
    assert "Interrupted by SIGINT" in json.loads(stdout)["explanation"]
    assert running(pids) == []


def test_sigkill_to_gpudoctor_leaves_nothing_running(tmp_path: Path) -> None:
    gpudoctor, pids = _start_supervised(tmp_path)
    gpudoctor.kill()  # no cleanup possible in gpudoctor itself: the watchdog must do it
    gpudoctor.communicate(timeout=60)
    assert wait_gone(pids, timeout=20) == []
    for pid in pids:  # if this process is a subreaper, the orphans became its zombies
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
