"""The plugin's pure parts: marker arguments, memory summaries, stack trimming."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from gpudoctor.pytest_plugin import hang_report, memory
from gpudoctor.pytest_plugin.markers import ForkSafe, HangTimeout, MarkerError, Plan, plan_for

MIB = 1 << 20


@dataclass
class Marker:
    name: str
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)


@dataclass
class Item:
    markers: dict[str, Marker]

    def get_closest_marker(self, name: str) -> Marker | None:
        return self.markers.get(name)


def _item(*markers: Marker) -> Item:
    return Item({m.name: m for m in markers})


def test_no_marker_means_no_plan() -> None:
    assert plan_for(_item()) is None


def test_marker_arguments_become_a_plan() -> None:
    plan = plan_for(_item(Marker("fork_safe", kwargs={"threads": True}), Marker("hang_timeout", (30,)),
                          Marker("gpu_memory_limit", ("2 GiB",)), Marker("gpu_memory_leak_limit", (64 * MIB,))))
    assert plan == Plan(ForkSafe(threads=True), HangTimeout(30.0), 2 << 30, 64 * MIB)
    assert plan.hang is not None and plan.hang.stall_threshold == 15.0
    assert HangTimeout(30.0, hang_after=3.0).stall_threshold == 3.0


def test_the_runs_settings_give_every_test_a_plan_its_markers_override() -> None:
    assert plan_for(_item(), hang_timeout=60.0) == Plan(hang=HangTimeout(60.0))
    assert plan_for(_item(), fork_safe=True) == Plan(fork_safe=ForkSafe())
    # The closest marker wins: a deadline of its own, or none at all (as pytest-timeout's timeout(0)).
    assert plan_for(_item(Marker("hang_timeout", (5,))), hang_timeout=60.0) == Plan(hang=HangTimeout(5.0))
    assert plan_for(_item(Marker("hang_timeout", (0,))), hang_timeout=60.0) is None
    assert plan_for(_item(Marker("fork_safe", (False,))), fork_safe=True) is None
    assert plan_for(_item(Marker("fork_safe", kwargs={"check": False})), fork_safe=True, hang_timeout=9.0) \
        == Plan(hang=HangTimeout(9.0))
    assert plan_for(_item(Marker("fork_safe", kwargs={"threads": True})), fork_safe=True) \
        == Plan(fork_safe=ForkSafe(threads=True))


def test_sizes_follow_the_probe_units() -> None:
    plan = plan_for(_item(Marker("gpu_memory_limit", ("1.5GB",))))
    assert plan is not None and plan.memory_limit == 1_500_000_000
    with pytest.raises(MarkerError, match="gpu_memory_limit: expected a size such as"):
        plan_for(_item(Marker("gpu_memory_limit", ("lots",))))


def test_peak_is_what_the_processes_held_at_the_same_time() -> None:
    rounds = [
        [0.0, {"0:10": 0}],  # before the window
        [1.0, {"0:10": 100 * MIB}],
        [2.0, {"0:10": 10 * MIB, "0:11": 200 * MIB}],
        [3.0, {"0:10": 300 * MIB}],
    ]
    use = memory.analyse(rounds, since=1.0, root=10, info={"11": {"ppid": 10, "cmdline": ["worker"]}})
    assert use.peak == 300 * MIB  # not 300 + 200: those were never held together
    assert (use.at_start, use.at_end, use.leaked) == (100 * MIB, 300 * MIB, 200 * MIB)
    assert [(p.pid, p.peak, p.role) for p in use.processes] == [
        (10, 300 * MIB, "test process"), (11, 200 * MIB, "child of 10: worker")]
    assert not use.hidden


def test_child_command_keeps_its_arguments_whatever_the_interpreter_path() -> None:
    # CI clones into a deeper directory than a laptop: a 60-character cut of the full command
    # showed only the virtualenv path, and the arguments that tell workers apart were lost.
    deep = "/check/" + "x" * 80 + "/.venv/bin/python"
    info = {"11": {"ppid": 10, "cmdline": [deep, "-c", "import time; time.sleep(600)"]}}
    use = memory.analyse([[0.0, {"0:11": MIB}]], since=0.0, root=10, info=info)
    assert use.processes[0].role == "child of 10: python -c import time; time.sleep(600)"
    long_args = {"11": {"ppid": 10, "cmdline": ["python", "-c", "x" * 200]}}
    role = memory.analyse([[0.0, {"0:11": MIB}]], since=0.0, root=10, info=long_args).processes[0].role
    assert role.endswith("…") and len(role) == len("child of 10: ") + 60


def test_hidden_per_process_memory_is_flagged() -> None:
    use = memory.analyse([[0.0, {"0:10": None}]], since=0.0, root=10, info={})
    assert use.hidden


def test_stacks_lose_pytest_frames_and_keep_the_innermost() -> None:
    text = "\n".join(["Thread 1 (idle)", "    wait (threading.py:320)", "    test_x (test_x.py:5)"]
                     + [f"    _multicall (pluggy/_execution.py:{n})" for n in range(40)]
                     + [f"    runtest (_pytest/python.py:{n})" for n in range(40)])
    trimmed = hang_report._stack(text)
    assert "pluggy" not in trimmed and "_pytest" not in trimmed
    assert trimmed.splitlines()[-1] == "    (80 frames of pytest itself not shown)"


FORK_WARNING = "This process (pid=4242) is multi-threaded, use of fork() may lead to deadlocks in the child."


def test_the_fork_warning_is_silenced_only_for_the_rescue_thread_and_only_for_one_fork() -> None:
    import warnings

    from gpudoctor.pytest_plugin import instrument

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        instrument._silence_rescue_warning(threads=2, ours=1)  # the rescue thread is the only other
        warnings.warn(FORK_WARNING, DeprecationWarning, stacklevel=1)
        instrument._unsilence()
        warnings.warn(FORK_WARNING, DeprecationWarning, stacklevel=1)  # the next fork warns again
        instrument._silence_rescue_warning(threads=3, ours=1)  # a thread of the test's own: warn
        warnings.warn(FORK_WARNING, DeprecationWarning, stacklevel=1)
        instrument._unsilence()
    assert len(caught) == 2


def test_the_rescue_thread_is_no_thread_of_the_test(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_fork="""
        import os
        import pytest

        @pytest.mark.fork_safe(threads=True)
        @pytest.mark.hang_timeout(60)
        def test_forks_alone():
            pid = os.fork()
            if pid == 0:
                os._exit(0)
            os.waitpid(pid, 0)
    """)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-W", "error::DeprecationWarning")
    result.assert_outcomes(passed=1)


def test_the_hang_report_names_the_causes_from_the_diagnosis_structure() -> None:
    from gpudoctor.probe.diagnosis import Diagnosis

    document = {"verdict": "hung", "explanation": "Hung: 2 process(es) ...",
                "processes": [{"pid": 5, "verdict": "hung", "start": "root"},
                              {"pid": 6, "verdict": "hung", "start": "fork"}],
                "causes": [{"kind": "fork-after-init", "certainty": "observed", "rule": "GD101",
                            "frameworks": ["tensorflow"], "parent": 5, "processes": [6]}]}
    failure = hang_report.hang_failure(3, Diagnosis.from_json(document), [], [])
    assert failure.reason == ("hang_timeout: still running after 3 s; 2 processes hung: pid 5, 6; "
                              "observed cause fork-after-init (GD101)")
    assert "cause: fork-after-init (GD101, observed); parent pid 5; pid 6" in failure.section[1].splitlines()


# A parent that starts one child when told to (a line on stdin), then says its PID. It is
# forked off and orphaned first (it says its own PID), as the test process is no ancestor
# of the watcher that follows it: the watcher leaves its own descendants out.
STARTS_A_CHILD = (
    "import os, subprocess, sys, time\n"
    "if os.fork():\n"
    "    os._exit(0)\n"
    "print(os.getpid(), flush=True)\n"
    "sys.stdin.readline()\n"
    "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
    "print(child.pid, flush=True)\n"
    "time.sleep(600)\n"
)


def test_the_test_tree_walks_the_process_table_only_when_a_process_was_created(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import os
    import signal
    import subprocess
    import sys

    from gpudoctor.probe import tree
    from gpudoctor.pytest_plugin import watch_tree

    walks: list[int] = []
    real_table = tree.process_table
    monkeypatch.setattr(watch_tree, "process_table", lambda: walks.append(1) or real_table())
    last_pid = [4242]  # what /proc/loadavg says: no process created while it stays
    monkeypatch.setattr(tree, "_last_pid", lambda: last_pid[0])
    launcher = subprocess.Popen([sys.executable, "-c", STARTS_A_CHILD], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True)
    assert launcher.stdin is not None and launcher.stdout is not None
    parent = int(launcher.stdout.readline())
    launcher.wait(60)
    child = None
    try:
        test_tree = watch_tree.TestTree(parent)
        walks.clear()
        assert [test_tree.members() for _ in range(10)] == [{parent}] * 10
        assert len(walks) <= 2  # the first walks confirm the last PID; then none while it stays
        launcher.stdin.write("\n")
        launcher.stdin.flush()
        child = int(launcher.stdout.readline())
        last_pid[0] = child  # a process was created: the next look walks the table
        assert test_tree.members() == {parent, child}
        assert len(walks) <= 3
    finally:
        for pid in (child, parent):
            if pid is not None:
                os.kill(pid, signal.SIGKILL)
        launcher.stdin.close()
        launcher.stdout.close()


def test_the_report_names_a_childs_program_after_its_exec(tmp_path: Any) -> None:
    """A child found between its fork and its exec (subprocess does both) had its parent's
    command line: the report names the program it then runs."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from gpudoctor.pytest_plugin import watch_tree
    from tests.probe.test_pieces import FORK_THEN_EXEC

    go = tmp_path / "go"
    # Detached: the watcher skips its own descendants, and a test's processes are not its.
    launcher = subprocess.Popen([sys.executable, "-c", FORK_THEN_EXEC, str(go), "detach"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True)
    assert launcher.stdin is not None and launcher.stdout is not None
    root = int(launcher.stdout.readline())
    launcher.wait(60)
    test_tree = watch_tree.TestTree(root)  # before the fork: the child is no pre-existing process
    launcher.stdin.write("\n")
    launcher.stdin.flush()
    child = int(launcher.stdout.readline())
    try:
        deadline = time.monotonic() + 60
        while child not in test_tree.members() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert child in test_tree.unexeced
        go.touch()
        deadline = time.monotonic() + 60
        while test_tree.info[child]["cmdline"] != ["sleep", "600"] and time.monotonic() < deadline:
            test_tree.members()
            time.sleep(0.02)
        assert test_tree.info[child]["cmdline"] == ["sleep", "600"] and child not in test_tree.unexeced
    finally:
        for pid in (child, root):
            os.kill(pid, signal.SIGKILL)
        launcher.stdin.close()
        launcher.stdout.close()
