"""What supervising a command costs: gpudoctor's own CPU while it watches an idle tree.

``gpudoctor probe -- COMMAND`` runs beside the user's program for as long as the program
runs, so what it burns per second is taken from that program. This script supervises a
command that only sleeps (it waits for a file to appear, checking five times a second)
for ``--seconds`` at the given ``--interval`` (the probe's ``--sample-interval``), and
measures the CPU time of gpudoctor's own processes over that window: the supervisor
(every thread of it) and its helper processes (the watchdog; py-spy would be one, but
an idle tree that is not hung gets no stack dump), never the supervised command's tree.
The window opens once the command is seen running, so the start-up (imports, the machine
block) is not counted; the figure is the steady cost, as a percentage of one core.

``--live`` runs gpudoctor with its stderr on a pseudo-terminal, so that the live view is
drawn as on a person's terminal (the pseudo-terminal's output is read and dropped);
without it gpudoctor runs with ``--quiet``. ``--json`` prints one JSON object:
``cpu_percent_of_core``, ``cpu_seconds``, ``seconds`` (the window), ``interval``,
``nvml`` (whether NVML was there to sample: the same check the probe makes) and
``live_view``. Run it from a clone, no install needed:
``python benchmarks/supervision_overhead.py --seconds 20 --json``.
Speed is never asserted; the script prints figures.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import pty
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))  # checked.py, beside it (python -I adds no folder)

from checked import TAIL, CommandFailed, failure, not_found, shown  # noqa: E402

# The supervised command: idle until the file named by its argument appears.
_WAITER = "import os, sys, time\nwhile not os.path.exists(sys.argv[1]):\n    time.sleep(0.2)\n"


def _nvml_on() -> bool:
    """Whether the probe's sampler would read NVML here (a driver and at least one GPU)."""
    from gpudoctor.probe import nvml

    return nvml.unavailable_reason() is None and nvml.device_count() > 0


def _environment() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    env.setdefault("TERM", "xterm-256color")
    return env


def _drain(fd: int, tail: bytearray) -> None:
    """Read what gpudoctor draws on the pseudo-terminal (a full one would block it), keeping
    only its end in ``tail``, for the message should gpudoctor fail."""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            return
        if not chunk:
            return
        tail.extend(chunk)
        del tail[:-TAIL]


def _own_cpu(supervisor, command_pid: int) -> float:  # noqa: ANN001 - a psutil.Process
    """CPU seconds of the supervisor and of its helpers, the command's tree left out."""
    import psutil

    times = supervisor.cpu_times()
    total = times.user + times.system
    try:
        children = supervisor.children()
    except psutil.Error:
        return total
    for child in children:
        if child.pid == command_pid:
            continue
        try:
            times = child.cpu_times()
            total += times.user + times.system
            for grandchild in child.children(recursive=True):
                times = grandchild.cpu_times()
                total += times.user + times.system
        except psutil.Error:
            continue
    return total


def _find_command(process: subprocess.Popen[bytes], marker: str, deadline: float) -> int | None:
    """The PID of the supervised command, once gpudoctor has started it; None if it did not."""
    import psutil

    supervisor = psutil.Process(process.pid)
    while time.monotonic() < deadline and process.poll() is None:
        try:
            for child in supervisor.children():
                if marker in child.cmdline():
                    return child.pid
        except psutil.Error:
            pass
        time.sleep(0.05)
    return None


def measure(seconds: float, interval: float, live: bool, python: str) -> dict[str, object]:
    """Supervise the idle command and return the figures."""
    import psutil

    with tempfile.TemporaryDirectory(prefix="gpudoctor-overhead-") as scratch:
        release = str(Path(scratch) / "release")
        command = [python, "-c", _WAITER, release]
        args = [python, "-m", "gpudoctor", "probe", "--sample-interval", repr(interval),
                "--hang-after", repr(seconds + 600.0)]
        terminal = None
        drawn = bytearray()  # the end of what gpudoctor wrote on stderr (a terminal or a file)
        log = tempfile.TemporaryFile()
        if live:
            master, slave = pty.openpty()
            fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
            terminal = threading.Thread(target=_drain, args=(master, drawn), daemon=True)
            terminal.start()
            stderr: int = slave
        else:
            args.append("--quiet")
            stderr = log.fileno()
        supervise = [*args, "--", *command]
        try:
            process = subprocess.Popen(supervise, env=_environment(), cwd=scratch, stdout=subprocess.DEVNULL,
                                       stderr=stderr)
        except OSError as error:
            raise not_found(supervise, error) from None
        if live:
            os.close(slave)
        command_pid = None
        try:
            supervisor = psutil.Process(process.pid)
            command_pid = _find_command(process, release, time.monotonic() + 60)
            if command_pid is not None:
                before, opened = _own_cpu(supervisor, command_pid), time.monotonic()
                time.sleep(seconds)
                after, closed = _own_cpu(supervisor, command_pid), time.monotonic()
        finally:
            Path(release).touch()
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if live:
            terminal.join(timeout=5)
            os.close(master)
        log.seek(0)
        said = (bytes(drawn) if live else log.read()).decode(errors="replace")
        log.close()
    # gpudoctor must have supervised the command and ended as it did, with 0
    problem = failure(supervise, process.returncode, said)
    if command_pid is None:
        problem = CommandFailed(f"benchmark stopped: {shown(supervise)} did not start the command "
                                f"(exit status {process.returncode}); the end of its stderr:\n"
                                f"{said.strip()[-TAIL:] or '(nothing)'}")
    if problem is not None:
        raise problem
    used = after - before
    window = closed - opened
    return {
        "cpu_percent_of_core": round(100.0 * used / window, 2),
        "cpu_seconds": round(used, 3),
        "seconds": round(window, 2),
        "interval": interval,
        "nvml": _nvml_on(),
        "live_view": live,
        "exit_code": process.returncode,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="length of the window (default: 20)")
    parser.add_argument("--interval", type=float, default=0.05,
                        help="the probe's --sample-interval (default: 0.05, the probe's own default)")
    parser.add_argument("--live", action="store_true", help="draw the live view on a pseudo-terminal")
    parser.add_argument("--python", default=sys.executable, help="the interpreter to run gpudoctor with")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    found = measure(args.seconds, args.interval, args.live, args.python)
    if args.json:
        print(json.dumps(found))
    else:
        view = "live view on" if args.live else "--quiet"
        nvml = "NVML sampled" if found["nvml"] else "no NVML"
        print(f"gpudoctor's own CPU while supervising an idle command: {found['cpu_percent_of_core']} % of one "
              f"core ({found['cpu_seconds']} s over {found['seconds']} s; interval {args.interval:g} s, "
              f"{nvml}, {view})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
