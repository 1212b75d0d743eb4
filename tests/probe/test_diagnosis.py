"""The diagnosis as a typed value: verdicts and stop reasons are words that compare and
serialize as text, and the JSON report reads back into the same diagnosis."""

from __future__ import annotations

import json

from gpudoctor import hazards
from gpudoctor.probe import render_run
from gpudoctor.probe.diagnose import diagnose
from gpudoctor.probe.diagnosis import Diagnosis, ErrorMatch, ProcessVerdict
from gpudoctor.probe.sampler import Peaks
from gpudoctor.probe.supervise import Limits, ProcessRun, RunRecord
from gpudoctor.probe.verdicts import StopReason, Verdict


def _track(pid: int, ppid: int, stalled: float, alive: bool = True, code: int | None = None) -> ProcessRun:
    return ProcessRun(pid=pid, ppid=ppid, cmdline=("python", "train.py"), first_seen=0.0, last_seen=6.0,
                      alive_at_stop=alive, exit_code=code, stalled_for=stalled, state="sleeping",
                      wchan="futex_wait_queue", threads=1, rss_peak=200 << 20, killed_by_supervisor=alive)


def _fork(pid: int, t: float, threads: int, runtimes: list[str]) -> dict[str, object]:
    return {"event": "fork-child", "pid": pid, "ppid": 100, "t": t, "threads_at_fork": threads,
            "runtimes_at_fork": runtimes}


def _hung_run(runtimes: list[str], threads: int = 9) -> RunRecord:
    """The shape of the TensorFlow fork hang: a parent waits on two fork workers, all still."""
    return RunRecord(
        command=("python", "train.py"), stop_reason=StopReason.HUNG, signal_received=None, root_pid=100,
        exit_code=None, duration=6.2, limits=Limits(hang_after=3.0),
        processes=(_track(100, 1, 5.1), _track(101, 100, 5.0), _track(102, 100, 5.0)),
        events=[_fork(101, 0.4, threads, runtimes), _fork(102, 0.4, threads, runtimes)],
        samples=[], peaks=Peaks({}, {}, {}, {}, None, ()), stacks={}, stdout="", stderr="", notes=())


def test_verdicts_and_stop_reasons_are_their_words() -> None:
    assert Verdict.HUNG == "hung" and StopReason.MEMORY_LIMIT == "memory-limit"
    assert f"{Verdict.OK}" == str(Verdict.OK) == "ok" and f"{StopReason.EXITED:>8}" == "  exited"
    assert json.dumps({"verdict": Verdict.OOM}) == '{"verdict": "oom"}'
    assert Verdict("crashed") is Verdict.CRASHED and {"ok": 1}[Verdict.OK] == 1


def test_a_hang_after_fork_is_judged_and_explained_with_the_catalogues_sentences() -> None:
    diagnosis = diagnose(_hung_run(["tensorflow"]))
    assert (diagnosis.verdict, diagnosis.stop_reason) == (Verdict.HUNG, StopReason.HUNG)
    assert [p.verdict for p in diagnosis.processes] == [Verdict.HUNG] * 3
    assert hazards.why_for(hazards.FORK_AFTER_INIT, ["tensorflow"]) in diagnosis.explanation.splitlines()
    assert diagnosis.explanation.splitlines()[-1] == hazards.FORK_AFTER_INIT.fix_line
    threads_only = diagnose(_hung_run([], threads=4)).explanation.splitlines()
    assert hazards.MULTITHREADED_FORK.why in threads_only
    assert threads_only[-1] == hazards.MULTITHREADED_FORK.fix_line
    assert hazards.FORK_AFTER_INIT.why not in threads_only


def test_the_report_reads_back_into_the_same_diagnosis() -> None:
    run = _hung_run(["tensorflow", "cuda-driver"])
    diagnosis = diagnose(run)
    text = json.dumps(render_run.to_json(run, diagnosis))
    assert Diagnosis.from_json(json.loads(text)) == diagnosis


def test_every_field_survives_the_round_trip() -> None:
    process = ProcessVerdict(pid=7, ppid=3, cmdline=("python", "-c", "x"), start="fork", verdict=Verdict.OOM,
                             exit_code=1, threads_at_fork=4, runtimes_at_fork=("jax:cuda",), forked_at=0.25,
                             stalled_for=0.0, wchan=None, blocked_in="jax (x.py:3)", stack="Thread 1 ...",
                             stack_source="py-spy", rss_peak=1 << 30, gpu_memory_peak={0: 15 << 30, 1: None},
                             explanation="exited with status 1 after an out-of-memory error",
                             fatal_error=None)
    match = ErrorMatch(8, "JAX", "cause", "gpu-oom", "RESOURCE_EXHAUSTED: Out of memory while trying to allocate")
    diagnosis = Diagnosis(Verdict.OOM, 1, "Cause: JAX/XLA ran out of GPU memory", (process,), (match,),
                          StopReason.EXITED)
    document = json.loads(json.dumps(diagnosis.to_json()))
    assert document["processes"][0]["gpu_memory_peak"] == {"0": 15 << 30, "1": None}
    assert document["verdict"] == "oom" and type(diagnosis.to_json()["verdict"]) is str
    assert Diagnosis.from_json(document) == diagnosis


