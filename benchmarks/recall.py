"""Recall and precision on a blind corpus: ``benchmarks/recall_corpus.json``.

The corpus is a list of public repositories pinned by commit, each with the hazards a
reader wrote down by reading its code before gpudoctor ever ran on it (the file was
committed first). This script checks each repository out at its commit (from a local git
directory: ``--mirror DIR`` holding ``OWNER+NAME/repo`` or ``OWNER+NAME`` git directories,
``--from-git OWNER/NAME=GITDIR``, or ``--clone`` to clone from GitHub) into a cache
folder outside this checkout (``~/.cache/gpudoctor-benchmarks/recall``), lints the paths
the corpus names from the repository's root as a user would (``gpudoctor lint
--output-format json --no-cache``), and scores:

- a hazard is *found* when a finding of its code (or one of its ``also_codes``) is
  reported in its file on one of its lines;
- a finding is *true* when it finds a hazard or the triage
  (``benchmarks/recall_triage.json``, written after the runs) calls it true, *false* when
  it lands on a ``non_hazard`` of its code or the triage calls it false, and *untriaged*
  otherwise.

It prints, per rule, hazards, found and recall beside findings, true, false, untriaged
and precision, then every missed hazard (with the triage's reason when it has one), every
false and every untriaged finding. ``--save RUN.json`` keeps the findings of a run and
``--baseline RUN.json`` prints a saved run's table beside this one (a before/after
comparison); ``--python PY`` lints with another interpreter's gpudoctor and ``--source
DIR`` with the gpudoctor of another checkout (put first on ``PYTHONPATH``, with ``--jobs 1``:
lint's workers import the installed gpudoctor, whatever ``PYTHONPATH`` says).

Exit status: 0 when nothing is untriaged, 1 otherwise, 2 when a repository could not be
checked out. Not part of ``make test``: it needs the repositories and takes minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # checked.py, beside it (python -I adds no folder)
from checked import captured_json  # noqa: E402

CORPUS = HERE / "recall_corpus.json"
TRIAGE = HERE / "recall_triage.json"
# Outside this checkout: a checkout under a folder with a pyproject.toml above it (this
# repository's) would be linted as part of that project, not as its own.
DEFAULT_CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "gpudoctor-benchmarks" / "recall"


@dataclass(frozen=True)
class Hazard:
    id: str
    repo: str
    code: str
    codes: frozenset[str]
    file: str
    lines: frozenset[int]
    what: str
    confidence: str


@dataclass
class Repo:
    name: str
    commit: str
    lint: list[str]
    hazards: list[Hazard]
    non_hazards: list[dict[str, object]] = field(default_factory=list)


def load_corpus(path: Path) -> list[Repo]:
    data = json.loads(path.read_text(encoding="utf-8"))
    repos = []
    for entry in data["repos"]:
        hazards = [Hazard(h["id"], entry["repo"], h["code"], frozenset([h["code"], *h.get("also_codes", [])]),
                          h["file"], frozenset(int(n) for n in h["lines"]), h.get("what", ""),
                          h.get("confidence", "certain"))
                   for h in entry["hazards"]]
        repos.append(Repo(entry["repo"], entry["commit"], list(entry.get("lint") or ["."]), hazards,
                          list(entry.get("non_hazards", []))))
    return repos


def load_triage(path: Path) -> tuple[dict[tuple[str, str, int, str], dict[str, str]], dict[str, str]]:
    """The triage of findings no hazard accounts for, by (repo, file, line, code), and the
    reasons hazards were missed, by hazard id."""
    if not path.exists():
        return {}, {}
    data = json.loads(path.read_text(encoding="utf-8"))
    findings = {(f["repo"], f["file"], int(f["line"]), f["code"]): f for f in data.get("findings", [])}
    missed = {m["id"]: m["why"] for m in data.get("missed", [])}
    return findings, missed


# -- checking out ----------------------------------------------------------------------

def git_dir(repo: str, mirrors: list[Path], given: dict[str, Path]) -> Path | None:
    if repo in given:
        return given[repo]
    flat = repo.replace("/", "+")
    for mirror in mirrors:
        for candidate in (mirror / flat / "repo", mirror / flat, mirror / repo, mirror / f"{flat}.git"):
            if (candidate / "HEAD").is_file() or (candidate / ".git" / "HEAD").is_file():
                return candidate / ".git" if (candidate / ".git").is_dir() else candidate
    return None


def checkout(repo: Repo, cache: Path, mirrors: list[Path], given: dict[str, Path], clone: bool) -> Path:
    """The repository's tree at its commit, extracted once into the cache."""
    target = cache / repo.name.replace("/", "__") / repo.commit[:12]
    done = target / ".complete"
    if done.exists():
        return target
    source = git_dir(repo.name, mirrors, given)
    if source is None and clone:
        source = cache / "git" / repo.name.replace("/", "__")
        if not source.exists():
            source.parent.mkdir(parents=True, exist_ok=True)
            subprocess.run(["git", "clone", "--quiet", "--bare", "--filter=blob:none",
                            f"https://github.com/{repo.name}.git", str(source)], check=True)
    if source is None:
        raise LookupError(f"no git directory for {repo.name} (pass --mirror, --from-git or --clone)")
    target.mkdir(parents=True, exist_ok=True)
    extract(source, repo.commit, target)
    done.write_text(repo.commit)
    return target


