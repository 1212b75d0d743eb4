"""Lint a pinned corpus of public Jupyter notebooks and score the findings against a triage
kept in ``benchmarks/notebooks_expectations.json``.

The notebooks are GPU tutorials and training notebooks from well-known projects, chosen
because they mix a GPU framework with DataLoader workers, process pools, notebook
launchers or multi-worker clusters, or are plain GPU tutorials (the common case, which
must stay quiet). Each is pinned by its sha256 and by where it comes from:

- a PyPI sdist that ships it (``"kind": "pypi"``): the archive's URL and sha256; the
  archive is downloaded once into the cache and the notebook taken out of it;
- a commit of a public git repository (``"kind": "git"``): the repository, the commit and
  the path; the notebook is copied from a local clone named with ``--from-git
  OWNER/NAME=CLONE`` (nothing is cloned here; the script says which clone it lacks).

The notebooks are copied into ``corpus/SOURCE/PATH`` under the cache folder (gitignored),
with a ``pyproject.toml`` of its own so that the corpus is linted as one project with a
fixed target (Python 3.10, where Linux forks by default), whatever checkout runs it. Once
the cache is filled, no network is needed.

The corpus folder is linted once, as a user would lint a folder of notebooks
(``gpudoctor lint --output-format json --no-cache .``). A crash (an exit status other
than 0 under ``--exit-zero``, a traceback, output that is not JSON) stops the script at
once with the command and the end of its stderr. Every finding is looked up
in the triage by notebook, cell, line in the cell and code: true or false, with the
reason. The script prints, per rule, the findings, how many the triage calls true and
false, the precision, each false or untriaged finding, and each true finding no longer
reported. ``--python`` lints with another interpreter's gpudoctor; ``--save`` writes a
run's findings and ``--baseline`` prints a saved run's precision beside this one's.

Exit status: 0 when every finding is triaged true and none is lost; 1 otherwise or when
the linter crashed; 2 when the corpus could not be filled. Not part of ``make test``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tarfile
import urllib.request
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # checked.py, beside it (python -I adds no folder)
from checked import captured_json  # noqa: E402

EXPECTATIONS = HERE / "notebooks_expectations.json"
DEFAULT_CACHE = HERE / ".notebooks"
# The corpus is its own project: its pyproject.toml fixes the target (the oldest Python
# where Linux's default start method is fork) and stops the search for a configuration.
CORPUS_PYPROJECT = ('[project]\nname = "notebook-corpus"\nrequires-python = ">=3.10"\n\n'
                    "[tool.gpudoctor]\n")


@dataclass(frozen=True)
class Source:
    name: str  # the corpus folder the notebooks go to
    kind: str  # "pypi" or "git"
    why: str
    version: str = ""  # pypi: the sdist's version
    url: str = ""  # pypi: the sdist
    sha256: str = ""  # pypi: the sdist's digest
    repo: str = ""  # git: owner/name
    commit: str = ""  # git


@dataclass(frozen=True)
class Pinned:
    source: Source
    path: str  # inside the sdist's top folder, or the repository
    sha256: str

    @property
    def name(self) -> str:
        """The notebook's path in the corpus (and in the findings)."""
        return f"{self.source.name}/{self.path}"


Key = tuple[str, int, int, str]  # notebook, cell, line in the cell, code


class Unavailable(Exception):
    """The corpus cannot be filled: the message says what is missing and how to get it."""


def load_expectations(path: Path) -> tuple[list[Pinned], dict[Key, dict[str, object]]]:
    data = json.loads(path.read_text(encoding="utf-8"))
    sources = {s["name"]: Source(**s) for s in data["sources"]}
    pinned = [Pinned(sources[n["source"]], n["path"], n["sha256"]) for n in data["notebooks"]]
    triage = {(f["notebook"], int(f["cell"]), int(f["line"]), f["code"]): f for f in data["findings"]}
    return pinned, triage


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _sdist(source: Source, downloads: Path) -> Path:
    """The source's sdist in the cache, downloaded and checked on first use."""
    archive = downloads / source.url.rsplit("/", 1)[-1]
    if archive.is_file() and _digest(archive.read_bytes()) == source.sha256:
        return archive
    downloads.mkdir(parents=True, exist_ok=True)
    try:
        with urllib.request.urlopen(source.url, timeout=120) as response:  # noqa: S310 - a pinned https URL
            data = response.read()
    except OSError as error:
        raise Unavailable(f"cannot download {source.url}: {error}") from None
    if _digest(data) != source.sha256:
        raise Unavailable(f"{source.url} does not have the pinned sha256 {source.sha256}")
    archive.write_bytes(data)
    return archive


