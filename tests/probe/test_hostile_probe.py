"""The hostile-input suite of the probe: what a user, a program or another user's process
can throw at ``gpudoctor probe``, one finding per test, growing with every finding.

Each test asserts the project's rule for bad input: one clear line or a verdict, the
documented exit code, never a Python traceback, and nothing left running. Programs are
watched through what they do (a file they write, a process that exists), never through
sleeps that assume a speed: the machine may be loaded.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

from gpudoctor.cli import build_parser, main
from gpudoctor.probe import launch, live_render
from gpudoctor.probe.live_snapshot import ProcessLine, Snapshot
from gpudoctor.probe.watchdog import start_ticks
from tests.probe.helpers import gpudoctor, marked, running, script, unused_pid, wait_gone

PY = sys.executable
# What a hostile command line or output holds: set the terminal's title, clear the screen.
TITLE = "\x1b]0;PWNED\x07"
CLEAR = "\x1b[2J"


def _no_control_bytes(text: str) -> bool:
    return not any(char in text for char in ("\x1b", "\x07", "\x9b"))


def _one_error_line(stderr: str) -> None:
    assert "Traceback" not in stderr, stderr
    errors = [line for line in stderr.splitlines() if "error:" in line]
    assert len(errors) == 1, stderr


def _wait_for(path: Path, process: subprocess.Popen[str] | None = None, timeout: float = 60.0) -> None:
    """Wait until ``path`` exists (the program says it is ready); fail if ``process`` ends first."""
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert process is None or process.poll() is None, process.communicate() if process else ""
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.01)


def _left(mark: str) -> list[int]:
    """The processes this test started that still run, once they had time to end."""
    return wait_gone(marked(mark), timeout=30)


# -- 1. Escape sequences in what processes show ------------------------------------------


@pytest.fixture
def hostile_process(tmp_path: Path) -> Iterator[psutil.Process]:
    """A process (standing for another user's) whose command line sets the terminal's title
    and clears the screen, early in it so that a shortened command line keeps them."""
    ready = tmp_path / "ready"
    code = f"#{TITLE}{CLEAR}\nimport sys, time\nopen(sys.argv[1], 'w').close()\ntime.sleep(600)"
    process = subprocess.Popen([PY, "-c", code, str(ready)])
    try:
        _wait_for(ready)
        yield psutil.Process(process.pid)
    finally:
        process.kill()
        process.wait()


def test_an_attached_command_line_is_escaped_on_the_terminal_and_the_page(
        hostile_process: psutil.Process, tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    done = gpudoctor(["probe", "--pid", str(hostile_process.pid), "--watch", "0.5", "--html", str(page)])
    assert done.returncode == 0, done.stderr  # idle: nothing shows a problem
    assert "Traceback" not in done.stderr
    assert "verdict: idle" in done.stdout
    assert _no_control_bytes(done.stdout) and _no_control_bytes(done.stderr)
    assert "\\x1b]0;PWNED\\x07\\x1b[2J" in done.stdout
    html = page.read_text()
    assert _no_control_bytes(html) and "\\x1b]0;PWNED\\x07" in html


def test_json_keeps_an_attached_command_line_exactly(hostile_process: psutil.Process) -> None:
    done = gpudoctor(["probe", "--json", "--pid", str(hostile_process.pid), "--watch", "0.5"])
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    (root,) = [p for p in document["processes"] if p["pid"] == hostile_process.pid]
    assert any(TITLE + CLEAR in part for part in root["cmdline"])


def test_the_last_line_of_stderr_is_escaped_in_the_report(tmp_path: Path) -> None:
    program = script(tmp_path, "fails.py", "import sys\n"
                     f"sys.stderr.write({'boom ' + TITLE + ' ' + CLEAR + ' end'!r} + '\\n')\nsys.exit(3)\n")
    page = tmp_path / "report.html"
    done = gpudoctor(["probe", "--quiet", "--html", str(page), "--", PY, str(program)])
    assert done.returncode == 1, done.stderr  # failed: a problem was diagnosed
    assert "Last line of stderr: boom \\x1b]0;PWNED\\x07 \\x1b[2J end" in done.stdout
    assert _no_control_bytes(done.stdout)
    assert TITLE in done.stderr  # the command's own output, passed through as it came, is its own
    assert _no_control_bytes(page.read_text())


def test_the_live_view_and_progress_lines_escape_titles_and_roles() -> None:
    line = ProcessLine(pid=7, role=f"exec {TITLE}", runtimes=(), threads=1, cpu_percent=None, idle_s=0.0,
                       stopped=False, rss=1 << 20, gpu=None)
    before = Snapshot(title=f"python {CLEAR}", elapsed=0.0, processes=(), quiet_s=0.0, hang_after=30.0)
    now = Snapshot(title=f"python {CLEAR}", elapsed=1.0, processes=(line,), quiet_s=0.0, hang_after=30.0)
    shown = [*live_render.view_lines(now), live_render.start_line(now), *live_render.progress_lines(before, now)]
    assert all(_no_control_bytes(text) for text in shown), shown
    assert any("\\x1b[2J" in text for text in shown) and any("\\x1b]0;PWNED\\x07" in text for text in shown)


# -- 2. A program that signals gpudoctor, its parent -------------------------------------


@pytest.mark.parametrize("name", ["SIGTERM", "SIGINT", "SIGHUP"])
def test_a_program_that_signals_gpudoctor_gets_a_verdict_that_says_so(name: str, no_leftovers: str) -> None:
    command = [PY, "-c", f"import os, signal; os.kill(os.getppid(), signal.{name})"]
    done = gpudoctor(["probe", "--json", "--quiet", "--", *command])
    assert "Traceback" not in done.stderr
    assert done.returncode == 1, done.stderr  # a diagnosis, not 128+N: nobody interrupted gpudoctor
    document = json.loads(done.stdout)
    assert document["verdict"] == "killed"
    assert document["explanation"].startswith("The program signalled gpudoctor itself: pid "), document["explanation"]
    sender = document["signal_sender"]
    assert sender["in_tree"] is True and sender["pid"] == document["processes"][0]["pid"]
    assert _left(no_leftovers) == []


def test_a_program_that_signals_gpudoctor_gets_the_verdict_on_the_terminal_too(no_leftovers: str) -> None:
    done = gpudoctor(["probe", "--quiet", "--", "sh", "-c", "kill -TERM $PPID; exec sleep 600"])
    assert (done.returncode, "Traceback" in done.stderr) == (1, False), done.stderr
    assert "verdict: killed" in done.stdout and "The program signalled gpudoctor itself" in done.stdout
    assert _left(no_leftovers) == []


def test_signals_the_tree_keeps_sending_do_not_cut_its_stop_short(no_leftovers: str) -> None:
    # It ignores SIGTERM and signals gpudoctor every 10 ms until it is SIGKILLed: only the
    # first signal counts; a "second Ctrl-C" is the user's alone.
    program = ("import os, signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
               "for _ in range(20000):\n    os.kill(os.getppid(), signal.SIGTERM)\n    time.sleep(0.01)\n")
    done = gpudoctor(["probe", "--json", "--quiet", "--grace", "1", "--", PY, "-c", program])
    assert (done.returncode, "Traceback" in done.stderr) == (1, False), done.stderr
    document = json.loads(done.stdout)
    assert document["signal_sender"]["in_tree"] is True
    assert not [note for note in document["notes"] if note.startswith("a second signal")], document["notes"]
    assert _left(no_leftovers) == []


def test_a_signal_from_outside_is_still_an_interruption_and_names_its_sender(tmp_path: Path,
                                                                            no_leftovers: str) -> None:
    ready = tmp_path / "ready"
    command = [PY, "-m", "gpudoctor", "probe", "--json", "--quiet", "--", PY, "-c",
               "import sys, time; open(sys.argv[1], 'w').close(); time.sleep(600)", str(ready)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(ready, process)
        process.send_signal(signal.SIGTERM)
        stdout, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert (process.returncode, "Traceback" in stderr) == (128 + signal.SIGTERM, False), stderr
    document = json.loads(stdout)
    assert document["signal_sender"] == {"pid": os.getpid(), "command": psutil.Process().cmdline(),
                                         "in_tree": False}
    assert f"after the start, from pid {os.getpid()}" in document["explanation"]
    assert _left(no_leftovers) == []


# -- 3. --memory-limit 8 GB: a unit as a word of its own ---------------------------------


@pytest.mark.parametrize(("words", "expected"), [
    (["8", "GB"], 8_000_000_000), (["8GB"], 8_000_000_000), (["8", "GiB"], 8 << 30), (["8g"], 8_000_000_000),
    (["512", "MiB"], 512 << 20), (["512Mi"], 512 << 20), (["1.5", "gb"], 1_500_000_000),
])
def test_a_memory_limit_reads_its_unit_even_as_a_word_of_its_own(words: list[str], expected: int) -> None:
    args = build_parser().parse_args(["probe", "--memory-limit", *words, "--timeout", "5", "--", "python", "x.py"])
    assert (args.memory_limit, args.timeout, args.command) == (expected, 5.0, ["--", "python", "x.py"])


def test_both_sizes_with_units_of_their_own_and_a_command_without_dashes() -> None:
    args = build_parser().parse_args(["probe", "--output-limit", "1", "KiB", "--memory-limit", "2", "GB",
                                      "python", "x.py"])
    assert (args.output_limit, args.memory_limit, args.command) == (1024, 2_000_000_000, ["python", "x.py"])


def test_a_memory_limit_with_its_unit_apart_reaches_the_run(tmp_path: Path) -> None:
    done = gpudoctor(["probe", "--json", "--quiet", "--memory-limit", "8", "GB", "--", "true"])
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["memory_limit"] == 8_000_000_000


@pytest.mark.parametrize("words", [
    ["0"], ["0.5"], ["0", "GB"], ["100"], ["1e30GB"], ["9" * 400], ["9999999999", "TB"], ["-1GB"], ["lots"],
])
def test_an_impossible_memory_limit_is_one_clear_line(words: list[str],
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["probe", "--memory-limit", *words, "--", "true"]) == 2
    err = capsys.readouterr().err
    _one_error_line(err)
    assert "--memory-limit" in err


def test_a_word_after_a_size_that_is_no_unit_is_the_command(tmp_path: Path) -> None:
    done = gpudoctor(["probe", "--quiet", "--memory-limit", "8000000000", "parsecs"])
    assert done.returncode == 2
    _one_error_line(done.stderr)
    assert "command not found: parsecs" in done.stderr


# -- 4. A reader of stdout that leaves (``| head -1``) -----------------------------------


def _closed_stdout(args: list[str]) -> subprocess.CompletedProcess[str]:
    """Run gpudoctor with a standard output whose reader has already gone."""
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run([PY, "-m", "gpudoctor", *args], stdout=write, stderr=subprocess.PIPE, text=True,
                              timeout=120)
    finally:
        os.close(write)


@pytest.mark.parametrize("json_out", [False, True], ids=["text", "json"])
@pytest.mark.parametrize(("exit_status", "expected"), [(0, 0), (3, 1)], ids=["ok", "failed"])
def test_a_closed_stdout_ends_quietly_with_the_verdicts_status(json_out: bool, exit_status: int, expected: int,
                                                              tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    done = _closed_stdout(["probe", "--quiet", *(["--json"] if json_out else []), "--html", str(page), "--",
                           PY, "-c", f"print('x' * 100); raise SystemExit({exit_status})"])
    assert (done.returncode, done.stderr.count("Traceback"), "Exception ignored" in done.stderr) == \
        (expected, 0, False), done.stderr
    assert page.exists()  # the HTML report is still written


@pytest.mark.parametrize("json_out", [False, True], ids=["text", "json"])
def test_a_closed_stdout_after_attaching_ends_with_the_verdicts_status(json_out: bool) -> None:
    idle = subprocess.Popen(["sleep", "600"])
    try:
        done = _closed_stdout(["probe", "--quiet", *(["--json"] if json_out else []), "--pid", str(idle.pid),
                               "--watch", "0.5"])
    finally:
        idle.kill()
        idle.wait()
    assert (done.returncode, "Traceback" in done.stderr, "Exception ignored" in done.stderr) == (0, False, False), \
        done.stderr


def test_a_closed_stdout_of_the_machine_report_ends_quietly() -> None:
    done = _closed_stdout(["probe", "--quiet", "--no-scenarios"])
    assert (done.returncode, done.stderr) == (0, "")


# -- 5. --pid honours --timeout; --watch has a ceiling -----------------------------------


@pytest.mark.parametrize("value", ["1e20", "inf", "nan", "3601", "0"])
def test_an_absurd_watch_is_one_clear_line(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["probe", "--pid", str(os.getpid()), "--watch", value]) == 2
    err = capsys.readouterr().err
    _one_error_line(err)
    assert "--watch" in err


def test_attaching_honours_the_timeout() -> None:
    idle = subprocess.Popen(["sleep", "600"])
    try:
        # A window of an hour: only --timeout can end this examination in time.
        done = gpudoctor(["probe", "--json", "--quiet", "--pid", str(idle.pid), "--watch", "3600",
                          "--timeout", "2"], timeout=60)
    finally:
        idle.kill()
        idle.wait()
    assert (done.returncode, "Traceback" in done.stderr) == (0, False), done.stderr
    document = json.loads(done.stdout)
    assert document["attached"]["watch"] == 1.0
    assert "--timeout 2 s cut the watch window from 3600 s to 1 s (half of it: the rest is for the stack dumps)." \
        in document["notes"]


# -- --grace has a range ----------------------------------------------------------------


@pytest.mark.parametrize("value", ["-1", "-0.5", "nan", "inf", "-inf", "1e308", "3601", "lots", ""])
def test_an_absurd_grace_is_one_clear_line(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    # 1e308 was taken: every stop of the tree then waited for ever on a process ignoring SIGTERM.
    assert main(["probe", f"--grace={value}", "--", "true"]) == 2  # "=": argparse takes "-inf" for an option
    err = capsys.readouterr().err
    _one_error_line(err)
    assert "argument --grace:" in err and "0 to 3600 seconds" in err, err


@pytest.mark.parametrize(("value", "expected"), [("0", 0.0), ("0.25", 0.25), ("3600", 3600.0)])
def test_a_grace_from_0_to_an_hour_is_taken(value: str, expected: float) -> None:
    assert build_parser().parse_args(["probe", "--grace", value, "--", "true"]).grace == expected


def test_a_grace_of_0_kills_a_tree_that_ignores_sigterm_at_once(no_leftovers: str) -> None:
    # --timeout stops it; with no grace, SIGKILL follows SIGTERM (a 600 s sleep shows it did).
    done = gpudoctor(["probe", "--json", "--quiet", "--grace", "0", "--timeout", "1", "--no-native-stacks", "--",
                      "sh", "-c", "trap '' TERM; sleep 600"])
    assert (done.returncode, "Traceback" in done.stderr) == (1, False), done.stderr
    document = json.loads(done.stdout)
    assert (document["verdict"], document["stop_reason"]) == ("killed", "timeout")
    assert _left(no_leftovers) == []


# -- a working folder deleted under gpudoctor -------------------------------------------

def test_a_scenario_runs_as_expected_in_a_deleted_working_folder(tmp_path: Path) -> None:
    """multiprocessing asks for the working folder to start a child: gpudoctor's own
    scenario programs run in the run's folder when the user's is gone."""
    gone = tmp_path / "gone"

    def enter() -> None:
        os.mkdir(gone)
        os.chdir(gone)
        os.rmdir(gone)

    done = subprocess.run([sys.executable, "-m", "gpudoctor", "probe", "--json", "--scenario", "fork-with-threads"],
                          capture_output=True, text=True, timeout=300, preexec_fn=enter)
    assert "Traceback" not in done.stderr, done.stderr
    found = {(s["variant"], s["status"]) for s in json.loads(done.stdout)["scenarios"]}
    assert ("safe", "ok") in found, done.stdout


# -- a gpudoctor killed with SIGKILL leaves no working folder behind ---------------------

# Says it is ready, then waits on its standard input, a pipe the test holds.
WAITS_ON_A_PIPE = "import sys; open(sys.argv[1], 'w').close(); sys.stdin.read()"


def _wait_until(ready: Callable[[], bool], what: str, process: subprocess.Popen[str] | None = None) -> None:
    deadline = time.monotonic() + 60
    while not ready():
        assert process is None or process.poll() is None, process.communicate() if process else ""
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.01)


def _folders(scratch: Path) -> list[Path]:
    return sorted(scratch.glob("gpudoctor-*"))


@pytest.fixture
def waiting_probe(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], Path, dict[str, str]]]:
    """A gpudoctor supervising a command that waits on a pipe, once its working folder (in a
    temporary folder of the test's own) names the run's watchdog; the folder and the
    environment that puts it there."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = dict(os.environ, TMPDIR=str(scratch))
    ready = tmp_path / "ready"
    # (--hang-after: waiting on a pipe for 30 s is a hang, which gpudoctor would stop itself)
    probe = subprocess.Popen([PY, "-m", "gpudoctor", "probe", "--quiet", "--hang-after", "3600", "--",
                              PY, "-c", WAITS_ON_A_PIPE, str(ready)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=env)
    try:
        _wait_until(lambda: ready.exists() and any((f / "watchdog").exists() for f in _folders(scratch)),
                    "the command ready and the folder naming the watchdog", probe)
        yield probe, scratch, env
    finally:
        if probe.poll() is None:
            probe.kill()
        probe.communicate()  # closes the pipe: the command, wherever it was left, reads its end


def test_the_watchdog_removes_the_folder_of_a_gpudoctor_killed_with_sigkill(
        waiting_probe: tuple[subprocess.Popen[str], Path, dict[str, str]], no_leftovers: str) -> None:
    probe, scratch, _ = waiting_probe
    probe.kill()
    probe.wait()
    _wait_until(lambda: not _folders(scratch), "the folder removed by the watchdog")
    assert _left(no_leftovers) == []  # the watchdog killed the command too


def test_the_next_gpudoctor_removes_the_folder_of_one_killed_with_its_watchdog(
        waiting_probe: tuple[subprocess.Popen[str], Path, dict[str, str]], no_leftovers: str) -> None:
    probe, scratch, env = waiting_probe
    (stale,) = _folders(scratch)
    watchdog_pid = int((stale / "watchdog").read_text().split()[0])
    tree = psutil.Process(probe.pid).children(recursive=True)
    assert watchdog_pid in {p.pid for p in tree}
    os.kill(watchdog_pid, signal.SIGKILL)  # first: nothing is left to clean up after gpudoctor
    _wait_until(lambda: not running([watchdog_pid]), "the watchdog dead")  # a zombie until gpudoctor's end
    assert probe.poll() is None, probe.communicate()
    probe.kill()
    probe.wait()
    for process in tree:  # the command, orphaned: the test ends it itself
        try:
            process.kill()
        except psutil.NoSuchProcess:
            pass
    assert wait_gone(p.pid for p in tree) == []
    assert _folders(scratch) == [stale]  # nothing could remove it
    done = gpudoctor(["probe", "--quiet", "--", "true"], env=env)
    assert (done.returncode, "Traceback" in done.stderr) == (0, False), done.stderr
    assert _folders(scratch) == []  # the stale folder, and the second run's own
    assert _left(no_leftovers) == []


@pytest.mark.parametrize("how", ["exit", "SIGINT", "SIGTERM"])
def test_a_normal_end_ctrl_c_or_sigterm_still_removes_the_folder(
        how: str, waiting_probe: tuple[subprocess.Popen[str], Path, dict[str, str]], no_leftovers: str) -> None:
    probe, scratch, _ = waiting_probe
    if how == "exit":
        probe.communicate(timeout=120)  # closes the pipe: the command reads its end and exits
    else:
        probe.send_signal(getattr(signal, how))
        probe.wait(timeout=120)
    assert _folders(scratch) == []
    assert _left(no_leftovers) == []


def _owned(pid: int, ticks: int, namespace: int, name: str) -> str:
    return f"gpudoctor-{pid}.{ticks}.{namespace}-{name}"


def test_only_folders_of_gpudoctors_that_are_gone_are_removed(tmp_path: Path) -> None:
    namespace = int(os.readlink("/proc/self/ns/pid").split("[")[1].rstrip("]"))
    me, ticks, dead = os.getpid(), start_ticks(os.getpid()), unused_pid()
    assert ticks is not None
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_text("not gpudoctor's")
    folder = tmp_path / "tmp"
    folder.mkdir()

    def made(name: str, watchdog: str | None = None) -> Path:
        path = folder / name
        path.mkdir()
        (path / "stacks").mkdir()
        (path / "stacks" / "link").symlink_to(outside)  # never followed when the folder is removed
        if watchdog is not None:
            (path / "watchdog").write_text(watchdog)
        return path

    stale = made(_owned(dead, 1, namespace, "stale"))
    pid_taken_again = made(_owned(me, ticks + 1, namespace, "again"))
    stale_watchdog_gone = made(_owned(dead, 1, namespace, "wgone"), f"{dead} 1\n")
    kept = [
        made(_owned(me, ticks, namespace, "alive")),  # its gpudoctor runs
        made(_owned(dead, 1, namespace, "wdog"), f"{me} {ticks}\n"),  # its watchdog still runs
        made(_owned(dead, 1, namespace + 1, "ns")),  # a PID of another namespace: unknown here
        made("gpudoctor-abcd1234"),  # no owner in its name
    ]
    link = folder / _owned(dead, 1, namespace, "link")
    link.symlink_to(outside)
    kept.append(link)
    plain_file = folder / _owned(dead, 1, namespace, "file")
    plain_file.write_text("")
    kept.append(plain_file)
    if os.getuid() == 0:  # another user's folder: never ours to remove
        theirs = made(_owned(dead, 1, namespace, "theirs"))
        os.chown(theirs, 65534, 65534)
        kept.append(theirs)
    removed = launch.remove_stale_workdirs(folder)
    assert sorted(removed) == sorted([stale, pid_taken_again, stale_watchdog_gone])
    assert sorted(folder.iterdir()) == sorted(kept)
    assert (outside / "keep").read_text() == "not gpudoctor's"


def test_gpudoctor_stopped_and_continued_goes_on_watching(tmp_path: Path) -> None:
    # Ctrl-Z then fg, or a scheduler's suspend and resume: the wait for a stopping signal
    # came back with a siginfo nobody filled, read as "interrupted by signal -1597885968".
    # The command stops gpudoctor (its parent) and, a second later, continues it.
    path = script(tmp_path, "pause.py", "import os, signal, time\nos.kill(os.getppid(), signal.SIGSTOP)\n"
                                        "time.sleep(1)\nos.kill(os.getppid(), signal.SIGCONT)\nprint('resumed')\n")
    done = gpudoctor(["probe", "--json", "--", sys.executable, str(path)], timeout=120)
    document = json.loads(done.stdout)
    assert (done.returncode, document["verdict"], document["stop_reason"]) == (0, "ok", "exited"), done.stderr
    assert document["signal_at"] is None


@pytest.mark.parametrize("name", ["b.py", "nb.ipynb", "stub.pyi"])
def test_the_page_is_never_written_over_a_python_source_file(tmp_path: Path, name: str,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    # As lint's --output-file refuses: a typo in --html must not replace the user's code.
    source = tmp_path / name
    source.write_text("print('mine')\n")
    assert main(["probe", "--quiet", "--html", str(source), "--", sys.executable, "-c", "pass"]) == 2
    assert "refusing to write the page over an existing Python source file" in capsys.readouterr().err
    assert source.read_text() == "print('mine')\n"
