"""The result cache in ``.gpudoctor_cache/``: what a second run on unchanged code can reuse.

Two stores, both JSON (a cache is data; it must never be able to run code):

- **facts**: per file, the gate's view of it (does it act, use a GPU framework, what does it
  import), valid while the file's bytes hash the same.
- **results**: per linted file, the findings its analysis produced, valid while its bytes,
  the names other linted files import from it, and every file and directory listing the
  analysis read are unchanged; and the plan of the last run (which files to lint), valid
  while every file and listing it read is unchanged.

Both live under a folder named for the gpudoctor version and a fingerprint of the linter's
own code, and results under a key of the settings that change the analysis (target
Python, platform, project root). Rule selection is applied after the cache, so changing
``--select`` reuses it. A cache that cannot be read is ignored; one that cannot be written
costs a warning, never a failed run.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpudoctor import __version__
from gpudoctor.lint.analysis.gate import Facts
from gpudoctor.lint.findings import Edit, Finding, Fix, Related, Site

if TYPE_CHECKING:
    from gpudoctor.lint.analysis.project import Project
    from gpudoctor.lint.producer import Outcome

FOLDER = ".gpudoctor_cache"
_README = "This folder is gpudoctor's result cache. It can be deleted at any time.\n"
_TAG = "Signature: 8a477f597d28d172789f06886806bc55\n# This file marks gpudoctor's cache (https://bford.info/cachedir/).\n"


def code_fingerprint() -> str:
    """The gpudoctor version and the size and time of every file of the linter's code."""
    package = Path(__file__).resolve().parent
    parts = [__version__]
    for path in sorted(package.rglob("*.py")):
        info = path.stat()
        parts.append(f"{path.relative_to(package)}:{info.st_size}:{info.st_mtime_ns}")
    return hashlib.blake2b("\n".join(parts).encode(), digest_size=8).hexdigest()


