"""Fault injection: whatever the supervised tree or the outside world does, gpudoctor
returns with a verdict, and no process of the tree is left.

Each case runs ``gpudoctor probe --json`` on a small hostile program, optionally does
something to gpudoctor itself once the program says it is ready (a file it writes), and
then checks the exit code and verdict, and that nothing is left. "Nothing left" is
checked two ways, so that a process that scrubs its environment is found too:

- a marker variable in gpudoctor's environment (every process of the tree inherits it
  unless it drops its environment), searched in every process of the machine;
- ancestry: every descendant of gpudoctor seen while it ran (a thread lists them every
  few milliseconds, by PID and start time), plus every PID a case program wrote down.

The time each case took is printed (``-s`` shows it): the deadline asserted is only a
bound a stuck run would pass.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest

PY = sys.executable
pytestmark = pytest.mark.slow

# Every case program may use these: ``ready()`` tells the test it reached the point the
# case is about; ``note(pid)`` records a PID the test must find gone afterwards.
PRELUDE = """\
import os, signal, sys, time
HERE = sys.argv[1]
def note(pid):
    fd = os.open(os.path.join(HERE, "pids"), os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    os.write(fd, f"{pid}\\n".encode())
    os.close(fd)
def ready():
    open(os.path.join(HERE, "ready.tmp"), "w").close()
    os.replace(os.path.join(HERE, "ready.tmp"), os.path.join(HERE, "ready"))
note(os.getpid())
"""

IGNORES_TERM = PRELUDE + """\
signal.signal(signal.SIGTERM, signal.SIG_IGN)
ready()
time.sleep(600)
"""

LEAVES_TERM_IGNORING_CHILD = PRELUDE + """\
child = os.fork()
if child == 0:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    note(os.getpid())
    ready()
    time.sleep(600)
    os._exit(0)
while not os.path.exists(os.path.join(HERE, "ready")):
    time.sleep(0.01)
"""

# setsid, then exec with an empty environment: no token, no marker, another session.
ESCAPES_WITHOUT_ENVIRONMENT = PRELUDE + """\
child = os.fork()
if child == 0:
    os.setsid()
    if os.fork() == 0:
        script = f"trap '' TERM; echo $$ >> {HERE}/pids; : > {HERE}/ready; exec sleep 600"
        os.execve("/bin/sh", ["sh", "-c", script], {})
    os._exit(0)
os.waitpid(child, 0)
while not os.path.exists(os.path.join(HERE, "ready")):
    time.sleep(0.01)
if sys.argv[2:] == ["stay"]:
    time.sleep(600)
"""

FORK_BOMB = PRELUDE + """\
ready()
depth = 0
while depth < 6:  # at most 2**6 processes: a bug in the test cannot hurt the machine
    if os.fork() == 0:
        depth += 1
        note(os.getpid())
    else:
        depth += 1
        if os.fork() == 0:
            note(os.getpid())
time.sleep(600)
"""

MEMORY_HOG = PRELUDE + """\
block = bytearray(600 << 20)
for i in range(0, len(block), 4096):
    block[i] = 1
ready()
time.sleep(600)
"""

FLOODS_OUTPUT = PRELUDE + """\
chunk = b"x" * (1 << 20)
out = sys.stdout.buffer
for _ in range(256):
    out.write(chunk)
out.flush()
"""

SEGFAULTS = PRELUDE + """\
import ctypes
ctypes.string_at(0)
"""

LEAVES_ZOMBIES = PRELUDE + """\
for _ in range(5):
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    note(pid)
ready()
time.sleep(0.5)  # the zombies exist while the command does (the test waits on nothing here)
"""

STOPS_ITSELF = PRELUDE + """\
ready()
os.kill(os.getpid(), signal.SIGSTOP)
"""

WAITS_ON_A_STOPPED_CHILD = PRELUDE + """\
child = os.fork()
if child == 0:
    note(os.getpid())
    ready()
    os.kill(os.getpid(), signal.SIGSTOP)
    os._exit(0)
os.waitpid(child, 0)
"""

HANGS = PRELUDE + """\
import threading
ready()
threading.Event().wait()
"""

# The forking parent exits before its child writes its fork event: the child was adopted
# by gpudoctor by then, and must still be said to come from its real parent.
ORPHANED_AT_ONCE = PRELUDE + """\
middle = os.fork()
if middle == 0:
    if os.fork() == 0:
        time.sleep(0.3)  # its parent is gone when it writes anything
        note(os.getpid())
        ready()
        time.sleep(600)
    os._exit(0)
note(middle)
os.waitpid(middle, 0)
while not os.path.exists(os.path.join(HERE, "ready")):
    time.sleep(0.01)
time.sleep(600)
"""

OWN_PID_NAMESPACE = PRELUDE + """\
import subprocess
child = subprocess.Popen(["unshare", "--pid", "--fork", "--kill-child", "sh", "-c", "sleep 600"])
note(child.pid)
ready()
child.wait()
"""


@dataclass
class Case:
    name: str
    program: str
    options: list[str]
    code: int
    verdict: str
    stop_reason: str | None = None
    then: str | None = None  # what the test does to gpudoctor once the program is ready
    program_args: list[str] = field(default_factory=list)
    json_out: bool = True  # False: gpudoctor is killed and prints nothing
    check: Callable[[dict, Path], None] | None = None  # type: ignore[type-arg]


def _orphan_named_by_its_real_parent(doc: dict, here: Path) -> None:  # type: ignore[type-arg]
    pids = [int(p) for p in (here / "pids").read_text().split()]
    root, middle, orphan = pids[0], pids[1], pids[2]
    by_pid = {p["pid"]: p for p in doc["processes"]}
    assert by_pid[orphan]["ppid"] == middle, by_pid[orphan]
    assert f"from {os.getpid()}" not in doc["explanation"]
    assert root in by_pid


def _stopped_is_not_garbage(doc: dict, here: Path) -> None:  # type: ignore[type-arg]
    assert doc["explanation"].startswith("Stopped, not hung"), doc["explanation"]
    assert "still running (not hung)" not in doc["explanation"]
    assert not [n for n in doc["notes"] if n.startswith("py-spy") and ":" in n and n.split(":")[-1].strip().isdigit()]


def _interrupted_at_the_signal(doc: dict, here: Path) -> None:  # type: ignore[type-arg]
    assert doc["signal_at"] is not None and doc["signal_at"] <= doc["duration"]
    assert f"{doc['signal_at']:.1f} s after the start" in doc["explanation"]


CASES = [
    Case("command ignores SIGTERM, timeout", IGNORES_TERM, ["--timeout", "3", "--grace", "1"], 1, "killed", "timeout"),
    Case("leftover ignores SIGTERM", LEAVES_TERM_IGNORING_CHILD, ["--grace", "1"], 0, "ok", "exited"),
    Case("setsid, exec, empty environment", ESCAPES_WITHOUT_ENVIRONMENT, ["--grace", "1"], 0, "ok", "exited"),
    Case("fork bomb, --max-processes", FORK_BOMB, ["--max-processes", "10", "--timeout", "60"], 1, "killed",
         "process-limit"),
    Case("memory hog, --memory-limit", MEMORY_HOG, ["--memory-limit", "300MiB", "--timeout", "60"], 1, "oom",
         "memory-limit"),
    Case("256 MiB of output", FLOODS_OUTPUT, ["--timeout", "120"], 0, "ok", "exited"),
    Case("segfault", SEGFAULTS, [], 1, "crashed", "exited"),
    Case("zombies", LEAVES_ZOMBIES, [], 0, "ok", "exited"),
    Case("stops itself", STOPS_ITSELF, ["--hang-after", "2"], 1, "stopped", "stopped",
         check=_stopped_is_not_garbage),
    Case("waits on a stopped child", WAITS_ON_A_STOPPED_CHILD, ["--hang-after", "2"], 1, "stopped", "stopped"),
    Case("hangs", HANGS, ["--hang-after", "2"], 1, "hung", "hung"),
    Case("orphan reports its fork late", ORPHANED_AT_ONCE, ["--timeout", "60"], 130, "killed", "interrupted",
         then="SIGINT", check=_orphan_named_by_its_real_parent),
    Case("own PID namespace", OWN_PID_NAMESPACE, ["--timeout", "60"], 130, "killed", "interrupted", then="SIGINT"),
    Case("SIGINT to gpudoctor", HANGS, ["--timeout", "60"], 130, "killed", "interrupted", then="SIGINT",
         check=_interrupted_at_the_signal),
    Case("SIGTERM to gpudoctor", IGNORES_TERM, ["--timeout", "60", "--grace", "1"], 143, "killed", "interrupted",
         then="SIGTERM"),
    Case("SIGHUP to gpudoctor", HANGS, ["--timeout", "60"], 129, "killed", "interrupted", then="SIGHUP"),
    Case("SIGINT during the stack dumps", HANGS, ["--hang-after", "1", "--grace", "1"], 130, "hung", "hung",
         then="SIGINT-at-dump"),
    Case("SIGKILL to gpudoctor", LEAVES_TERM_IGNORING_CHILD, ["--timeout", "60"], -9, "", then="SIGKILL",
         json_out=False),
    Case("SIGKILL to gpudoctor, environment scrubbed", ESCAPES_WITHOUT_ENVIRONMENT, ["--timeout", "60"], -9, "",
         then="SIGKILL", program_args=["stay"], json_out=False),
    Case("SIGKILL to gpudoctor's process group", IGNORES_TERM, ["--timeout", "60"], -9, "", then="SIGKILL-group",
         json_out=False),
]


class _Descendants:
    """Every descendant of a process seen while it runs (PID and start time)."""

    def __init__(self, pid: int) -> None:
        self.seen: dict[int, float] = {}
        self._root = psutil.Process(pid)
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._done.is_set():
            try:
                for child in self._root.children(recursive=True):
                    try:
                        self.seen.setdefault(child.pid, child.create_time())
                    except psutil.Error:
                        continue
            except psutil.Error:
                return
            self._done.wait(0.005)

    def stop(self) -> None:
        self._done.set()
        self._thread.join()


def _marked(marker: str) -> list[int]:
    found = []
    for process in psutil.process_iter():
        try:
            if process.environ().get("FAULT_SUITE_MARKER") == marker:
                found.append(process.pid)
        except psutil.Error:
            continue
    return found


def _still_there(seen: dict[int, float], noted: list[int]) -> list[int]:
    """The processes of the run that still exist (zombies are dead and do not count)."""
    left = []
    for pid, started in {**{p: None for p in noted}, **seen}.items():
        try:
            process = psutil.Process(pid)
            same = started is None or abs(process.create_time() - started) < 0.05
            if same and process.status() != psutil.STATUS_ZOMBIE:
                left.append(pid)
        except psutil.Error:
            continue
    return left


def _wait_for(path: Path, process: subprocess.Popen[str], deadline: float) -> None:
    while not path.exists():
        assert process.poll() is None, f"gpudoctor ended before the program was ready: {process.communicate()}"
        assert time.monotonic() < deadline, "the program never got ready"
        time.sleep(0.01)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_fault(case: Case, tmp_path: Path) -> None:
    if case.program is OWN_PID_NAMESPACE and (shutil.which("unshare") is None or subprocess.run(
            ["unshare", "--pid", "--fork", "true"], capture_output=True).returncode != 0):
        pytest.skip("unshare --pid is not allowed here")
    here = tmp_path / "case"
    here.mkdir()
    program = tmp_path / "program.py"
    program.write_text(case.program)
    marker = uuid.uuid4().hex
    env = {**os.environ, "FAULT_SUITE_MARKER": marker}
    command = [PY, "-m", "gpudoctor", "probe", "--json", *case.options, "--", PY, str(program), str(here),
               *case.program_args]
    started = time.monotonic()
    gpudoctor = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                 start_new_session=True)
    descendants = _Descendants(gpudoctor.pid)
    try:
        deadline = started + 120
        if case.then:
            _wait_for(here / "ready", gpudoctor, deadline)
            if case.then == "SIGINT-at-dump":
                _signal_at_the_dumps(gpudoctor, here, deadline)
            elif case.then == "SIGKILL-group":
                _wait_named_to_the_watchdog(here, deadline)
                os.killpg(gpudoctor.pid, signal.SIGKILL)
            else:
                if case.then == "SIGKILL":
                    _wait_named_to_the_watchdog(here, deadline)
                gpudoctor.send_signal(getattr(signal, case.then))
        stdout, stderr = gpudoctor.communicate(timeout=180)
        took = time.monotonic() - started
    finally:
        if gpudoctor.poll() is None:
            os.killpg(gpudoctor.pid, signal.SIGKILL)
            gpudoctor.wait()
    descendants.stop()
    print(f"\n{case.name}: gpudoctor returned {gpudoctor.returncode} in {took:.2f} s")
    assert gpudoctor.returncode == case.code, stderr[-2000:]
    if case.json_out:
        doc = json.loads(stdout)
        assert (doc["verdict"], doc["stop_reason"]) == (case.verdict, case.stop_reason), doc["explanation"]
        if case.check is not None:
            case.check(doc, here)
    assert "Traceback" not in stderr, stderr[-2000:]
    noted = [int(p) for p in (here / "pids").read_text().split()] if (here / "pids").exists() else []
    deadline = time.monotonic() + 60  # the watchdog sweeps after gpudoctor is gone
    while (_marked(marker) or _still_there(descendants.seen, noted)) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = _marked(marker) + _still_there(descendants.seen, noted)
    for pid in left:  # leave nothing on the machine, even when failing
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    assert left == [], f"left running: {left}"


def _wait_named_to_the_watchdog(here: Path, deadline: float) -> None:
    """Wait until gpudoctor has named every process the program noted to its watchdog (the
    members file in its scratch folder, which the root's environment points into): what
    gpudoctor has not seen yet, no one could stop after a SIGKILL."""
    noted = [int(p) for p in (here / "pids").read_text().split()]
    members = Path(_events_path(noted)).parent / "members"
    while time.monotonic() < deadline:
        named = {int(line.split()[0]) for line in members.read_text().splitlines()} if members.exists() else set()
        if set(noted) <= named:
            return
        time.sleep(0.01)
    pytest.fail(f"gpudoctor never named {noted} to its watchdog")


def _events_path(noted: list[int]) -> str:
    """GPUDOCTOR_EVENTS from the environment of a noted process that still has one: the
    root may have exited already (a zombie's environment cannot be read), and a process
    that exec'd with an empty environment has none."""
    for pid in noted:
        try:
            events = psutil.Process(pid).environ().get("GPUDOCTOR_EVENTS")
        except psutil.Error:
            continue
        if events:
            return events
    pytest.fail(f"no noted process ({noted}) shows GPUDOCTOR_EVENTS")


def _signal_at_the_dumps(gpudoctor: subprocess.Popen[str], here: Path, deadline: float) -> None:
    """SIGINT while gpudoctor dumps the stacks of a hang: once a py-spy it started is seen."""
    parent = psutil.Process(gpudoctor.pid)
    while time.monotonic() < deadline and gpudoctor.poll() is None:
        try:
            if any("py-spy" in " ".join(p.cmdline()) for p in parent.children()):
                break
        except psutil.Error:
            pass
        time.sleep(0.005)
    gpudoctor.send_signal(signal.SIGINT)


def test_a_nan_option_is_a_usage_error() -> None:
    for option in ("--timeout", "--grace", "--hang-after", "--sample-interval"):
        done = subprocess.run([PY, "-m", "gpudoctor", "probe", option, "nan", "--", "true"],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 2 and "not a finite number of seconds" in done.stderr, (option, done.stderr)
