"""--jobs: the same findings from spawned workers, and nothing left behind."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from gpudoctor.lint import engine

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"

JOB = '''\
import multiprocessing as mp
import cupy as cp


def work_{n}(x):
    return float(cp.sum(cp.asarray(x)))


class Runner{n}:
    def run(self, items):
        cp.ones(1)
        ctx = mp.get_context("spawn") if len(items) > {n} else mp.get_context()
        with ctx.Pool(4) as pool:
            return pool.map(work_{n}, items)
{padding}
'''


def _corpus(where: Path, count: int, padding_lines: int = 0) -> list[Path]:
    padding = "".join(f"\ndef helper_{i}(a, b):\n    return [x * {i} for x in range(a) if x % b]\n"
                      for i in range(padding_lines))
    files = []
    for n in range(count):
        path = where / f"job_{n}.py"
        path.write_text(JOB.format(n=n, padding=padding))
        files.append(path)
    return files


_RUN = """
import json, sys
from pathlib import Path
from gpudoctor.lint import engine
from gpudoctor.lint.rules._registry import all_rules
from gpudoctor.lint.selection import build_selection
from gpudoctor.lint.settings import Settings

engine.PARALLEL_MIN_BYTES = int(sys.argv[3])
root = Path(sys.argv[1])
codes = [r.code for r in all_rules()]
settings = Settings(build_selection(codes, codes), 12, "linux", root)
result = engine.lint_paths(sorted(root.rglob("*.py")), settings, jobs=int(sys.argv[2]))
import psutil
infrastructure = ("forkserver", "resource_tracker")  # serve every pool; exit with this process
left = [p.pid for p in psutil.Process().children(recursive=True)
        if not any(word in " ".join(p.cmdline()) for word in infrastructure)]
print(json.dumps({"errors": result.internal_errors, "workers": result.workers, "left": left,
                  "findings": [[f.code, f.site.path, f.site.row, f.site.col, f.message] for f in result.findings]}))
