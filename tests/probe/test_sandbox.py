"""The sandbox: deadlines, hangs, memory budget, and no process of the tree left behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.probe.helpers import WRITE_PIDS, gpudoctor_json, read_pids, running, script, wait_gone

PY = sys.executable

# Double-forks a setsid'd grandchild that would outlive everything, writes the PIDs
# of its processes to argv[1] (whole: a temporary file, then a rename), then either
# exits (argv[2] == "exit") or sleeps.
ESCAPER = WRITE_PIDS + """\
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
    write_pids(out + ".grandchild", [grandchild])
    os._exit(0)
os.waitpid(child, 0)
while not os.path.exists(out + ".grandchild"):
    time.sleep(0.01)
pids += [int(p) for p in open(out + ".grandchild").read().split()]
write_pids(out, pids)
if mode == "exit":
    sys.exit(0)
time.sleep(600)
"""


def test_timeout_stops_a_busy_command() -> None:
    # The command never ends by itself: had the deadline not stopped it, gpudoctor_json's
    # own timeout would end the test. How long gpudoctor then took (stack dumps, the grace)
    # is this machine's speed, not the deadline's.
    code, doc, _ = gpudoctor_json(["--timeout", "2", "--hang-after", "60", "--",
                                   PY, "-c", "while True: pass"])
    assert (code, doc["verdict"], doc["stop_reason"]) == (1, "killed", "timeout")
    assert doc["duration"] >= 2  # not before the deadline
    (root,) = doc["processes"]
    assert root["verdict"] == "killed"
    assert "so gpudoctor cannot call it a hang" in doc["explanation"]
    assert running([root["pid"]]) == []


def test_waiting_tree_is_hung_long_before_the_timeout() -> None:
    code, doc, _ = gpudoctor_json(["--timeout", "120", "--hang-after", "1.5", "--",
                                   PY, "-c", "import threading; threading.Event().wait()"])
    # "hung", not "timeout": the hang stopped it, before the 120 s deadline.
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
    root, grandchild = read_pids(out, 2)
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
    assert doc["memory_limit"] == 150 << 20  # the report draws it
    assert doc["memory_measure"] == "pss"  # smaps of our own children is readable
    assert running([p["pid"] for p in doc["processes"]]) == []


def _start_supervised(tmp_path: Path, **popen: object) -> tuple[subprocess.Popen[str], list[int]]:
    source = script(tmp_path, "escaper.py", ESCAPER)
    out = tmp_path / "pids"
    gpudoctor = subprocess.Popen(
        [PY, "-m", "gpudoctor", "probe", "--json", "--grace", "0.5", "--",
         PY, str(source), str(out), "sleep"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen)  # type: ignore[call-overload]
    return gpudoctor, read_pids(out, 2)


def _watchdog_of(gpudoctor: subprocess.Popen[str]) -> int:
    (watchdog,) = [c.pid for c in psutil.Process(gpudoctor.pid).children()
                   if any(a.endswith("watchdog.py") for a in c.cmdline())]
    return watchdog


@pytest.mark.parametrize("signum", [signal.SIGQUIT, signal.SIGKILL], ids=["SIGQUIT", "SIGKILL"])
def test_signal_to_gpudoctors_process_group_leaves_nothing_running(tmp_path: Path, signum: int) -> None:
    # Ctrl-\ on a terminal, or what CI runners and `timeout -s KILL` send: the whole
    # group of gpudoctor dies at once, cleanup or not. The watchdog, in its own
    # session, is not in that group and kills the tree.
    gpudoctor, pids = _start_supervised(tmp_path, start_new_session=True, cwd=tmp_path)
    watchdog = _watchdog_of(gpudoctor)
    os.killpg(gpudoctor.pid, signum)
    gpudoctor.communicate(timeout=60)
    assert gpudoctor.returncode == -signum
    assert wait_gone([*pids, watchdog]) == []


def test_sigterm_to_gpudoctors_process_group_stops_the_tree_in_order(tmp_path: Path) -> None:
    gpudoctor, pids = _start_supervised(tmp_path, start_new_session=True)
    watchdog = _watchdog_of(gpudoctor)
    os.killpg(gpudoctor.pid, signal.SIGTERM)
    stdout, stderr = gpudoctor.communicate(timeout=60)
    assert gpudoctor.returncode == 128 + signal.SIGTERM, stderr
    doc = json.loads(stdout)
    assert doc["stop_reason"] == "interrupted"
    # gpudoctor stopped the tree itself: stacks first, then SIGTERM within the grace
    # period; the watchdog did not SIGKILL it from under gpudoctor.
    root = next(p for p in doc["processes"] if p["start"] == "root")
    assert root["stack"], doc["explanation"]
    ended = {p["pid"]: p for p in doc["processes"]}
    assert [ended[pid]["exit_code"] for pid in pids] == [-signal.SIGTERM] * 2
    assert [ended[pid]["verdict"] for pid in pids] == ["killed"] * 2
    assert "OOM" not in doc["explanation"]
    assert wait_gone([*pids, watchdog]) == []


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
    assert wait_gone(pids) == []
    for pid in pids:  # if this process is a subreaper, the orphans became its zombies
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass


POOL_DONE = """
import multiprocessing as mp

