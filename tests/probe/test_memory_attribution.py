"""Who held the memory of a run that ran out of it, on recorded runs: the ranking, and the
rule that names workers each holding a copy (equal workers, one big parent, mixed ones,
workers caught still loading, fork workers sharing or copying their parent's pages).

The real runs under the probe are in test_memory_copies.py.
"""

from __future__ import annotations

import json

from gpudoctor import hazards
from gpudoctor.probe import render_run
from gpudoctor.probe.diagnose import diagnose
from gpudoctor.probe.diagnosis import Diagnosis
from gpudoctor.probe.footprint import Footprint
from gpudoctor.probe.sampler import Peaks, Sample
from gpudoctor.probe.supervise import Limits, ProcessRun, RunRecord
from gpudoctor.probe.verdicts import StopReason, Verdict

MIB = 1 << 20
TRACKER = ("python", "-c", "from multiprocessing.resource_tracker import main;main(5)")


def _track(pid: int, ppid: int, rss: int, cmdline: tuple[str, ...] = ("python", "train.py"),
           code: int | None = None) -> ProcessRun:
    alive = code is None
    return ProcessRun(pid=pid, ppid=ppid, cmdline=cmdline, first_seen=0.0, last_seen=3.0, alive_at_stop=alive,
                      exit_code=code, stalled_for=0.0, state="running", wchan=None, threads=1,
                      rss_peak=rss * MIB, killed_by_supervisor=alive)


def _run(parent: int, workers: list[int], how: str = "spawn", stop: StopReason = StopReason.MEMORY_LIMIT,
         at_limit: dict[int, Footprint] | None = None, samples: list[Sample] | None = None,
         killed: int | None = None) -> RunRecord:
    """A parent (pid 100, ``parent`` MiB), a resource tracker and workers 101, 102, ... of
    the given peaks (MiB); worker ``killed`` died of a SIGKILL gpudoctor did not send."""
    pids = [101 + i for i in range(len(workers))]
    tracks = [_track(100, 1, parent), _track(99, 100, 12, TRACKER)]
    tracks += [_track(pid, 100, rss, code=-9 if pid == killed else None)
               for pid, rss in zip(pids, workers, strict=True)]
    if how == "fork":
        events = [{"event": "fork-child", "pid": pid, "ppid": 100, "t": 0.2, "threads_at_fork": 1,
                   "runtimes_at_fork": []} for pid in pids]
    else:
        events = [{"event": "start", "pid": pid, "ppid": 100, "t": 0.3, "how": how} for pid in pids]
    return RunRecord(
        command=("python", "train.py"), stop_reason=stop, signal_received=None, root_pid=100, exit_code=None,
        duration=3.0, limits=Limits(memory_limit=1 << 30), processes=tuple(tracks), events=events,
        samples=samples or [], peaks=Peaks({}, {}, {}, {}, None, ()), stacks={}, stdout="", stderr="",
        notes=(), at_memory_limit=at_limit or {})


def _round_trip(run: RunRecord) -> Diagnosis:
    """Diagnose, write the report and read it back: what the HTML page and the plugin see."""
    diagnosis = diagnose(run)
    document = json.loads(json.dumps(render_run.to_json(run, diagnosis)))
    again = Diagnosis.from_json(document)
    assert again.memory == diagnosis.memory
    return diagnosis


def test_four_equal_spawn_workers_are_each_a_copy_with_their_parent_ranked_first() -> None:
    diagnosis = _round_trip(_run(260, [250, 240, 245, 255]))
    assert diagnosis.verdict == Verdict.OOM
    memory = diagnosis.memory
    assert memory is not None and memory.total == (260 + 12 + 250 + 240 + 245 + 255) * MIB
    assert [(h.pid, h.role) for h in memory.processes] == [
        (100, "parent"), (104, "spawn worker 4"), (101, "spawn worker 1"), (103, "spawn worker 3"),
        (102, "spawn worker 2"), (99, "resource tracker")]
    assert memory.workers is not None
    assert (memory.workers.processes, memory.workers.copies, memory.workers.parent) == ((101, 102, 103, 104), True, 100)
    lines = diagnosis.explanation.splitlines()
    assert "Memory by process (peak RSS, 1.2 GiB in all):" in lines
    assert "  pid 100 (parent) 260.0 MiB (21%)" in lines
    assert ("4 spawn workers × ~247.5 MiB (each its own copy: together 990.0 MiB of the 1.2 GiB; their parent, "
            "pid 100, holds 260.0 MiB too: 5 copies in all).") in lines
    assert hazards.WORKERS_EACH_A_COPY.fix_line in lines
    [cause] = diagnosis.causes
    assert (cause.kind, cause.certainty, cause.rule, cause.parent, cause.processes) == (
        "workers-each-a-copy", "observed", None, 100, (101, 102, 103, 104))
    assert cause.fix == hazards.WORKERS_EACH_A_COPY.fix


def test_one_big_parent_and_small_workers_is_no_copy() -> None:
    diagnosis = _round_trip(_run(900, [60, 58, 61, 59]))
    memory = diagnosis.memory
    assert memory is not None and memory.workers is None
    assert memory.processes[0].pid == 100 and memory.processes[0].share > 0.7
    assert "each its own copy" not in diagnosis.explanation
    assert not any(c.kind == "workers-each-a-copy" for c in diagnosis.causes)


def test_workers_of_different_sizes_are_no_group() -> None:
    diagnosis = _round_trip(_run(50, [400, 150, 90, 60]))
    assert diagnosis.memory is not None and diagnosis.memory.workers is None
    assert "workers ×" not in diagnosis.explanation