def test_reading_back_ignores_unknown_keys_and_defaults_missing_ones() -> None:
    """A field a later version adds, and one an earlier version did not write, both read."""
    document = {"verdict": "hung", "explanation": "Hung: ...", "cause": "fork-after-init", "rule": "GD101",
                "processes": [{"pid": 5, "verdict": "hung", "children": [6, 7], "framework": "tensorflow"}]}
    diagnosis = Diagnosis.from_json(document)
    assert (diagnosis.verdict, diagnosis.exit_code, diagnosis.stop_reason, diagnosis.matches) == \
        (Verdict.HUNG, None, None, ())
    (process,) = diagnosis.processes
    assert (process.pid, process.verdict, process.start, process.cmdline, process.gpu_memory_peak) == \
        (5, Verdict.HUNG, "unknown", (), {})


def _cut_short(reason: StopReason, idle: float) -> RunRecord:
    """The TensorFlow fork hang stopped by Ctrl-C or --timeout before --hang-after 30 s."""
    return RunRecord(
        command=("python", "train.py"), stop_reason=reason, signal_received=2 if reason == "interrupted" else None,
        root_pid=100, exit_code=-15, duration=9.0, limits=Limits(hang_after=30.0, timeout=9.0),
        processes=(_track(100, 1, idle), _track(101, 100, idle), _track(102, 100, idle)),
        events=[_fork(101, 0.4, 9, ["tensorflow"]), _fork(102, 0.4, 9, ["tensorflow"])],
        samples=[], peaks=Peaks({}, {}, {}, {}, None, ()), stacks={}, stdout="", stderr="", notes=(),
        signal_at=8.9 if reason == "interrupted" else None)


def test_a_hang_cut_short_by_ctrl_c_or_timeout_gives_the_cause_and_fix_as_likely() -> None:
    for reason in (StopReason.INTERRUPTED, StopReason.TIMEOUT):
        diagnosis = diagnose(_cut_short(reason, idle=4.2))
        assert diagnosis.verdict == Verdict.KILLED
        lines = diagnosis.explanation.splitlines()
        assert any(line.startswith("Likely hung: 3 processes were idle for 4.2 s") for line in lines), lines
        assert "short of --hang-after 30 s" in diagnosis.explanation
        assert hazards.why_for(hazards.FORK_AFTER_INIT, ["tensorflow"]) in lines
        assert lines[-1] == hazards.FORK_AFTER_INIT.fix_line
        worker = diagnosis.processes[1]
        assert "likely hung" in worker.explanation and "not hung" not in worker.explanation
        (cause,) = diagnosis.causes
        assert (cause.kind, cause.rule, cause.certainty, cause.frameworks, cause.parent, cause.processes) == \
            ("fork-after-init", "GD101", "likely", ("tensorflow",), 100, (101, 102))
        assert cause.fix == hazards.FORK_AFTER_INIT.fix
        assert "pid 101 was idle (waiting with no CPU progress) for 4.2 s" in cause.evidence


def test_busy_processes_cut_short_are_no_hang_but_the_fork_is_a_latent_cause() -> None:
    diagnosis = diagnose(_cut_short(StopReason.INTERRUPTED, idle=0.2))
    assert "Likely hung" not in diagnosis.explanation
    assert "still running (not hung)" in diagnosis.processes[1].explanation
    assert "Nothing waited yet when the tree was stopped" in diagnosis.explanation
    assert [(c.kind, c.certainty) for c in diagnosis.causes] == [("fork-after-init", "latent")]


def test_a_proven_hang_has_an_observed_cause_and_the_json_carries_schema_and_causes() -> None:
    run = _hung_run(["tensorflow"])
    diagnosis = diagnose(run)
    (cause,) = diagnosis.causes
    assert (cause.kind, cause.certainty, cause.processes) == ("fork-after-init", "observed", (101, 102))
    document = json.loads(json.dumps(render_run.to_json(run, diagnosis, {"python": "3.11"})))
    assert document["schema_version"] == 1 and document["machine"] == {"python": "3.11"}
    assert document["causes"][0]["rule"] == "GD101" and document["causes"][0]["parent"] == 100
    assert Diagnosis.from_json(document).causes == diagnosis.causes
    threads_only = diagnose(_hung_run([], threads=4)).causes
    assert [(c.kind, c.rule) for c in threads_only] == [("multithreaded-fork", "GD102")]