def square(x):
    return x * x

if __name__ == "__main__":
    with mp.get_context("spawn").Pool(2) as pool:  # leaving the block terminates the workers
        print(pool.map(square, range(4)))
"""


def test_pool_workers_stopped_by_their_pool_are_not_called_killed(tmp_path: Path) -> None:
    script = tmp_path / "pool_done.py"
    script.write_text(POOL_DONE)
    code, doc, _ = gpudoctor_json(["--timeout", "60", "--", PY, str(script)])
    assert (code, doc["verdict"]) == (0, "ok"), doc["explanation"]
    workers = [p for p in doc["processes"] if p["start"] != "root" and p["exit_code"] == -15]
    assert workers, doc["processes"]  # the pool did stop them with SIGTERM
    for worker in workers:
        assert worker["verdict"] == "ok"
        assert "stopped with SIGTERM by its parent" in worker["explanation"]


# Notes each SIGTERM in a file (argv[1] + ".term") and goes on sleeping: gpudoctor's
# first stop waits out its whole grace period on it.
OUTLASTS_TERM = WRITE_PIDS + """\
import os, signal, sys, time
out = sys.argv[1]
signal.signal(signal.SIGTERM, lambda *_: open(out + ".term", "a").close())
write_pids(out, [os.getpid()])
while True:
    time.sleep(1)
"""


def test_a_second_ctrl_c_stops_everything_at_once(tmp_path: Path) -> None:
    source = script(tmp_path, "outlasts.py", OUTLASTS_TERM)
    out = tmp_path / "pids"
    # A grace period no run reaches: gpudoctor only returns in time if the second
    # Ctrl-C cut it short.
    gpudoctor = subprocess.Popen(
        [PY, "-m", "gpudoctor", "probe", "--json", "--grace", "900", "--", PY, str(source), str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        (pid,) = read_pids(out, 1)
        watchdog = _watchdog_of(gpudoctor)
        gpudoctor.send_signal(signal.SIGINT)
        term = tmp_path / "pids.term"
        while not term.exists():  # the first Ctrl-C: stacks dumped, SIGTERM sent, grace period begun
            assert gpudoctor.poll() is None, gpudoctor.communicate()
            time.sleep(0.01)
        gpudoctor.send_signal(signal.SIGINT)
        stdout, stderr = gpudoctor.communicate(timeout=120)
    finally:
        if gpudoctor.poll() is None:
            gpudoctor.kill()
            gpudoctor.wait()
    assert gpudoctor.returncode == 130, stderr[-2000:]
    doc = json.loads(stdout)
    assert doc["stop_reason"] == "interrupted"
    assert "a second signal stopped the tree at once" in " ".join(doc["notes"])
    root = next(p for p in doc["processes"] if p["start"] == "root")
    assert (root["pid"], root["exit_code"]) == (pid, -signal.SIGKILL)
    assert wait_gone([pid, watchdog]) == []


# Runs a command under a Supervisor whose timeout (0.5 s) comes long before the command
# ends by itself: it computes until it has used 1.5 s of CPU, however slow the machine.
BUSY_PAST_THE_TIMEOUT = """\
import json, sys
from gpudoctor.probe.supervise import Limits, Supervisor
cap = None if sys.argv[1] == "firm" else 600.0
limits = Limits(timeout=0.5, busy_timeout=cap, hang_after=30, grace=1, native_stacks=False)
burn = "import time\\nwhile time.process_time() < 1.5: pass"
run = Supervisor([sys.executable, "-c", burn], limits, None, None).run()
print(json.dumps({"stop": str(run.stop_reason), "code": run.exit_code, "notes": run.notes}))
"""


@pytest.mark.parametrize("timeout", ["stretched", "firm"])
def test_a_timeout_stretches_only_while_the_tree_makes_progress_and_only_when_asked(
        tmp_path: Path, timeout: str) -> None:
    program = script(tmp_path, "stretch.py", BUSY_PAST_THE_TIMEOUT)
    done = subprocess.run([PY, str(program), timeout], capture_output=True, text=True, timeout=300)
    report = json.loads(done.stdout)
    if timeout == "firm":  # a user's --timeout is what they asked for
        assert report["stop"] == "timeout"
        return
    assert (report["stop"], report["code"]) == ("exited", 0)
    assert any("the timeout of 0.5 s passed while the tree was still making CPU progress" in note
               for note in report["notes"])