def _from_sdist(notebook: Pinned, downloads: Path) -> bytes:
    archive = _sdist(notebook.source, downloads)
    with tarfile.open(archive) as tarred:
        top = tarred.getnames()[0].split("/", 1)[0]
        member = tarred.extractfile(f"{top}/{notebook.path}")
        if member is None:
            raise Unavailable(f"{archive.name} has no file {notebook.path}")
        return member.read()


def _no_clone(source: Source, count: int) -> str:
    return (f"{count} notebook(s) of {source.name} are not in the cache: they are pinned at commit "
            f"{source.commit} of https://github.com/{source.repo} (source github:{source.repo}); run "
            f"again with --from-git {source.repo}=PATH, PATH a clone (bare or not) that has that commit")


def _from_git(notebook: Pinned, clone: Path) -> bytes:
    source = notebook.source
    git_dir = clone / ".git" if (clone / ".git").exists() else clone
    done = subprocess.run(["git", "--git-dir", str(git_dir), "show", f"{source.commit}:{notebook.path}"],
                          capture_output=True, check=False)
    if done.returncode != 0:
        raise Unavailable(f"{clone} has no {notebook.path} at commit {source.commit}: "
                          f"{done.stderr.decode(errors='replace').strip()}")
    return done.stdout


def fill(pinned: list[Pinned], cache: Path, clones: dict[str, Path]) -> Path:
    """The corpus folder, every pinned notebook in it with its pinned digest."""
    corpus = cache / "corpus"
    corpus.mkdir(parents=True, exist_ok=True)
    (corpus / "pyproject.toml").write_text(CORPUS_PYPROJECT, encoding="utf-8")
    missing: list[str] = []
    unclonable: Counter[Source] = Counter()
    for notebook in pinned:
        target = corpus / notebook.name
        if target.is_file() and _digest(target.read_bytes()) == notebook.sha256:
            continue
        if notebook.source.kind == "git" and notebook.source.repo not in clones:
            unclonable[notebook.source] += 1
            continue
        try:
            if notebook.source.kind == "pypi":
                data = _from_sdist(notebook, cache / "downloads")
            else:
                data = _from_git(notebook, clones[notebook.source.repo])
        except Unavailable as error:
            missing.append(str(error))
            continue
        if _digest(data) != notebook.sha256:
            missing.append(f"{notebook.name} does not have the pinned sha256 {notebook.sha256}")
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    missing.extend(_no_clone(source, count) for source, count in unclonable.items())
    if missing:
        raise Unavailable("\n".join(missing))
    return corpus


def lint(python: str, corpus: Path, paths: list[str]) -> tuple[list[dict], float]:
    """The findings and the wall time; a crash stops the script (``checked``)."""
    command = [python, "-m", "gpudoctor", "lint", "--output-format", "json", "--exit-zero", "--no-cache",
               *paths]
    findings, seconds = captured_json(command, corpus)
    return findings, seconds


def _key(finding: dict) -> Key:
    return (finding["filename"], finding["cell"] or 0, finding["location"]["row"], finding["code"])


def score(findings: list[dict], triage: dict[Key, dict[str, object]]) -> dict[str, Counter]:
    """Per code: reported, true, false, untriaged."""
    table: dict[str, Counter] = {}
    for finding in findings:
        counts = table.setdefault(finding["code"], Counter())
        counts["reported"] += 1
        verdict = triage.get(_key(finding), {}).get("verdict")
        counts[verdict if verdict in ("true", "false") else "untriaged"] += 1
    return table


def _precision(counts: Counter) -> str:
    judged = counts["true"] + counts["false"]
    return f"{counts['true'] / judged:.2f}" if judged else "  - "


def _row(code: str, counts: Counter, old: Counter | None) -> str:
    line = (f"{code:7s} {counts['reported']:8d} {counts['true']:5d} {counts['false']:5d} "
            f"{counts['untriaged']:9d} {_precision(counts):>9s}")
    return line if old is None else line + f"   {old['reported']:16d}  {_precision(old):>9s}"


