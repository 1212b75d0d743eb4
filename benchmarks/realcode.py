"""Lint a pinned corpus of public GPU projects from PyPI and score the findings against a
triage kept in ``benchmarks/realcode_expectations.json``.

Each package is downloaded once (``pip download --no-deps`` of the pinned version, sdist or
wheel as the file says) into a cache folder, unpacked, and linted at its root as a user
would (``gpudoctor lint --output-format json .``). Every finding is looked up in the
triage by package, file, line and code: true or false, with the reason. The script prints,
per rule, how many findings were reported, how many the triage calls true and false, the
precision, and any finding the triage does not know yet (triage it, then add it). A true
finding of the triage that is no longer reported is listed as lost.

``--python`` lints with another interpreter's gpudoctor (an older checkout installed in
its own venv), which is how a before/after comparison is made; ``--save`` writes the
findings of a run and ``--baseline`` prints a saved run's precision beside this one's.

Exit status: 0 when every finding is triaged true and no true finding is lost, 1
otherwise, 2 when the corpus could not be fetched. A lint that fails (an exit other than
0, a Python traceback, output that is not JSON) stops the run at once, exit 1, with the
command and the end of its stderr. Not part of ``make test``: it needs the
network on its first run and takes minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # checked.py, beside it (python -I adds no folder)
from checked import captured_json  # noqa: E402

EXPECTATIONS = HERE / "realcode_expectations.json"
DEFAULT_CACHE = HERE / ".realcode"


@dataclass(frozen=True)
class Package:
    name: str  # the distribution name on PyPI
    version: str
    kind: str  # "sdist" or "wheel"
    why: str


Key = tuple[str, str, int, str]  # package, file, line, code


def load_expectations(path: Path) -> tuple[list[Package], dict[Key, dict[str, str]]]:
    data = json.loads(path.read_text(encoding="utf-8"))
    packages = [Package(p["name"], p["version"], p["kind"], p.get("why", "")) for p in data["packages"]]
    triage = {(f["package"], f["file"], int(f["line"]), f["code"]): f for f in data["findings"]}
    return packages, triage


def _archive(downloads: Path, package: Package) -> Path | None:
    stem = package.name.replace("-", "_").lower()
    for candidate in sorted(downloads.iterdir()) if downloads.is_dir() else ():
        name = candidate.name.lower().replace("-", "_")
        if name.startswith(f"{stem}_{package.version}_".lower()) or name.startswith(f"{stem}_{package.version}.tar"):
            if (package.kind == "wheel") == name.endswith(".whl"):
                return candidate
    return None


def fetch(package: Package, downloads: Path) -> Path:
    """The package's archive in the cache, downloaded on first use."""
    found = _archive(downloads, package)
    if found is not None:
        return found
    downloads.mkdir(parents=True, exist_ok=True)
    # An sdist's metadata is prepared with the build tools of this environment: an isolated
    # build would install its own first, which an index without them (or no network) refuses.
    only = ["--no-binary", ":all:", "--no-build-isolation"] if package.kind == "sdist" else ["--only-binary", ":all:"]
    command = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", *only,
               "--dest", str(downloads), f"{package.name}=={package.version}"]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    found = _archive(downloads, package)
    if done.returncode != 0 or found is None:
        raise RuntimeError(f"could not download {package.name}=={package.version} ({package.kind}): "
                           f"{(done.stderr or done.stdout).strip().splitlines()[-1:] or 'no file'}")
    return found


def unpack(archive: Path, into: Path) -> Path:
    """Unpack once; an sdist's single top folder (name-version/) is dropped so that paths
    read as in the project's repository."""
    if into.is_dir():
        return into
    scratch = into.with_name(into.name + ".partial")
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    if archive.name.endswith(".whl") or archive.suffix == ".zip":
        with zipfile.ZipFile(archive) as zipped:
            zipped.extractall(scratch)
    else:
        with tarfile.open(archive) as tarred:
            if hasattr(tarfile, "data_filter"):
                tarred.extractall(scratch, filter="data")
            else:  # Python < 3.10.12: no extraction filters
                tarred.extractall(scratch)  # noqa: S202 - a pinned sdist from PyPI
    entries = list(scratch.iterdir())
    top = entries[0] if len(entries) == 1 and entries[0].is_dir() else scratch
    if top is not scratch:
        top.rename(into)
        scratch.rmdir()
    else:
        scratch.rename(into)
    return into


def lint(python: str, root: Path) -> tuple[list[dict], float]:
    """The findings and the wall time of a lint of ``root``; a lint that fails (an exit
    other than 0, a traceback, no JSON) stops the benchmark (``checked``)."""
    command = [python, "-m", "gpudoctor", "lint", "--output-format", "json", "--exit-zero", "--no-cache", "."]
    findings, seconds = captured_json(command, root)
    return findings, seconds


