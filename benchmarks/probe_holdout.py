"""Run `gpudoctor probe --json` on each held-out failure of benchmarks/probe_holdout/ and
print what it said: the verdict, the explanation, the causes (code, name, message, fix,
location) and each process's verdict, for judging by hand against expected.json.

One probe at a time; each run is bounded (the probe's own --timeout from expected.json,
and a hard deadline here that kills the probe's process group). After each run the script
lists any process still alive whose command line names the program.

    .venv/bin/python benchmarks/probe_holdout.py [NN ...] [--out DIR] [--dir benchmarks/probe_holdout2]
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent / "probe_holdout"
ROOT = HERE.parent.parent
GPUDOCTOR = [sys.executable, "-m", "gpudoctor"]
HARD_DEADLINE = 240


def run_case(case: dict, out_dir: Path) -> dict:
    prog = HERE / case["program"]
    argv = [*GPUDOCTOR, "probe", "--json", "--quiet", *case["options"], "--", sys.executable, str(prog)]
    started = time.monotonic()
    with open(out_dir / (prog.stem + ".stderr"), "w") as err:
        proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=err, text=True,
                                start_new_session=True)
        try:
            stdout, _ = proc.communicate(timeout=HARD_DEADLINE)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            stdout, _ = proc.communicate()
    took = time.monotonic() - started
    (out_dir / (prog.stem + ".json")).write_text(stdout)
    time.sleep(1)
    left = subprocess.run(["pgrep", "-af", prog.name], capture_output=True, text=True).stdout.strip()
    try:
        report = json.loads(stdout)
    except ValueError:
        report = {"verdict": f"<no JSON, exit {proc.returncode}>", "explanation": stdout[-2000:]}
    return {"report": report, "exit": proc.returncode, "took": took, "left_running": left}


def summary(case: dict, result: dict) -> str:
    r = result["report"]
    lines = [f"== {case['program']}  (probe exit {result['exit']}, {result['took']:.1f} s)",
             f"expected: {case['verdict']} | {case['cause']}",
             f"          line {case['line']} | fix: {case['fix']}",
             f"verdict:  {r.get('verdict')}  stop_reason={r.get('stop_reason')}",
             "explanation: " + str(r.get("explanation", "")).replace("\n", "\n             ")]
    for c in r.get("causes") or []:
        lines.append("cause: " + json.dumps(c, ensure_ascii=False)[:1500])
    verdicts: dict[str, int] = {}
    for p in r.get("processes") or []:
        key = f"{p.get('verdict')} (exit {p.get('exit_code')})"
        verdicts[key] = verdicts.get(key, 0) + 1
    lines.append(f"processes: {verdicts}")
    lines.append(f"left running: {result['left_running'] or 'nothing'}")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("only", nargs="*", help="case numbers (01 ...) to run")
    parser.add_argument("--out", default="/tmp/probe_holdout_runs")
    parser.add_argument("--dir", help="another held-out set (default: benchmarks/probe_holdout)")
    args = parser.parse_args()
    global HERE
    if args.dir:
        HERE = Path(args.dir).resolve()
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    cases = json.loads((HERE / "expected.json").read_text())["cases"]
    for case in cases:
        case.setdefault("program", case.get("file"))  # probe_holdout2's keys
        case.setdefault("line", case.get("user_line"))
        if args.only and case["program"][:2] not in args.only:
            continue
        print(summary(case, run_case(case, out_dir)), flush=True)
        print(flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
