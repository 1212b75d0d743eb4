"""The probe under faults: nothing escapes, nothing is lost, gpudoctor never hangs.

Each test runs gpudoctor on a real process tree and checks three things: gpudoctor
ends within its deadline plus grace, the verdict, and that no process of the tree
still exists afterwards (by PID).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.probe.helpers import gpudoctor, gpudoctor_json, read_pids, running, script, wait_gone

PY = sys.executable

# A capped fork bomb: every process appends its PID to argv[1], then forks WIDTH
# children in a loop (each of which does the same) down to DEPTH levels, and sleeps.
# 1 + 3 + 9 + 27 + 81 = 121 processes at most, so a bug cannot hurt the machine.
FORK_BOMB = """\
import os, sys, time
out, depth = sys.argv[1], 0
WIDTH, DEPTH = 3, 4
def note():
    fd = os.open(out, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    os.write(fd, f"{os.getpid()}\\n".encode())
    os.close(fd)
note()
forked = 0
while depth < DEPTH and forked < WIDTH:
    forked += 1
    if os.fork() == 0:
        depth, forked = depth + 1, 0
        note()
    time.sleep(0.02)
time.sleep(60)
"""


def test_fork_bomb_is_stopped_whole(tmp_path: Path) -> None:
    pids_file = tmp_path / "pids"
    bomb = script(tmp_path, "bomb.py", FORK_BOMB)
    started = time.monotonic()
    code, doc, _ = gpudoctor_json(["--max-processes", "20", "--timeout", "30", "--grace", "1",
                                   "--", PY, str(bomb), str(pids_file)], timeout=60)
    assert time.monotonic() - started < 30 + 1
    assert (code, doc["verdict"], doc["stop_reason"]) == (1, "killed", "process-limit")
    note = next(n for n in doc["notes"] if n.startswith("fork bomb stopped: "))
    assert int(note.split()[3]) > 20
    assert "Fork bomb" in doc["explanation"]
    pids = [int(p) for p in pids_file.read_text().split()]
    assert len(pids) > 20
    assert wait_gone(pids) == []


def _peak_rss(pid: int) -> int:
    """Return the process's peak resident size so far (VmHWM), 0 once it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def test_a_gigabyte_of_output_keeps_gpudoctor_small(tmp_path: Path) -> None:
    # 1 GiB through the pipe; with --json the command's output is echoed to gpudoctor's
    # stderr, which goes to /dev/null: nothing is stored on disk.
    writer = "import os\nb = b'x' * (1 << 20)\nfor _ in range(1024):\n    os.write(1, b)\n"
    result = tmp_path / "result.json"
    started = time.monotonic()
    with result.open("w") as out:
        process = subprocess.Popen([PY, "-m", "gpudoctor", "probe", "--json", "--timeout", "60",
                                    "--", PY, "-c", writer], stdout=out, stderr=subprocess.DEVNULL)
        peak = 0
        while process.poll() is None and time.monotonic() - started < 90:
            peak = max(peak, _peak_rss(process.pid))
            time.sleep(0.05)
        process.kill()  # no-op unless it overran
        process.wait()
    assert time.monotonic() - started < 60 + 3 + 5
    doc = json.loads(result.read_text())
    assert (process.returncode, doc["verdict"], doc["exit_code"]) == (0, "ok", 0)
    assert 0 < peak < 300 * 1024 * 1024, peak
    kept = 2 * 64 * 1024
    assert f"stdout: {(1 << 30) - kept} bytes of output not kept" in " ".join(doc["notes"])
    assert running([p["pid"] for p in doc["processes"]]) == []


# Runs ``gpudoctor ARGS`` (after argv[1]) with a sampler that raises on its fourth device
# sample, and creates the file argv[1] as it does: the fault a crashing NVML binding or
# psutil bug would cause, injected in gpudoctor's own process (the sampler is a thread of
# the supervisor, not a process to kill).
FAILING_SAMPLER = """\
import sys
from pathlib import Path
from gpudoctor.probe import sampler
from gpudoctor.cli import main

calls = []
real = sampler.Sampler._sample_devices
def failing(self):
    calls.append(1)
    if len(calls) > 3:
        Path(sys.argv[1]).touch()
        raise RuntimeError("sampler fault injected by the test")
    real(self)
sampler.Sampler._sample_devices = failing
sys.exit(main(sys.argv[2:]))
"""

# Runs until the file argv[1] exists: a command that outlives the fault, however late it comes.
UNTIL_FILE = "import os, sys, time\nwhile not os.path.exists(sys.argv[1]):\n    time.sleep(0.01)\n"


def test_a_crashing_sampler_leaves_a_verdict_and_partial_samples(tmp_path: Path) -> None:
    harness = script(tmp_path, "harness.py", FAILING_SAMPLER)
    failed = tmp_path / "sampler-failed"
    started = time.monotonic()
    done = subprocess.run([PY, str(harness), str(failed), "probe", "--json", "--timeout", "20", "--",
                           PY, "-c", UNTIL_FILE, str(failed)],
                          capture_output=True, text=True, timeout=60)
    assert time.monotonic() - started < 20 + 3 + 5
    doc = json.loads(done.stdout)
    assert (done.returncode, doc["verdict"], doc["stop_reason"]) == (0, "ok", "exited")
    assert doc["samples_partial"] is True
    (note,) = [n for n in doc["notes"] if "sampler" in n]
    assert "sampler fault injected by the test" in note and "samples are partial" in note
    assert "Traceback" not in done.stderr
    assert running([p["pid"] for p in doc["processes"]]) == []


@pytest.mark.parametrize("command", [["true"], [PY, "-c", "pass"]], ids=["true", "python-pass"])
def test_a_command_that_exits_at_once_is_ok(command: list[str]) -> None:
    started = time.monotonic()
    code, doc, err = gpudoctor_json(["--", *command])
    assert time.monotonic() - started < 15
    assert (code, doc["verdict"], doc["exit_code"], doc["stop_reason"]) == (0, "ok", 0, "exited")
    assert doc["notes"] == [] and doc["samples_partial"] is False
    assert doc["tracking"] == "subreaper"
    assert "Traceback" not in err and "error" not in err.lower()
    assert running([p["pid"] for p in doc["processes"]]) == []


def test_terminal_output_names_the_tracking() -> None:
    done = gpudoctor(["probe", "--", "true"])
    assert done.returncode == 0
    assert "tracking: every descendant, even one that leaves the session, is reparented" in done.stdout


def test_a_hanging_py_spy_is_cut_short(tmp_path: Path) -> None:
    # A fake py-spy that hangs, in a shell that does not exec: its child holds the
    # pipe, so killing the shell alone would still leave gpudoctor waiting for EOF.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    spy_pids = tmp_path / "spy-pids"
    fake = bin_dir / "py-spy"
    fake.write_text(f"#!/bin/sh\necho $$ >> {spy_pids}\nsleep 1000 &\necho $! >> {spy_pids}\nwait\n")
    fake.chmod(0o755)
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    # py-spy's deadline (20 s) is cut to 2 s: what is tested is that gpudoctor stops waiting
    # at the deadline and kills py-spy's whole group, which a hang of any length shows;
    # waiting out the real 20 s cost this test 20 s.
    with_a_short_deadline = ("import sys\nfrom gpudoctor.probe import stacks\n"
                             "stacks._PY_SPY_TIMEOUT = 2.0\nfrom gpudoctor.cli import run\nsys.exit(run())\n")
    started = time.monotonic()
    done = subprocess.run([PY, "-c", with_a_short_deadline, "probe", "--json", "--hang-after", "1",
                           "--timeout", "60", "--grace", "1", "--",
                           PY, "-c", "import threading; threading.Event().wait()"],
                          env=env, capture_output=True, text=True, timeout=300)
    # py-spy gets 2 s (then the hang seen after 1 s, 1 s of grace, and starting two Pythons,
    # slow on a loaded machine); the fake one would have held gpudoctor for 1000 s.
    assert time.monotonic() - started < 120
    code, doc = done.returncode, json.loads(done.stdout)
    assert (code, doc["verdict"], doc["stop_reason"]) == (1, "hung", "hung")
    assert any(n.startswith("py-spy: py-spy timed out after 2 s") for n in doc["notes"])
    (root,) = doc["processes"]
    assert root["stack_source"] == "faulthandler" and "wait" in root["blocked_in"]
    spies = read_pids(spy_pids, 2)
    assert wait_gone([root["pid"], *spies]) == []
    assert all(not psutil.pid_exists(p) or psutil.Process(p).status() == psutil.STATUS_ZOMBIE
               for p in spies)