def report(findings: list[dict], triage: dict[Key, dict[str, object]], linted: set[str],
           baseline: list[dict] | None) -> int:
    now = score(findings, triage)
    before = score(baseline, triage) if baseline is not None else {}
    codes = sorted(set(now) | set(before) | {key[3] for key in triage})
    print(f"{'rule':7s} {'reported':>8s} {'true':>5s} {'false':>5s} {'untriaged':>9s} {'precision':>9s}"
          + ("   before: reported  precision" if baseline is not None else ""))
    total, total_before = Counter(), Counter()
    for code in codes:
        counts, old = now.get(code, Counter()), before.get(code, Counter())
        total.update(counts)
        total_before.update(old)
        print(_row(code, counts, old if baseline is not None else None))
    print(_row("all", total, total_before if baseline is not None else None))

    bad = 0
    for finding in sorted(findings, key=_key):
        key = _key(finding)
        entry = triage.get(key)
        if entry is not None and entry.get("verdict") == "true":
            continue
        bad += 1
        state = "untriaged" if entry is None else "false"
        print(f"  {state:9s} {key[0]}:cell {key[1]}:{key[2]} {key[3]} {finding['message']}")
        if entry is not None:
            print(f"            ({entry.get('reason', '')})")
    reported = {_key(f) for f in findings}
    lost = [key for key, entry in sorted(triage.items())
            if entry.get("verdict") == "true" and key[0] in linted and key not in reported]
    for key in lost:
        print(f"  lost      {key[0]}:cell {key[1]}:{key[2]} {key[3]} (a true finding no longer reported)")
    return 1 if bad or lost else 0


def _clones(values: list[str], parser: argparse.ArgumentParser) -> dict[str, Path]:
    clones: dict[str, Path] = {}
    for value in values:
        repo, sep, path = value.partition("=")
        if not sep or not path:
            parser.error(f"--from-git takes OWNER/NAME=PATH, not {value!r}")
        clones[repo] = Path(path).expanduser()
    return clones


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE,
                        help=f"where archives and the corpus are kept (default {DEFAULT_CACHE})")
    parser.add_argument("--from-git", action="append", default=[], metavar="OWNER/NAME=PATH",
                        help="a local clone to copy a git-pinned source's notebooks from (repeatable)")
    parser.add_argument("--python", default=sys.executable,
                        help="the interpreter whose gpudoctor lints (default: this one)")
    parser.add_argument("--only", action="append", default=[], metavar="SOURCE",
                        help="lint only this source's notebooks (repeatable)")
    parser.add_argument("--save", type=Path, help="write this run's findings (JSON) here")
    parser.add_argument("--baseline", type=Path, help="a run saved with --save, scored beside this one")
    args = parser.parse_args()

    pinned, triage = load_expectations(EXPECTATIONS)
    if args.only:
        unknown = set(args.only) - {n.source.name for n in pinned}
        if unknown:
            parser.error(f"not in the corpus: {', '.join(sorted(unknown))}")
        pinned = [n for n in pinned if n.source.name in args.only]
    try:
        corpus = fill(pinned, args.cache, _clones(args.from_git, parser))
    except Unavailable as error:
        print(f"notebooks: the corpus is not complete:\n{error}", file=sys.stderr)
        return 2
    paths = sorted({n.source.name for n in pinned}) if args.only else ["."]
    findings, seconds = lint(args.python, corpus, paths)
    cells = sum(len(json.loads((corpus / n.name).read_bytes())["cells"]) for n in pinned)
    print(f"{len(pinned)} notebooks ({cells} cells) from {len({n.source.name for n in pinned})} sources "
          f"linted in {seconds:.1f} s (one run, --no-cache): {len(findings)} finding(s)")
    for name in sorted({n.source.name for n in pinned}):
        count = sum(1 for f in findings if f["filename"].startswith(f"{name}/"))
        print(f"  {name}: {sum(1 for n in pinned if n.source.name == name)} notebooks, {count} finding(s)")
    print()
    if args.save:
        args.save.write_text(json.dumps(findings, indent=1, sort_keys=True), encoding="utf-8")
    baseline = None
    if args.baseline:
        saved = json.loads(args.baseline.read_text(encoding="utf-8"))
        baseline = [f for f in saved if any(f["filename"] == n.name for n in pinned)]
    return report(findings, triage, {n.name for n in pinned}, baseline)


if __name__ == "__main__":
    sys.exit(main())