KEPT_SUFFIXES = (".py", ".pyi", ".ipynb", ".toml", ".cfg")
KEPT_NAMES = (".gitignore",)


def extract(source: Path, commit: str, target: Path) -> None:
    """Write the files lint reads (Python sources, notebooks, configuration, .gitignore)
    of ``commit`` under ``target``. A blob the git directory lacks (a snapshot without its
    large files) is skipped; lint never reads those."""
    listing = subprocess.run(["git", "--git-dir", str(source), "ls-tree", "-r", "-z", commit],
                             capture_output=True, check=False)
    if listing.returncode != 0:
        raise LookupError(f"commit {commit} not in {source}: {listing.stderr.decode(errors='replace').strip()}")
    wanted: list[tuple[str, str]] = []
    for entry in listing.stdout.split(b"\0"):
        if not entry:
            continue
        meta, _, name = entry.partition(b"\t")
        mode, kind, sha = meta.split()
        path = name.decode("utf-8", errors="surrogateescape")
        if kind != b"blob" or mode == b"120000":
            continue
        if path.endswith(KEPT_SUFFIXES) or path.rsplit("/", 1)[-1] in KEPT_NAMES:
            wanted.append((sha.decode(), path))
    batch = subprocess.run(["git", "--git-dir", str(source), "cat-file", "--batch"],
                           input="".join(f"{sha}\n" for sha, _ in wanted).encode(), capture_output=True, check=False)
    data, offset = batch.stdout, 0
    for _sha, path in wanted:
        end = data.index(b"\n", offset)
        header = data[offset:end].split()
        offset = end + 1
        if len(header) < 3 or header[1] == b"missing":
            continue
        size = int(header[2])
        body = data[offset:offset + size]
        offset += size + 1
        out = target / path
        if not out.resolve().is_relative_to(target.resolve()):
            continue
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(body)


# -- linting ---------------------------------------------------------------------------

def lint(root: Path, paths: list[str], python: str, source: Path | None) -> tuple[list[dict[str, object]], float]:
    env = dict(os.environ)
    jobs: list[str] = []
    if source is not None:
        env["PYTHONPATH"] = str(source) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        # Lint's worker processes import gpudoctor from where it is installed, never from
        # PYTHONPATH (nothing of the linted folder may run in them): one process only, or
        # the workers would run the installed gpudoctor beside this checkout's.
        jobs = ["--jobs", "1"]
    # (a lint that fails, a traceback or output that is not JSON stops the run: ``checked``)
    findings, took = captured_json([python, "-m", "gpudoctor", "lint", "--output-format", "json", "--no-cache",
                                    "--exit-zero", *jobs, *paths], root, env)
    out = []
    for f in findings:
        where = f.get("location") or {}
        filename = str(f.get("filename") or f.get("file") or "")
        rel = os.path.relpath(filename, root) if os.path.isabs(filename) else filename
        cell = f.get("cell")  # a notebook's finding: its cell, and the line in that cell
        shown = rel.replace(os.sep, "/") + (f":cell {cell}" if cell else "")
        out.append({"file": shown, "line": int(where.get("row", 0)), "code": f["code"],
                    "message": f.get("message", "")})
    return out, took


# -- scoring ---------------------------------------------------------------------------

@dataclass
class Score:
    hazards: Counter[str] = field(default_factory=Counter)
    found: Counter[str] = field(default_factory=Counter)
    findings: Counter[str] = field(default_factory=Counter)
    true: Counter[str] = field(default_factory=Counter)
    false: Counter[str] = field(default_factory=Counter)
    untriaged: Counter[str] = field(default_factory=Counter)
    missed: list[Hazard] = field(default_factory=list)
    false_list: list[tuple[str, dict[str, object], str]] = field(default_factory=list)
    untriaged_list: list[tuple[str, dict[str, object]]] = field(default_factory=list)


