"""``gpudoctor probe --record DIR`` on each node and ``gpudoctor report DIR``: one verdict for
a job run with one probe per machine.

The merge is tested first from small hand-written records (no torch, no processes):
the story across nodes, the first failure by the wall clock, a failure that is the
effect of gpudoctor stopping another node, and every kind of bad input, which must be
one line and exit 2. Then for real: two "nodes" on this machine, each a probe
supervising ``torch.distributed.run --nnodes 2 --node-rank N`` with a c10d rendezvous on
a free port of localhost, side by side. A hang is each probe's own verdict after
--hang-after seconds in which nothing of its tree made CPU progress; a failed rank ends
both nodes by itself. Nothing waits on a fixed sleep; the deadlines are bounds only a
stuck run reaches.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gpudoctor.cli import main
from gpudoctor.probe.node_record import RECORD_KIND, RECORD_VERSION, file_name
from tests.probe.helpers import marked, running, script, wait_gone
from tests.probe.test_distributed import BARRIER_SKIPPED, _line, _torch_missing

PY = sys.executable
TIMEOUT = 120


# -- hand-written records -----------------------------------------------------------------


def _rank(pid: int, rank: int, *, verdict: str = "hung", waiting: bool = True, collective: str | None = None,
          function: str | None = None, at: str | None = None, condition: dict[str, Any] | None = None,
          failed_at: float | None = None, exception: str | None = None, job: str = "MASTER_PORT=29500",
          exit_code: int | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """A rank's entry and its process in a record."""
    place = None if function is None and collective is None else {
        "collective": collective, "function": function, "at": at, "condition": condition, "from": "stack"}
    entry = {"pid": pid, "rank": rank, "local_rank": 0, "world_size": 2, "job": job, "waiting": waiting,
             "failed": failed_at is not None, "failed_at": failed_at, "traceback": [],
             "stopped_from_outside": False, "stopped_by_gpudoctor": False, "place": place}
    process = {"pid": pid, "ppid": pid - 1, "start": "exec", "verdict": verdict, "exit_code": exit_code,
               "rank": rank, "local_rank": 0, "world_size": 2, "explanation": "hung" if exception is None
               else f"exited with status 1: {exception}", "exception": exception,
               "exception_at": None if exception is None else f"main ({at})"}
    return entry, process


def _record(folder: Path, host: str, started_at: float, ranks: list[tuple[dict[str, Any], dict[str, Any]]],
            verdict: str = "hung", stop_reason: str = "hung", stop_at: float = 10.0, probe_pid: int = 100) -> Path:
    launcher = {"pid": ranks[0][1]["pid"] - 1, "ppid": 1, "start": "root", "verdict": "hung", "launches_ranks": True,
                "cmdline": ["python", "-m", "torch.distributed.run"]}
    samples = [{"kind": "rss", "t": t, "pid": e["pid"], "bytes": 100 << 20, "cpu": 0.5, "in_tree": True}
               for e, _ in ranks for t in (1.0, 2.0, 3.0)]
    record = {"kind": RECORD_KIND, "record_version": RECORD_VERSION, "host": host, "probe_pid": probe_pid,
              "started_at": started_at, "batch_job": None, "launcher": {"pid": launcher["pid"], "name": "torchrun"},
              "ranks": [e for e, _ in ranks],
              "run": {"schema_version": 1, "command": ["torchrun", "train.py"], "verdict": verdict, "exit_code": 1,
                      "explanation": f"{verdict.capitalize()}: node {host}.", "stop_reason": stop_reason,
                      "duration": stop_at + 1.0, "stop_at": stop_at,
                      "processes": [launcher, *(p for _, p in ranks)], "matches": [], "causes": [],
                      "events": [], "samples": samples, "notes": []}}
    path = folder / file_name(host, probe_pid)
    path.write_text(json.dumps(record))
    return path


IF_RANK = {"text": "if rank == 0:", "line": 52, "in_else": False, "at": "train.py:55"}