"""


def _findings(root: Path, jobs: int, min_bytes: int) -> tuple[list[list[object]], int]:
    """Lint in a child process, so that the pool's fork server and resource tracker (which
    live as long as the process that started them) are not left among this test run's
    children."""
    done = subprocess.run([sys.executable, "-c", _RUN, str(root), str(jobs), str(min_bytes)],
                          capture_output=True, text=True, timeout=300, check=True)
    data = json.loads(done.stdout)
    assert data["errors"] == [] and data["left"] == []  # no worker outlives the run
    return data["findings"], data["workers"]


def test_workers_find_exactly_what_one_process_finds() -> None:
    cases = FIXTURES / "cases"
    alone, none = _findings(cases, jobs=1, min_bytes=0)
    together, workers = _findings(cases, jobs=2, min_bytes=0)
    assert (none, workers) == (0, 2)
    assert together == alone and len(alone) > 40


def test_small_runs_stay_in_process(tmp_path: Path) -> None:
    _corpus(tmp_path, 3)
    _, workers = _findings(tmp_path, jobs=2, min_bytes=engine.PARALLEL_MIN_BYTES)
    assert workers == 0  # starting workers would cost more than the analysis


def _lint_in_background(where: Path, count: int | None) -> subprocess.Popen[str]:
    """``gpudoctor lint --jobs 2`` on a corpus of ``count`` files (``None``: the one already
    in ``where``), in a session of its own (its process group is what a terminal's Ctrl-C
    reaches)."""
    if count is not None:
        _corpus(where, count, padding_lines=60)
    return subprocess.Popen(
        [sys.executable, "-m", "gpudoctor", "lint", "--no-cache", "--jobs", "2", str(where)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def _workers_seen(process: subprocess.Popen[str], count: int = 2,
                  started: bool = False) -> tuple[list[psutil.Process], list[psutil.Process]]:
    """Wait until ``count`` workers exist (forked by the fork server, itself a child of
    gpudoctor) and, with ``started``, have taken what gpudoctor hands each one as it starts
    it (their thread that watches gpudoctor runs from then on: two threads); return them and
    every process of the run's tree. Waits on what it sees, with a deadline only a stuck
    run reaches."""
    parent = psutil.Process(process.pid)
    deadline = time.monotonic() + 120
    while process.poll() is None and time.monotonic() < deadline:
        try:
            tree = parent.children(recursive=True)
            workers = [p for p in tree if p.ppid() != process.pid and (not started or p.num_threads() >= 2)]
        except psutil.NoSuchProcess:
            continue
        if len(workers) >= count:
            return workers, tree
        time.sleep(0.01)
    pytest.fail(f"no {count} workers seen (the run ended: {process.poll()})")


def _gone(processes: list[psutil.Process]) -> list[psutil.Process]:
    """The processes still alive after waiting for them to end (a deadline for stuck ones)."""
    _, alive = psutil.wait_procs(processes, timeout=30)
    for leftover in alive:  # leave nothing behind, even when the test fails
        leftover.kill()
    return alive


def _stop_all(processes: list[psutil.Process]) -> None:
    """SIGSTOP: a stopped worker cannot finish its share, so whatever comes next reaches a
    run whose workers hold unfinished work, however fast the machine is. (Only workers
    that have started: gpudoctor waits for a worker to read its start-up data.)"""
    for worker in processes:
        worker.suspend()


@pytest.mark.parametrize("moment", ["as-workers-start", "while-analysing"])
def test_ctrl_c_stops_the_workers_and_prints_no_traceback(tmp_path: Path, moment: str) -> None:
    process = _lint_in_background(tmp_path, 200)
    # The fork server, the resource tracker and two workers. (The few milliseconds in which
    # gpudoctor starts the server with SIGINT ignored are not aimed at: a Ctrl-C there is
    # lost, which a person cannot time.)
    workers, tree = _workers_seen(process, started=moment == "while-analysing")
    if moment == "while-analysing":
        _stop_all(workers)
    os.killpg(process.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: the whole group
    out, err = process.communicate(timeout=60)
    assert process.returncode == 130, (out, err)
    assert "gpudoctor: interrupted" in err and "Traceback" not in err
    assert not _gone(workers)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_and_sighup_stop_the_workers_and_leave_nothing(tmp_path: Path, signum: int) -> None:
    """As a supervisor stops a job (``kill PID``, a closed terminal): the signal reaches
    gpudoctor alone, not its workers."""
    process = _lint_in_background(tmp_path, 200)
    workers, tree = _workers_seen(process, started=True)
    _stop_all(workers)
    os.kill(process.pid, signum)
    try:
        out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:  # hung: leave nothing behind for the tests after this one
            for leftover in [psutil.Process(process.pid), *tree]:
                with contextlib.suppress(psutil.Error):
                    leftover.kill()
    assert process.returncode == 128 + signum, (out, err)
    assert f"stopped by {signal.Signals(signum).name}" in err and "Traceback" not in err
    assert not _gone(tree)  # the workers, the fork server and the resource tracker


def test_sigkill_of_gpudoctor_leaves_no_worker_behind(tmp_path: Path) -> None:
    """No handler sees SIGKILL: each worker watches gpudoctor and ends with it; the fork
    server and the resource tracker then end as their last client goes."""
    process = _lint_in_background(tmp_path, 200)
    workers, tree = _workers_seen(process)
    os.kill(process.pid, signal.SIGSTOP)  # it cannot finish the run before it is killed
    os.kill(process.pid, signal.SIGKILL)
    process.communicate(timeout=60)
    assert process.returncode == -signal.SIGKILL
    assert not _gone(tree)


@pytest.fixture(scope="module")
def sixty_files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """60 files (260 kB, over PARALLEL_MIN_BYTES): seconds of work, where the kill comes
    within milliseconds of the worker being seen (300 files made a test 6 minutes). Only
    read, by runs without a cache: the tests of a dying worker share them."""
    where = tmp_path_factory.mktemp("sixty-files")
    _corpus(where, 60, padding_lines=60)
    return where


@pytest.fixture(scope="module")
def sixty_files_alone(sixty_files: Path) -> str:
    """What ``gpudoctor lint --jobs 1`` prints for ``sixty_files``: made once (15 s on a
    loaded 2-core machine), it is the same for every test that compares with it."""
    alone = subprocess.run([sys.executable, "-m", "gpudoctor", "lint", "--no-cache", "--jobs", "1", str(sixty_files)],
                           capture_output=True, text=True, timeout=300)
    assert alone.returncode == 1 and "Traceback" not in alone.stderr, alone.stderr
    return alone.stdout


@pytest.mark.parametrize("moment", ["as-it-starts", "while-analysing"])
def test_a_worker_that_dies_loses_no_finding(sixty_files: Path, sixty_files_alone: str, moment: str) -> None:
    """A worker killed mid-run (the kernel's out-of-memory killer): its files are analysed
    in gpudoctor's own process, with one warning, and every finding is there. Killed as it
    starts, the pipe to it breaks: that is not the CLI's ``| head`` case (exit 0)."""
    process = _lint_in_background(sixty_files, None)
    workers, tree = _workers_seen(process, count=1, started=moment == "while-analysing")
    if moment == "while-analysing":
        _stop_all(workers)  # it took a share and cannot return it
    workers[0].kill()
    try:
        out, err = process.communicate(timeout=300)
    finally:
        if process.poll() is None:  # hung: leave nothing behind
            os.killpg(process.pid, signal.SIGKILL)
    assert process.returncode == 1, (out, err)
    assert "a worker process ended abruptly" in err and "Traceback" not in err
    assert err.count("gpudoctor: warning: a worker process ended abruptly") == 1
    assert out == sixty_files_alone
    assert not _gone(tree)


@pytest.mark.parametrize(("count", "processes"), [(1, 2), (7, 2), (43, 2), (800, 2), (10, 3)])
def test_files_are_shared_out_in_order_in_shrinking_shares(count: int, processes: int) -> None:
    from gpudoctor.lint.workers import _shares

    paths = [f"f{i}.py" for i in range(count)]
    shares = list(_shares(paths, processes))
    assert [p for share in shares for p in share] == paths  # each once, in the order given
    sizes = [len(share) for share in shares]
    assert sizes == sorted(sizes, reverse=True) and sizes[-1] == 1
    assert sizes[0] <= max(1, count // (2 * processes))


def test_a_worker_that_cannot_start_reports_it_for_its_files_and_does_not_hang() -> None:
    """A pool whose initializer raises replaces the worker, which raises again, for ever:
    the initializer keeps the failure instead, and each file handed over reports it."""
    code = ("from gpudoctor.lint import file_analysis\nfrom gpudoctor.knowledge.processes import Target\n"
            "file_analysis.start_worker('.', Target(11), b'not a pickle')\n"
            "[(path, outcome)] = file_analysis.analyse_in_worker(['a.py'])\n"
            "print(path, outcome.errors[0].splitlines()[0])\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "a.py a.py: internal error: a worker could not start"



def _in_session(session: int) -> list[int]:
    found = []
    for pid in psutil.pids():
        with contextlib.suppress(OSError):
            if os.getsid(pid) == session:
                found.append(pid)
    return found


def test_no_process_of_a_run_outlives_it(tmp_path: Path) -> None:
    """The fork server and the resource tracker are stopped and waited for before gpudoctor
    exits: left to notice its end on their own, they outlived it by some milliseconds, and a
    tool that waits for a command's whole process group saw them."""
    _corpus(tmp_path, 40, padding_lines=60)  # over PARALLEL_MIN_BYTES: workers are used
    process = subprocess.Popen(
        [sys.executable, "-m", "gpudoctor", "lint", "--no-cache", "--jobs", "2", "-v", str(tmp_path)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    _, err = process.communicate(timeout=300)
    assert "in 2 worker processes" in err, err
    assert _in_session(process.pid) == []