def test_two_of_four_workers_alike_and_the_rest_small_name_only_those_two() -> None:
    diagnosis = _round_trip(_run(40, [400, 390, 30, 20]))
    workers = diagnosis.memory.workers if diagnosis.memory else None
    assert workers is not None and workers.processes == (101, 102) and workers.siblings == 4
    assert "2 of pid 100's 4 spawn workers × ~395.0 MiB (each its own copy" in diagnosis.explanation


def test_workers_caught_still_loading_count_among_the_copies() -> None:
    # Workers 103 and 104 were loading when the limit was passed: their last samples rise.
    samples = [Sample(t, "rss", size * MIB, pid=pid, in_tree=True)
               for pid, sizes in ((103, (12, 60, 130)), (104, (12, 90)))
               for t, size in zip((0.5, 1.0, 1.5), sizes, strict=False)]
    diagnosis = _round_trip(_run(250, [245, 250, 130, 90], samples=samples))
    workers = diagnosis.memory.workers if diagnosis.memory else None
    assert workers is not None and workers.processes == (101, 102, 103, 104)
    assert workers.growing == ((103, 130 * MIB), (104, 90 * MIB))
    assert "pids 103, 104 were still growing, at 130.0 MiB, 90.0 MiB, when memory ran out" in diagnosis.explanation


def test_fork_workers_that_share_their_parents_pages_are_not_copies() -> None:
    shared = {pid: Footprint(300 * MIB, 70 * MIB, 8 * MIB) for pid in (101, 102, 103, 104)}
    shared[100] = Footprint(300 * MIB, 70 * MIB, 20 * MIB)
    diagnosis = _round_trip(_run(300, [300, 300, 300, 300], how="fork", at_limit=shared))
    workers = diagnosis.memory.workers if diagnosis.memory else None
    assert workers is not None and workers.copies is False
    assert "4 fork workers × ~300.0 MiB resident, most of it shared with their parent (each one's own: ~8.0 MiB" \
        in diagnosis.explanation
    assert not any(c.kind == "workers-each-a-copy" for c in diagnosis.causes)


def test_fork_workers_that_copied_their_parents_pages_are_copies_in_the_making() -> None:
    copied = {101: Footprint(300 * MIB, 200 * MIB, 150 * MIB), 102: Footprint(300 * MIB, 180 * MIB, 120 * MIB),
              103: Footprint(300 * MIB, 160 * MIB, 100 * MIB), 104: Footprint(300 * MIB, 150 * MIB, 90 * MIB),
              100: Footprint(300 * MIB, 120 * MIB, 40 * MIB)}
    diagnosis = _round_trip(_run(300, [300, 300, 300, 300], how="fork", at_limit=copied))
    workers = diagnosis.memory.workers if diagnosis.memory else None
    assert workers is not None and (workers.measure, workers.copies) == ("uss", True)
    assert workers.total == (200 + 180 + 160 + 150 + 120) * MIB and workers.together == 460 * MIB
    assert ("4 fork workers × 90.0 MiB to 150.0 MiB of their own (each its own copy: its USS at --memory-limit, "
            "pages no other process shares: what the worker loaded itself, or its parent's (pid 100, 300.0 MiB) "
            "pages that copy-on-write copied for it as it wrote to them; each maps ~300.0 MiB in all)") \
        in diagnosis.explanation
    assert "together 460.0 MiB of the tree's 810.0 MiB counted once (PSS)" in diagnosis.explanation
    assert [c.kind for c in diagnosis.causes] == ["workers-each-a-copy"]


def test_fork_workers_without_their_own_memory_read_are_not_called_copies() -> None:
    # Killed by the kernel's OOM killer (a SIGKILL gpudoctor did not send): no USS was read.
    run = _run(300, [300, 300, 300, 300], how="fork", stop=StopReason.EXITED, killed=102)
    diagnosis = _round_trip(run)
    workers = diagnosis.memory.workers if diagnosis.memory else None
    assert workers is not None and workers.copies is None
    assert "how much of it each held alone was not measured" in diagnosis.explanation
    assert not any(c.kind == "workers-each-a-copy" for c in diagnosis.causes)


def test_a_spawn_worker_killed_from_outside_names_the_copies_as_likely() -> None:
    diagnosis = _round_trip(_run(250, [250, 245, 250, 240], stop=StopReason.EXITED, killed=103))
    assert [(c.kind, c.certainty) for c in diagnosis.causes if c.kind == "workers-each-a-copy"] == [
        ("workers-each-a-copy", "likely")]


def test_a_run_that_did_not_run_out_of_memory_has_no_attribution() -> None:
    diagnosis = _round_trip(_run(250, [250, 245, 250, 240], stop=StopReason.EXITED))
    assert diagnosis.memory is None and "Memory by process" not in diagnosis.explanation


def test_a_sigkill_the_oom_counter_did_not_see_is_no_memory_story() -> None:
    run = _run(250, [250, 245, 250, 240], stop=StopReason.EXITED, killed=103)
    diagnosis = _round_trip(RunRecord(**{**run.__dict__, "oom_kills": 0}))
    assert diagnosis.memory is None and not diagnosis.causes


def test_the_resource_tracker_is_neither_oom_nor_hung() -> None:
    # It waits for its parent by design and holds none of the work's memory: the memory
    # ranking still lists it, the verdicts do not count it among the processes that ran out.
    for stop in (StopReason.MEMORY_LIMIT, StopReason.HUNG):
        diagnosis = diagnose(_run(260, [250, 240, 245, 255], stop=stop))
        [tracker] = [p for p in diagnosis.processes if p.pid == 99]
        assert tracker.verdict == Verdict.KILLED and "resource tracker" in tracker.explanation
    diagnosis = diagnose(_run(260, [250, 240, 245, 255]))
    assert sum(1 for p in diagnosis.processes if p.verdict == Verdict.OOM) == 5