def score(repos: list[Repo], results: dict[str, list[dict[str, object]]],
          triage: dict[tuple[str, str, int, str], dict[str, str]]) -> Score:
    out = Score()
    for repo in repos:
        findings = results.get(repo.name)
        if findings is None:
            continue
        matched: set[int] = set()
        for hazard in repo.hazards:
            out.hazards[hazard.code] += 1
            hits = [i for i, f in enumerate(findings)
                    if f["code"] in hazard.codes and f["file"] == hazard.file and f["line"] in hazard.lines]
            if hits:
                out.found[hazard.code] += 1
                matched.update(hits)
            else:
                out.missed.append(hazard)
        for index, f in enumerate(findings):
            code = str(f["code"])
            out.findings[code] += 1
            if index in matched:
                out.true[code] += 1
                continue
            key = (repo.name, str(f["file"]), int(f["line"]), code)  # type: ignore[call-overload]
            judged = triage.get(key)
            looks = [n for n in repo.non_hazards if n.get("code") == code and n.get("file") == f["file"]
                     and f["line"] in n.get("lines", [])]  # type: ignore[operator]
            if judged is not None and judged.get("verdict") == "true":
                out.true[code] += 1
            elif judged is not None and judged.get("verdict") == "false":
                out.false[code] += 1
                out.false_list.append((repo.name, f, judged.get("why", "")))
            elif looks:
                out.false[code] += 1
                out.false_list.append((repo.name, f, f"a non-hazard of the corpus: {looks[0].get('why', '')}"))
            else:
                out.untriaged[code] += 1
                out.untriaged_list.append((repo.name, f))
    return out


def _ratio(a: int, b: int) -> str:
    return f"{a / b:.2f}" if b else "-"


def table(result: Score, title: str) -> list[str]:
    codes = sorted(set(result.hazards) | set(result.findings))
    lines = [title, f"{'rule':7} {'hazards':>7} {'found':>5} {'recall':>6}   {'findings':>8} {'true':>4} "
                    f"{'false':>5} {'untri.':>6} {'precision':>9}"]
    for code in codes:
        judged = result.true[code] + result.false[code]
        lines.append(f"{code:7} {result.hazards[code]:7} {result.found[code]:5} "
                     f"{_ratio(result.found[code], result.hazards[code]):>6}   {result.findings[code]:8} "
                     f"{result.true[code]:4} {result.false[code]:5} {result.untriaged[code]:6} "
                     f"{_ratio(result.true[code], judged):>9}")
    hz, fd = sum(result.hazards.values()), sum(result.found.values())
    tr, fa, un = sum(result.true.values()), sum(result.false.values()), sum(result.untriaged.values())
    lines.append(f"{'all':7} {hz:7} {fd:5} {_ratio(fd, hz):>6}   {sum(result.findings.values()):8} "
                 f"{tr:4} {fa:5} {un:6} {_ratio(tr, tr + fa):>9}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--triage", type=Path, default=TRIAGE)
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    parser.add_argument("--mirror", type=Path, action="append", default=[])
    parser.add_argument("--from-git", action="append", default=[], metavar="OWNER/NAME=GITDIR")
    parser.add_argument("--clone", action="store_true", help="clone missing repositories from GitHub")
    parser.add_argument("--only", action="append", default=[], metavar="OWNER/NAME")
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--source", type=Path, help="lint with the gpudoctor of this checkout")
    parser.add_argument("--save", type=Path)
    parser.add_argument("--baseline", type=Path)
    parser.add_argument("--quiet", action="store_true", help="print the tables only")
    args = parser.parse_args(argv)

    repos = load_corpus(args.corpus)
    if args.only:
        repos = [r for r in repos if r.name in args.only]
    given = {}
    for item in args.from_git:
        name, _, path = item.partition("=")
        given[name] = Path(path)
    triage, reasons = load_triage(args.triage)
    results: dict[str, list[dict[str, object]]] = {}
    seconds = 0.0
    for repo in repos:
        try:
            root = checkout(repo, args.cache, args.mirror, given, args.clone)
        except (LookupError, subprocess.CalledProcessError) as exc:
            print(f"cannot check out {repo.name}: {exc}", file=sys.stderr)
            return 2
        findings, took = lint(root, repo.lint, args.python, args.source)
        seconds += took
        results[repo.name] = findings
        if not args.quiet:
            print(f"{repo.name}@{repo.commit[:10]}: {len(findings)} findings, {took:.1f} s", file=sys.stderr)
    if args.save:
        args.save.write_text(json.dumps(results, indent=1), encoding="utf-8")
    result = score(repos, results, triage)
    lines = table(result, f"{len(repos)} repositories, {seconds:.0f} s of linting")
    if args.baseline:
        before = json.loads(args.baseline.read_text(encoding="utf-8"))
        old = score(repos, before, triage)
        lines = table(old, f"baseline ({args.baseline.name})") + [""] + lines
    print("\n".join(lines))
    if not args.quiet:
        if result.missed:
            print("\nmissed hazards:")
            for hazard in result.missed:
                why = reasons.get(hazard.id, "(no reason written yet)")
                print(f"  {hazard.id} {hazard.code} {hazard.file}:{sorted(hazard.lines)} [{hazard.confidence}] {why}")
        if result.false_list:
            print("\nfalse findings:")
            for repo_name, f, why in result.false_list:
                print(f"  {repo_name} {f['file']}:{f['line']} {f['code']}: {why}")
        if result.untriaged_list:
            print("\nuntriaged findings:")
            for repo_name, f in result.untriaged_list:
                print(f"  {repo_name} {f['file']}:{f['line']} {f['code']} {str(f['message'])[:220]}")
    return 1 if result.untriaged_list else 0


if __name__ == "__main__":
    sys.exit(main())