def _waiting_on_busy_workers(reason: StopReason) -> RunRecord:
    """A spawn pool's parent and resource tracker idle for 12 s while both workers still
    compute (import TensorFlow on a loaded machine) when the deadline or Ctrl-C came."""
    def busy(pid: int) -> ProcessRun:
        return ProcessRun(pid=pid, ppid=100, cmdline=("python", "-c", "from multiprocessing.spawn import spawn_main"),
                          first_seen=0.5, last_seen=30.0, alive_at_stop=True, exit_code=None, stalled_for=0.0,
                          state="running", wchan=None, threads=3, rss_peak=300 << 20, killed_by_supervisor=True)
    return RunRecord(
        command=("python", "safe.py"), stop_reason=reason, signal_received=2 if reason == "interrupted" else None,
        root_pid=100, exit_code=-15, duration=30.0, limits=Limits(hang_after=3.0, timeout=30.0),
        processes=(_track(100, 1, 12.0), _track(101, 100, 12.0), busy(102), busy(103)),
        events=[], samples=[], peaks=Peaks({}, {}, {}, {}, None, ()), stacks={}, stdout="", stderr="", notes=())


def test_a_parent_waiting_on_busy_workers_at_the_deadline_is_not_hung() -> None:
    for reason in (StopReason.TIMEOUT, StopReason.INTERRUPTED):
        diagnosis = diagnose(_waiting_on_busy_workers(reason))
        assert diagnosis.verdict == Verdict.KILLED, diagnosis.explanation
        assert Verdict.HUNG not in {p.verdict for p in diagnosis.processes}
        assert "Likely hung" not in diagnosis.explanation and diagnosis.causes == ()
        assert "Busy, not hung: pids 102, 103 were making CPU progress; pids 100, 101 waited" \
            in diagnosis.explanation
        parent = diagnosis.processes[0]
        assert "while pids 102, 103 made CPU progress: waiting, not hung" in parent.explanation


def test_idle_fork_children_beside_a_busy_one_are_no_likely_hang() -> None:
    run = _cut_short(StopReason.INTERRUPTED, idle=4.2)
    worker = run.processes[2]
    busy_worker = ProcessRun(**{**worker.__dict__, "stalled_for": 0.0, "state": "running"})
    diagnosis = diagnose(RunRecord(**{**run.__dict__, "processes": (*run.processes[:2], busy_worker)}))
    assert "Likely hung" not in diagnosis.explanation
    assert "Busy, not hung: pid 102 was making CPU progress" in diagnosis.explanation
    assert "The tree was still busy when it was stopped" in diagnosis.explanation
    assert [(c.kind, c.certainty) for c in diagnosis.causes] == [("fork-after-init", "latent")]


def test_a_cpu_only_fork_freeze_is_explained_without_cuda_and_a_cuda_one_names_only_whats_there() -> None:
    cpu = diagnose(_hung_run(["tensorflow"])).explanation
    assert "CUDA context" not in cpu and "PyTorch" not in cpu and "CuPy" not in cpu
    assert "TensorFlow's intra-op thread pool does not survive `fork()`" in cpu
    assert "the child's ops wait for ever" in cpu
    cuda = diagnose(_hung_run(["torch.cuda", "cuda-driver"])).explanation
    assert "A CUDA context does not survive `fork()`" in cuda
    assert "PyTorch raises \"Cannot re-initialize CUDA in forked subprocess\"" in cuda
    assert not any(name in cuda for name in ("CuPy", "Numba", "TensorFlow", "JAX", "intra-op"))
    both = diagnose(_hung_run(["tensorflow", "cuda-driver"])).explanation
    assert "CUDA context" in both and "TensorFlow aborts or hangs" in both and "PyTorch" not in both


def test_the_sentences_agree_with_one_process_and_one_thread() -> None:
    run = _hung_run(["tensorflow"], threads=1)
    single = RunRecord(**{**run.__dict__, "processes": run.processes[:2], "events": run.events[:1]})
    lines = diagnose(single).explanation.splitlines()
    assert lines[0].startswith("Hung: 2 processes waited")
    assert "101 was forked at t=0.4 s from pid 100, which had TensorFlow initialized and 1 native thread at " \
        "the fork." in lines
    assert "100 waits for it (e.g. Pool.map waiting for results)." in lines
    assert not any(word in line for line in lines for word in ("(es)", "(s)", "1 native threads", "101 were"))