class Cache:
    """The cache of one project root, for one set of analysis settings."""

    def __init__(self, root: Path, settings_key: str, folder: Path | None = None) -> None:
        self.base = (folder or root / FOLDER).resolve()
        self.folder = self.base / f"{__version__}-{code_fingerprint()}"
        self.settings_key = settings_key
        name = hashlib.blake2b(settings_key.encode(), digest_size=8).hexdigest()
        self._facts_file = self.folder / "facts.json"
        self._results_file = self.folder / f"results-{name}.json"
        self.facts: dict[str, tuple[str, Facts]] = {}
        self.results: dict[str, dict[str, Any]] = {}
        self.plan: dict[str, Any] = {}
        self._changed = False
        self._load()

    def _load(self) -> None:
        for file, loader in ((self._facts_file, self._load_facts), (self._results_file, self._load_results)):
            try:
                data = json.loads(file.read_text(encoding="utf-8"))
                loader(data)
            except (OSError, ValueError, TypeError, KeyError, AttributeError, IndexError):
                # Missing or damaged (a file of the wrong shape too): start over.
                if file is self._facts_file:
                    self.facts = {}
                else:
                    self.results, self.plan = {}, {}

    def _load_facts(self, data: dict[str, Any]) -> None:
        self.facts = {path: (entry[0], Facts.from_json(entry[1])) for path, entry in data.items()}

    def _load_results(self, data: dict[str, Any]) -> None:
        if data.get("settings") == self.settings_key:
            self.results = data["files"]
            self.plan = data.get("plan") or {}

    # -- results -------------------------------------------------------------------------
    def lookup(self, project: Project, path: Path, called_elsewhere: frozenset[str]) -> list[Finding] | None:
        """The cached findings of ``path``'s analysis if nothing it depended on changed."""
        try:
            entry = self.results.get(str(path))
            if entry is None or entry["called_elsewhere"] != sorted(called_elsewhere):
                return None
            if any(project.digest_of(p) != d for p, d in entry["files"].items()):
                return None
            if any(project.listing_digest_of(d) != h for d, h in entry["dirs"].items()):
                return None
            return [finding_from_json(f) for f in entry["findings"]]
        except (KeyError, TypeError, ValueError, AttributeError):  # an entry of the wrong shape
            return None

    def store(self, outcome: Outcome, called_elsewhere: frozenset[str]) -> None:
        if outcome.errors:
            return  # an internal error is retried next time
        self._changed = True
        self.results[str(outcome.path)] = {
            "called_elsewhere": sorted(called_elsewhere),
            "files": outcome.files,
            "dirs": outcome.dirs,
            "findings": [asdict(f) for f in outcome.findings],
        }

    # -- the plan: which files to lint ---------------------------------------------------
    def lookup_plan(self, project: Project, key: str) -> tuple[list[Path], dict[Path, frozenset[str]]] | None:
        plan = self.plan
        try:
            if plan.get("key") != key:
                return None
            if any(project.digest_of(p) != d for p, d in plan["files"].items()):
                return None
            if any(project.listing_digest_of(d) != h for d, h in plan["dirs"].items()):
                return None
            linted = [Path(p) for p in plan["linted"]]
            return linted, {path: frozenset(plan["called"].get(str(path), ())) for path in linted}
        except (KeyError, TypeError, ValueError, AttributeError):  # a plan of the wrong shape
            return None

    def store_plan(self, key: str, linted: list[Path], called: dict[Path, frozenset[str]],
                   files: dict[str, str], dirs: dict[str, str]) -> None:
        self._changed = True
        self.plan = {"key": key, "linted": [str(p) for p in linted], "files": files, "dirs": dirs,
                     "called": {str(p): sorted(n) for p, n in called.items() if n}}

    # -- writing -----------------------------------------------------------------------------
    def save(self, project: Project) -> None:
        """Write both stores, keeping the entries of files that still exist (if anything changed)."""
        if not self._changed and not project.new_facts:
            return
        facts = dict(self.facts)
        facts.update({str(p): e for p, e in project.new_facts.items()})
        facts = {p: e for p, e in facts.items() if os.path.exists(p)}
        results = {p: e for p, e in self.results.items() if os.path.exists(p)}
        try:
            self._prepare()
            _write_json(self._facts_file, {p: [d, f.to_json()] for p, (d, f) in facts.items()})
            _write_json(self._results_file, {"settings": self.settings_key, "files": results, "plan": self.plan})
        except OSError as exc:
            print(f"gpudoctor: warning: cannot write the cache in {self.base}: {exc.strerror or exc} "
                  "(use --no-cache to skip it)", file=sys.stderr)

    def _prepare(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        for name, text in ((".gitignore", "*\n"), ("CACHEDIR.TAG", _TAG), ("README", _README)):
            marker = self.base / name
            if not marker.exists():
                marker.write_text(text, encoding="utf-8")
        for old in self.base.iterdir():  # caches of other gpudoctor versions
            if old.is_dir() and old != self.folder:
                shutil.rmtree(old, ignore_errors=True)


def _write_json(file: Path, data: object) -> None:
    temporary = file.with_name(f".{file.name}.{os.getpid()}.tmp")
    temporary.write_text(json.dumps(data, separators=(",", ":")), encoding="utf-8")
    temporary.replace(file)


def finding_from_json(data: dict[str, Any]) -> Finding:
    fix = data.get("fix")
    return Finding(
        code=data["code"], name=data["name"], message=data["message"], severity=data["severity"],
        site=Site(**data["site"]),
        related=tuple(Related(Site(**r["site"]), r["message"]) for r in data.get("related", ())),
        fix_hint=data.get("fix_hint"),
        fix=None if fix is None else Fix(fix["message"], fix["applicability"], tuple(
            Edit(e["content"], tuple(e["start"]), tuple(e["end"])) for e in fix["edits"])),  # type: ignore[arg-type]
        reached=None if (reached := data.get("reached")) is None else
        Related(Site(**reached["site"]), reached["message"]),
    )