def _report(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["report", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_hang_across_two_nodes_is_told_rank_by_rank_with_each_ranks_node(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _record(tmp_path, "a", 1000.0, [_rank(11, 0, function="save_checkpoint", at="train.py:55", condition=IF_RANK)])
    _record(tmp_path, "b", 1000.4, [_rank(21, 1, collective="barrier", at="train.py:40",
                                           condition={**IF_RANK, "in_else": True, "at": "train.py:40"})])
    code, out, err = _report(capsys, str(tmp_path), "--json")
    assert (code, err) == (1, "")
    doc = json.loads(out)
    lines = doc["explanation"].splitlines()
    assert doc["verdict"] == "hung"
    assert ("Rank 1 (node b) waits in `barrier` at train.py:40 in the `else` of `if rank == 0:` (line 52); "
            "rank 0 (node a) is in `save_checkpoint` at train.py:55 under `if rank == 0:` (line 52).") in lines
    assert any(line.startswith("Rank 1 (node b) waits for rank 0 (node a), which never reaches `barrier`.")
               for line in lines), lines
    assert [(c["kind"], c["certainty"], c["processes"]) for c in doc["causes"]] == [
        ("collective-not-reached", "observed", [11])]
    assert [(r["rank"], r["node"], r["collective"]) for r in doc["ranks"]] == [(0, "a", None), (1, "b", "barrier")]
    assert [n["started_at"] for n in doc["nodes"]] == [0.0, 0.4]
    # The terminal says the same.
    code, out, _ = _report(capsys, str(tmp_path))
    assert code == 1 and "verdict: hung" in out and "rank 0 (node a) is in `save_checkpoint`" in out


def test_a_rank_held_up_before_a_collective_every_rank_calls_is_not_blamed_on_a_rank_test(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The barrier after the ``if`` (every rank calls it), rank 0 blocked in a call under the
    test that never returns: the cause is that call, and no rule of the linter's."""
    _record(tmp_path, "a", 1000.0, [_rank(11, 0, function="upload_metrics", at="train.py:12",
                                           condition={**IF_RANK, "at": "train.py:26"})])
    _record(tmp_path, "b", 1000.2, [_rank(21, 1, collective="barrier", at="train.py:27")])
    code, out, _ = _report(capsys, str(tmp_path), "--json")
    doc = json.loads(out)
    assert code == 1 and [(c["kind"], c["rule"]) for c in doc["causes"]] == [("rank-held-up", None)]
    assert "find why that call never returns" in doc["explanation"]
    assert "move it out of the rank test" not in doc["explanation"]


def test_the_first_failure_by_the_wall_clock_is_the_cause_whatever_each_nodes_own_clock_says(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Node b started 1 s later: its rank failed at its t=2.0 (wall 1003.0), after rank 0's
    # t=2.5 on node a (wall 1002.5), though its own t is smaller.
    _record(tmp_path, "a", 1000.0, [_rank(11, 0, verdict="crashed", waiting=False, failed_at=2.5, exit_code=1,
                                         exception="FileNotFoundError: shard-0.pt", at="train.py:9")],
            verdict="crashed", stop_reason="exited", stop_at=3.0)
    _record(tmp_path, "b", 1001.0, [_rank(21, 1, verdict="crashed", waiting=False, failed_at=2.0, exit_code=1,
                                         exception="RuntimeError: Connection closed by peer", at="train.py:12")],
            verdict="crashed", stop_reason="exited", stop_at=3.0)
    code, out, _ = _report(capsys, str(tmp_path), "--json")
    doc = json.loads(out)
    lines = doc["explanation"].splitlines()
    assert (code, doc["verdict"]) == (1, "crashed")
    first = next(line for line in lines if "failed first" in line)
    assert first.startswith("Rank 0 (node a, pid 11) failed first at t=2.5 s: exited with status 1: "
                            "FileNotFoundError: shard-0.pt"), lines
    assert any(line.startswith("Rank 1 (node b, pid 21) failed after it at t=3.0 s") for line in lines), lines
    assert [(c["kind"], c["processes"]) for c in doc["causes"]] == [("rank-failed", [11, 21])]


def test_a_rank_that_fails_after_gpudoctor_stopped_another_node_is_the_effect_of_the_stop(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _record(tmp_path, "a", 1000.0, [_rank(11, 0, function="save_checkpoint", at="train.py:55", condition=IF_RANK)],
            stop_at=5.0)
    _record(tmp_path, "b", 1000.0, [_rank(21, 1, verdict="crashed", waiting=False, failed_at=5.5, exit_code=1,
                                         collective="barrier", at="train.py:40",
                                         condition={**IF_RANK, "in_else": True, "at": "train.py:40"},
                                         exception="RuntimeError: Connection closed by peer")],
            verdict="crashed", stop_reason="exited", stop_at=6.0)
    code, out, _ = _report(capsys, str(tmp_path), "--json")
    doc = json.loads(out)
    lines = doc["explanation"].splitlines()
    assert (code, doc["verdict"]) == (1, "hung"), lines
    assert any(line.startswith("Rank 1 (node b) waits in `barrier` at train.py:40") for line in lines), lines
    assert any(line.startswith("Rank 1 (node b) then failed (RuntimeError: Connection closed by peer) after gpudoctor "
                               "began to stop node a at t=5.0 s: the effect of that stop") for line in lines), lines
    assert doc["causes"][0]["kind"] == "collective-not-reached"


def test_the_html_page_has_a_lane_per_rank_across_the_nodes(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib")
    records = tmp_path / "records"
    records.mkdir()
    _record(records, "a", 1000.0, [_rank(11, 0, function="save_checkpoint", at="train.py:55", condition=IF_RANK)])
    _record(records, "b", 1000.4, [_rank(11, 1, collective="barrier", at="train.py:40")])  # the same pid, elsewhere
    page = tmp_path / "job.html"
    code, out, _ = _report(capsys, str(records), "--html", str(page))
    assert code == 1 and f"HTML report: {page}" in out
    html = page.read_text()
    assert "rank 0 · a" in html and "rank 1 · b" in html
    assert 'id="job-cpu-11"' in html and 'id="job-cpu-20000011"' in html  # two lanes, though the pids repeat
    assert "seconds since the first node&#x27;s start" in html or "seconds since the first node's start" in html


def _one_line_error(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    code, out, err = _report(capsys, *args)
    assert (code, out) == (2, ""), err
    assert err.startswith("gpudoctor: error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    return err


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert "no such directory" in _one_line_error(capsys, str(tmp_path / "missing"))
    (tmp_path / "file").write_text("x")
    assert "not a directory" in _one_line_error(capsys, str(tmp_path / "file"))
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "report.html").write_text("<html>")  # not a record's name: not read
    (empty / ".vm-1.json.abc.tmp").write_text("{")  # a record being written
    assert "no records in it" in _one_line_error(capsys, str(empty))
    for name, text, said in (("other.json", '{"a": 1}', "not a gpudoctor record"),
                             ("text.json", "hello", "not JSON"),
                             ("newer.json", json.dumps({"kind": RECORD_KIND, "record_version": 99}), "newer"),
                             ("partial.json", json.dumps({"kind": RECORD_KIND, "record_version": 1}),
                              "an incomplete gpudoctor record")):
        folder = tmp_path / name.removesuffix(".json")
        folder.mkdir()
        (folder / name).write_text(text)
        err = _one_line_error(capsys, str(folder))
        assert name in err and said in err, err
    truncated = tmp_path / "truncated"
    truncated.mkdir()
    whole = _record(truncated, "a", 1000.0, [_rank(11, 0, function="f", at="t.py:1")])
    whole.write_text(whole.read_text()[:300])
    err = _one_line_error(capsys, str(truncated))
    assert "a-100.json: truncated" in err, err


def test_records_of_different_jobs_or_runs_are_refused_naming_them(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    _record(jobs, "a", 1000.0, [_rank(11, 0, function="f", at="t.py:1", job="MASTER_PORT=29500")])
    _record(jobs, "b", 1000.0, [_rank(21, 1, collective="barrier", at="t.py:2", job="MASTER_PORT=29600")])
    err = _one_line_error(capsys, str(jobs))
    assert "records of different jobs: a-100.json (MASTER_PORT=29500) and b-100.json (MASTER_PORT=29600)" in err
    runs = tmp_path / "runs"
    runs.mkdir()
    _record(runs, "a", 1000.0, [_rank(11, 0, function="f", at="t.py:1")])
    _record(runs, "a", 2000.0, [_rank(31, 0, function="f", at="t.py:1")], probe_pid=200)
    err = _one_line_error(capsys, str(runs))
    assert "records of different runs: rank 0 is in both a-100.json and a-200.json" in err


def test_record_needs_a_command_and_a_usable_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["probe", "--record", str(tmp_path)]) == 2
    assert "--record needs a command" in capsys.readouterr().err
    (tmp_path / "file").write_text("x")
    assert main(["probe", "--record", str(tmp_path / "file"), "--", PY, "-c", "pass"]) == 2
    assert "not a directory" in capsys.readouterr().err


# -- for real: two nodes of a torchrun job on this machine ----------------------------------

# (BARRIER_SKIPPED, the program of a rank that skips a barrier, is the single-node tests'.)

RANK_1_RAISES = """\
import torch.distributed as dist


def load_shard(rank):
    raise FileNotFoundError(f"shard-{rank}.pt")  # RAISE


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    if rank == 1:
        load_shard(rank)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _two_nodes(tmp_path: Path, name: str, source: str) -> Path:
    """Run the job as two nodes, a probe each, side by side; return the records' directory."""
    missing = _torch_missing()
    if missing:
        pytest.skip(missing)
    path = script(tmp_path, name, source)
    records = tmp_path / "records"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    port = _free_port()
    probes = [subprocess.Popen(
        [PY, "-m", "gpudoctor", "probe", "--quiet", "--record", str(records), "--timeout", str(TIMEOUT),
         "--hang-after", "4", "--", PY, "-m", "torch.distributed.run", "--nnodes", "2", "--node-rank", str(node),
         "--nproc-per-node", "1", "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}", str(path)],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for node in (0, 1)]
    outputs = [p.communicate(timeout=TIMEOUT + 60)[0] for p in probes]
    assert all(p.returncode == 1 for p in probes), outputs
    assert len(list(records.glob("*.json"))) == 2, outputs
    return records


def _stacks(records: Path) -> list[tuple[Any, ...]]:
    """Each rank's place and last stack as its node recorded them (said when an assertion fails)."""
    found: list[tuple[Any, ...]] = []
    for f in sorted(records.glob("*.json")):
        record = json.loads(f.read_text())
        stacks = {p["pid"]: (p.get("stack_source"), p.get("stack")) for p in record["run"]["processes"]}
        found += [(e["rank"], e["place"], *stacks.get(e["pid"], (None, None))) for e in record["ranks"]]
    return found


def _nothing_left(records: Path, mark: str) -> None:
    pids = [p["pid"] for f in records.glob("*.json") for p in json.loads(f.read_text())["run"]["processes"]]
    assert running(pids) == []
    assert wait_gone(marked(mark), timeout=30) == []


@pytest.mark.slow
def test_two_nodes_one_rank_skips_a_barrier_the_report_says_hung_with_both_ranks_and_the_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], no_leftovers: str) -> None:
    records = _two_nodes(tmp_path, "skipped.py", BARRIER_SKIPPED)
    page = tmp_path / "job.html"
    code, out, err = _report(capsys, str(records), "--json")
    doc = json.loads(out)
    lines = doc["explanation"].splitlines()
    assert (code, doc["verdict"]) == (1, "hung"), lines
    assert len(doc["nodes"]) == 2 and sorted(r["rank"] for r in doc["ranks"]) == [0, 1]
    node = {r["rank"]: r["node"] for r in doc["ranks"]}
    test, save, barrier = (_line(BARRIER_SKIPPED, m) for m in ("# TEST", "# SAVE", "# BARRIER"))
    assert any(line.startswith(f"Rank 1 (node {node[1]}) waits in `barrier` at skipped.py:{barrier}")
               for line in lines), (lines, _stacks(records))
    assert any(f"rank 0 (node {node[0]}) is in `save_checkpoint` at skipped.py:{save}" in line
               and f"under `if rank == 0:` (line {test})" in line for line in lines), lines
    assert doc["causes"][0]["kind"] == "collective-not-reached"
    code, out, _ = _report(capsys, str(records), "--html", str(page))
    html = page.read_text()
    assert code == 1 and f"rank 0 · {node[0]}" in html and f"rank 1 · {node[1]}" in html
    assert html.count('id="job-cpu-') == 2
    _nothing_left(records, no_leftovers)


@pytest.mark.slow
def test_two_nodes_one_rank_raises_the_report_names_its_exception_as_the_cause(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], no_leftovers: str) -> None:
    records = _two_nodes(tmp_path, "shards.py", RANK_1_RAISES)
    code, out, _ = _report(capsys, str(records), "--json")
    doc = json.loads(out)
    lines = doc["explanation"].splitlines()
    assert (code, doc["verdict"]) == (1, "crashed"), lines
    rank1 = next(r for r in doc["ranks"] if r["rank"] == 1)
    first = next(line for line in lines if "failed first" in line)
    assert first.startswith(f"Rank 1 (node {rank1['node']}, pid {rank1['pid']}) failed first at t="), lines
    assert f"FileNotFoundError: shard-1.pt, from your code load_shard ({tmp_path / 'shards.py'}:" \
           f"{_line(RANK_1_RAISES, '# RAISE')})" in first, first
    assert doc["causes"][0]["kind"] == "rank-failed" and doc["causes"][0]["processes"][0] == rank1["pid"]
    _nothing_left(records, no_leftovers)


def test_a_hung_node_waits_for_the_other_nodes_to_dump_their_stacks(tmp_path: Path) -> None:
    """On a hang, a node's probe leaves a mark and waits for the job's other nodes' marks
    before stopping its ranks (stopping them wakes the others'); it waits no longer than
    it is told, and not at all for a job on one node."""
    import threading
    import time

    from gpudoctor.probe import node_record

    wait = node_record.hold(tmp_path)
    other = threading.Timer(0.2, (tmp_path / ".other-1.hung").touch)
    other.start()
    began = time.monotonic()
    wait({10: 2, 11: None}, 60.0)  # one rank of a world of two here: two nodes
    assert time.monotonic() - began < 30 and len(list(tmp_path.glob(".*.hung"))) == 2
    other.join()
    alone = tmp_path / "alone"
    alone.mkdir()
    began = time.monotonic()
    node_record.hold(alone)({10: 2}, 0.3)  # the other node never comes: the bound
    assert time.monotonic() - began >= 0.3
    began = time.monotonic()
    node_record.hold(alone)({10: 1, 11: 1}, 60.0)  # one node: nothing to wait for
    assert time.monotonic() - began < 30


_FIELDS = ["command", "verdict", "explanation", "stop_reason", "duration", "stop_at", "processes", "matches",
           "causes", "events", "samples", "notes", "exit_code"]


@pytest.mark.parametrize("field", _FIELDS)
@pytest.mark.parametrize("value", [7, "x", [7], {"a": 1}, None])
def test_a_record_with_a_field_of_another_type_is_one_line_never_a_traceback(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], field: str, value: object) -> None:
    # A record written by hand or by another program: every field the report reads may hold
    # anything (the red team's round found tracebacks for run.explanation, command, samples
    # and events).
    path = _record(tmp_path, "a", 1000.0, [_rank(11, 0, function="save_checkpoint", at="train.py:55")])
    record = json.loads(path.read_text())
    record["run"][field] = value
    path.write_text(json.dumps(record))
    for options in ([], ["--json"], ["--html", str(tmp_path / "page.html")]):
        code, _, err = _report(capsys, str(tmp_path), *options)
        assert code in (0, 1, 2), (field, value, options)
        assert code != 2 or err.startswith("gpudoctor: error: ") and len(err.splitlines()) == 1, err


def test_a_named_pipe_among_the_records_is_refused_not_waited_on(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    _record(tmp_path, "a", 1000.0, [_rank(11, 0, function="save_checkpoint", at="train.py:55")])
    os.mkfifo(tmp_path / "x.json")
    code, _, err = _report(capsys, str(tmp_path))
    assert code == 2 and "x.json: cannot read it: a named pipe, not a regular file" in err