def score(run: dict[str, list[dict]], triage: dict[Key, dict[str, str]]) -> dict[str, Counter]:
    """Per code: reported, true, false, untriaged."""
    table: dict[str, Counter] = {}
    for package, findings in run.items():
        for finding in findings:
            key = (package, finding["filename"], finding["location"]["row"], finding["code"])
            counts = table.setdefault(finding["code"], Counter())
            counts["reported"] += 1
            verdict = triage.get(key, {}).get("verdict")
            counts[verdict if verdict in ("true", "false") else "untriaged"] += 1
    return table


def _precision(counts: Counter) -> str:
    judged = counts["true"] + counts["false"]
    return f"{counts['true'] / judged:.2f}" if judged else "  - "


def report(run: dict[str, list[dict]], triage: dict[Key, dict[str, str]],
           baseline: dict[str, list[dict]] | None) -> int:
    now = score(run, triage)
    before = score(baseline, triage) if baseline is not None else {}
    codes = sorted(set(now) | set(before) | {key[3] for key in triage})
    header = f"{'rule':7s} {'reported':>8s} {'true':>5s} {'false':>5s} {'untriaged':>9s} {'precision':>9s}"
    print(header + ("   before: reported  precision" if baseline is not None else ""))
    total, total_before = Counter(), Counter()
    for code in codes:
        counts = now.get(code, Counter())
        total.update(counts)
        line = (f"{code:7s} {counts['reported']:8d} {counts['true']:5d} {counts['false']:5d} "
                f"{counts['untriaged']:9d} {_precision(counts):>9s}")
        if baseline is not None:
            old = before.get(code, Counter())
            total_before.update(old)
            line += f"   {old['reported']:16d}  {_precision(old):>9s}"
        print(line)
    line = (f"{'all':7s} {total['reported']:8d} {total['true']:5d} {total['false']:5d} "
            f"{total['untriaged']:9d} {_precision(total):>9s}")
    if baseline is not None:
        line += f"   {total_before['reported']:16d}  {_precision(total_before):>9s}"
    print(line)

    reported = {(package, f["filename"], f["location"]["row"], f["code"]) for package, findings in run.items()
                for f in findings}
    bad = 0
    for package, findings in sorted(run.items()):
        for finding in findings:
            key = (package, finding["filename"], finding["location"]["row"], finding["code"])
            entry = triage.get(key)
            if entry is None or entry.get("verdict") != "true":
                bad += 1
                state = "untriaged" if entry is None else f"false: {entry.get('reason', '')}"
                print(f"  {state.split(':')[0]:9s} {package}: {key[1]}:{key[2]} {key[3]} {finding['message']}")
                if entry is not None:
                    print(f"            ({entry.get('reason', '')})")
    lost = [key for key, entry in sorted(triage.items())
            if entry.get("verdict") == "true" and key[0] in run and key not in reported]
    for key in lost:
        print(f"  lost      {key[0]}: {key[1]}:{key[2]} {key[3]} (a true finding no longer reported)")
    return 1 if bad or lost else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE,
                        help=f"where archives and unpacked sources are kept (default {DEFAULT_CACHE})")
    parser.add_argument("--python", default=sys.executable,
                        help="the interpreter whose gpudoctor lints (default: this one)")
    parser.add_argument("--only", action="append", default=[], metavar="PACKAGE",
                        help="lint only this package (repeatable)")
    parser.add_argument("--save", type=Path, help="write this run's findings (JSON) here")
    parser.add_argument("--baseline", type=Path, help="a run saved with --save, scored beside this one")
    args = parser.parse_args()

    packages, triage = load_expectations(EXPECTATIONS)
    if args.only:
        unknown = set(args.only) - {p.name for p in packages}
        if unknown:
            parser.error(f"not in the corpus: {', '.join(sorted(unknown))}")
        packages = [p for p in packages if p.name in args.only]
    run: dict[str, list[dict]] = {}
    seconds = 0.0
    for package in packages:
        try:
            archive = fetch(package, args.cache / "downloads")
        except RuntimeError as error:
            print(f"realcode: {error}", file=sys.stderr)
            return 2
        root = unpack(archive, args.cache / "src" / f"{package.name}-{package.version}")
        findings, took = lint(args.python, root)
        seconds += took
        run[package.name] = findings
        print(f"{package.name}=={package.version}: {len(findings)} finding(s), {took:.1f} s")
    print(f"{len(packages)} packages linted in {seconds:.1f} s (cold, --no-cache, {os.cpu_count()} CPUs)\n")
    if args.save:
        args.save.write_text(json.dumps(run, indent=1, sort_keys=True), encoding="utf-8")
    baseline = None
    if args.baseline:
        saved = json.loads(args.baseline.read_text(encoding="utf-8"))
        baseline = {name: findings for name, findings in saved.items() if name in run}
    return report(run, triage, baseline)


if __name__ == "__main__":
    sys.exit(main())
