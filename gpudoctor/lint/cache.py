"""The result cache in ``.gpudoctor_cache/``: what a second run on unchanged code can reuse.

Three stores, all JSON (a cache is data; it must never be able to run code):

- **facts**: per file, the gate's view of it (does it act, use a GPU framework, what does it
  import), the words of its import statements and its noqa comments, valid while the
  file's bytes hash the same; and per file the status (size,
  times, inode) its digest was taken with, so that a later run reads again only the files
  whose status changed (analysis/project.py, ``signature``).
- **walks**: per module walked for an import, the summaries of its walks
  (analysis/summaries.py): what another module's analysis reads of it, valid while every
  file and directory listing the walk read is unchanged, so that a run after an edit of
  one file walks that file and not the modules it imports. One file per module, read only
  when the module is needed; at most ``MAX_SUMMARY_FILES``, those used last.
- **results**: per analysed file, the findings its analysis produced, valid while its
  bytes, the names the project uses from it, and every file and directory listing the
  analysis read are unchanged; and the plan of the last run (which files to lint, which
  others to analyse for their context: callers.py), valid while every file and listing it
  read is unchanged. What an entry read is a list of numbers into two tables of (file,
  digest) and (folder, listing digest) pairs the entries share: an analysis of keras reads
  some sixty files and a hundred folders, most of them the same as the next one's.

All live under a folder named for the gpudoctor version and a fingerprint of the linter's
own code, and results and walks under a key of the settings that change the analysis (target
Python, platform, project root). Rule selection is applied after the cache, so changing
``--select`` reuses it. A cache that cannot be read is ignored; one that cannot be written
costs a warning, never a failed run.

What gpudoctor may write, and delete, is decided in ``cache_folder``; which files it may
believe, in ``cache_seal``: a store file is read only when it is a regular file of this
user, at most ``LIMIT`` bytes, sealed with this user's key; only then is it parsed. Any
other file costs one warning line and is rebuilt, never a traceback, a hang or a changed
finding.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import sys
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpudoctor import __version__, file_replace
from gpudoctor.input_file import read_regular
from gpudoctor.lint import cache_folder, cache_seal
from gpudoctor.lint.cache_folder import FOLDER
from gpudoctor.lint.findings import Edit, Finding, Fix, Related, Site
from gpudoctor.lint.frontend.project_gate import Kept
from gpudoctor.lint.frontend.text_facts import Facts
from gpudoctor.lint.noqa import FileDirectives

if TYPE_CHECKING:
    from gpudoctor.lint.analysis.project import Project
    from gpudoctor.lint.analysis.shared_walks import Stored, Walked
    from gpudoctor.lint.file_analysis import Outcome
    from gpudoctor.lint.frontend.reading import Signature

__all__ = ["FOLDER", "LIMIT", "Cache", "code_fingerprint", "finding_from_json"]

# The largest store file read back (or written): it refuses the file of gigabytes that
# would end in a MemoryError (sizes measured: docs/performance.md).
LIMIT = 128 * 1024 * 1024
# The most modules whose summaries are kept: those used by the latest runs (sizes:
# docs/performance.md).
MAX_SUMMARY_FILES = 2000
# A run that analyses more files than this in its own process (a whole project with
# ``--jobs 1``) writes no summaries: writing them costs it a third more, and the run that
# needs them, one that names a few files, writes its own.
SUMMARY_MAX_FILES = 20
# The tables of (file, digest) pairs are rid of pairs no entry names once they hold twice
# as many as after the last time, and this many more.
COMPACT_SLACK = 4096


def code_fingerprint() -> str:
    """The gpudoctor version and the size and time of every file of the linter's code."""
    package = Path(__file__).resolve().parent
    parts = [__version__]
    for path in sorted(package.rglob("*.py")):
        info = path.stat()
        parts.append(f"{path.relative_to(package)}:{info.st_size}:{info.st_mtime_ns}")
    return hashlib.blake2b("\n".join(parts).encode(), digest_size=8).hexdigest()


class Cache:
    """The cache of one project root, for one set of analysis settings.

    ``usable`` is False when there is no folder gpudoctor may use or no key to seal with
    (a warning has said why): the run then goes without a cache.
    """

    def __init__(self, root: Path, settings_key: str, folder: Path | None = None) -> None:
        self._warned: set[str] = set()
        self.settings_key = settings_key
        self.facts: dict[str, tuple[str, Facts]] = {}
        self.import_words: dict[str, tuple[str, frozenset[str] | None]] = {}
        self._directives: dict[str, tuple[str, FileDirectives]] = {}  # path -> (digest, noqa comments)
        self._new_directives: dict[str, tuple[str, FileDirectives]] = {}
        self.signatures: dict[str, tuple[Signature, str]] = {}  # path -> (status, digest)
        self.results: dict[str, dict[str, Any]] = {}
        self.plan: dict[str, Any] = {}
        # The (path, digest) pairs the results and the plan name by number, of files and
        # of folder listings; whether each holds in this run; the size of both tables when
        # they were last rid of pairs no entry names.
        self._pairs: dict[str, list[list[str]]] = {"files": [], "dirs": []}
        self._numbers: dict[str, dict[tuple[str, str], int]] | None = None
        self._holds: dict[str, dict[int, bool]] = {"files": {}, "dirs": {}}
        # The run (its Project) ``_holds`` was found in: a second run with this cache (``--fix``
        # lints again after writing its fixes) finds it again, its files may have changed.
        self._holds_in: Project | None = None
        self._compacted = 0
        # "path\0import depth" -> the summaries of that module's walks (several: other
        # import cycles, other room to nest in), and which run used each last
        # (read from its file when first needed)
        self.walks: dict[str, list[dict[str, Any]]] = {}
        self._walks_used: set[str] = set()  # modules whose summaries this run used
        self._walks_changed: set[str] = set()  # ... and those whose summaries it made
        self._readable_folder: bool | None = None
        self._changed = False
        self.base = cache_folder.choose(root, None if folder is None else str(folder), self._warn)
        self._key = b""
        if self.base is not None:
            key = cache_seal.user_key()
            if isinstance(key, str):
                self._warn(f"{key}: running without the cache")
                self.base = None
            else:
                self._key = key
        self.folder = None if self.base is None else self.base / f"{__version__}-{code_fingerprint()}"
        name = hashlib.blake2b(settings_key.encode(errors="surrogateescape"), digest_size=8).hexdigest()
        self._facts_name = "facts.json"
        self._results_name = f"results-{name}.json"
        self._walks_prefix = f"walks-{name}-"
        self._load()

    def kept(self) -> Kept:
        """What the project's files' entries hold, for the run's Project."""
        return Kept(self.facts, self.import_words, self.signatures)

    @property
    def usable(self) -> bool:
        return self.folder is not None

    def _warn(self, message: str) -> None:
        if message not in self._warned:  # one line per problem and run, however often met
            self._warned.add(message)
            print(f"gpudoctor: warning: {message}", file=sys.stderr)

    def _readable(self) -> bool:
        """Is there a cache folder gpudoctor wrote, to read the stores from?"""
        if self._readable_folder is None:
            self._readable_folder = self._judge_folder()
        return self._readable_folder

    def _judge_folder(self) -> bool:
        if self.base is None or self.folder is None or cache_folder.judge(self.base) != cache_folder.OURS:
            return False  # nothing gpudoctor wrote is there yet
        if not cache_folder.is_own_folder(self.folder):
            if self.folder.exists() or self.folder.is_symlink():
                self._warn(f"ignoring {self.folder}: not a folder gpudoctor made (it is rebuilt)")
            return False
        return True

    def _load(self) -> None:
        """Read the facts and results stores (the summaries' files are read when needed)."""
        if not self._readable():
            return
        problems = []
        for name, loader in ((self._facts_name, self._load_facts), (self._results_name, self._load_results)):
            try:
                loader(self._read(name))
            except FileNotFoundError:
                continue  # not written yet
            except (OSError, cache_seal.Rejected) as exc:
                problems.append(f"{name}: {getattr(exc, 'strerror', None) or exc}")
            except (ValueError, TypeError, KeyError, AttributeError, IndexError, RecursionError, MemoryError):
                # Sealed, so gpudoctor's own writing, yet not of the shape this code reads.
                problems.append(f"{name}: not what this gpudoctor writes")
            else:
                continue
            if name == self._facts_name:
                self.facts, self.import_words, self.signatures, self._directives = {}, {}, {}, {}
            else:
                self.results, self.plan = {}, {}
                self._pairs = {"files": [], "dirs": []}
        if problems:
            self._warn(f"ignoring the result cache in {self.folder}: {'; '.join(problems)} (it is rebuilt)")

    def _read(self, name: str) -> Any:
        """The JSON of store file ``name``, once it proved to be this user's own sealed file."""
        assert self.folder is not None
        path = self.folder / name
        info = path.lstat()
        if stat.S_ISLNK(info.st_mode):
            raise cache_seal.Rejected("a symbolic link, not a file gpudoctor wrote")
        if not cache_seal.mine(info):
            raise cache_seal.Rejected("belongs to another user")
        data = read_regular(path, LIMIT, follow=False)  # no FIFO, no device, no gigabytes
        body = cache_seal.unseal(self._key, f"{self.folder.name}/{name}", data)
        return json.loads(body)

    def _load_facts(self, data: dict[str, Any]) -> None:
        self.facts = {path: (entry[0], Facts.from_json(entry[1])) for path, entry in data["facts"].items()}
        self.import_words = {path: (str(digest), None if words is None else frozenset(str(w) for w in words))
                             for path, (digest, words) in data["import_words"].items()}
        self._directives = {path: (str(digest), FileDirectives.from_json(found))
                            for path, (digest, found) in data["noqa"].items()}
        self.signatures = {path: ((int(size), int(modified), int(changed), int(inode)), str(digest))
                           for path, (size, modified, changed, inode, digest) in data["signatures"].items()}

    def _load_results(self, data: dict[str, Any]) -> None:
        if data.get("settings") == self.settings_key:
            pairs = {"files": data["pairs"], "dirs": data["listings"]}
            if not all(_pair_table(table) for table in pairs.values()):
                raise TypeError("pairs")
            self.results = data["files"]
            self.plan = data.get("plan") or {}
            self._pairs = pairs
            self._compacted = int(data["compacted"])

    def _summary_file(self, key: str) -> str:
        digest = hashlib.blake2b(key.encode(errors="surrogateescape"), digest_size=8).hexdigest()
        return f"{self._walks_prefix}{digest}.json"

    def _summaries(self, key: str) -> list[dict[str, Any]]:
        """The summaries kept for one module walked at one import depth ("path\\0depth"),
        read from its file when first asked for."""
        found = self.walks.get(key)
        if found is not None:
            return found
        found = self.walks[key] = []
        if not self._readable():
            return found
        name = self._summary_file(key)
        try:
            data = self._read(name)
            if data.get("settings") == self.settings_key and data.get("key") == key:
                entries = data["entries"]
                if not isinstance(entries, list):
                    raise TypeError("entries")
                found[:] = [e for e in entries if isinstance(e, dict)]
        except FileNotFoundError:
            pass  # none made yet
        except (OSError, cache_seal.Rejected) as exc:
            self._warn(f"ignoring a module summary in {self.folder}: {name}: "
                       f"{getattr(exc, 'strerror', None) or exc} (it is rebuilt)")
        except (ValueError, TypeError, KeyError, AttributeError, IndexError, RecursionError, MemoryError):
            self._warn(f"ignoring a module summary in {self.folder}: {name}: not what this gpudoctor writes "
                       "(it is rebuilt)")
        return found

    # -- module summaries ----------------------------------------------------------------
    def stored_walk(self, project: Project) -> Stored:
        """The lookup a ModuleStore asks before walking a module (shared_walks.py): a summary
        made for the same module and import depth, in the same import cycles, that fits the
        room given, and whose files and listings are all unchanged."""
        from gpudoctor.lint.analysis.summaries import decode

        def lookup(path: Path, depth: int, walking: frozenset[Path], room: int, work: int
                   ) -> tuple[frozenset[Path], frozenset[Path], Walked] | None:
            names = {str(p) for p in walking}
            key = f"{path}\0{depth}"
            for entry in self._summaries(key):
                try:
                    if not set(entry["hits"]) <= names or names.intersection(entry["misses"]) or \
                            entry["peak"] > room or entry["height"] > work:
                        continue
                    if any(project.digest_of(p) != d for p, d in entry["files"].items()):
                        continue
                    if any(project.listing_digest_of(d) != h for d, h in entry["dirs"].items()):
                        continue
                    found = decode(project, path, entry)
                except (KeyError, TypeError, ValueError, AttributeError, IndexError, LookupError):
                    continue  # an entry of another shape: walked again
                self._walks_used.add(key)
                return found
            return None

        return lookup

    def store_walks(self, project: Project, analysed: int) -> None:
        """Keep the summaries of the walks made in this run (those a summary can write),
        unless it analysed more than ``SUMMARY_MAX_FILES`` files in this process."""
        made = project.walks.made
        if not made or analysed > SUMMARY_MAX_FILES:
            return  # (before the import: a run that walked nothing does not load the analysis)
        from gpudoctor.lint.analysis.summaries import encode, origins

        origin_of = origins(project, made)
        for path, depth, memo in made:
            entry = encode(project, path, depth, memo, origin_of)
            if entry is None:
                continue
            key = f"{path}\0{depth}"
            kept = self._summaries(key)
            kept[:] = [e for e in kept if (e.get("hits"), e.get("misses")) != (entry["hits"], entry["misses"])]
            kept.append(entry)
            self._walks_changed.add(key)

    def _save_walks(self) -> None:
        """Write the summaries made, mark those used (their file's time), and keep at most
        ``MAX_SUMMARY_FILES`` files, the ones used last."""
        assert self.folder is not None
        import time

        now = time.time_ns()  # set, not left to the clock's tick: the order of runs is kept
        for key in sorted(self._walks_changed):
            if os.path.exists(key.split("\0", 1)[0]):
                name = self._summary_file(key)
                self._write(name, {"settings": self.settings_key, "key": key, "entries": self.walks[key]})
                os.utime(self.folder / name, ns=(now, now), follow_symlinks=False)
        for key in sorted(self._walks_used - self._walks_changed):
            try:
                os.utime(self.folder / self._summary_file(key), ns=(now, now), follow_symlinks=False)
            except OSError:
                continue
        if not self._walks_changed:
            return
        files = []
        for entry in os.scandir(self.folder):
            if entry.name.startswith("walks-") and entry.name.endswith(".json") and \
                    entry.is_file(follow_symlinks=False):
                files.append((entry.stat(follow_symlinks=False).st_mtime_ns, entry.name))
        if len(files) > MAX_SUMMARY_FILES:
            files.sort(reverse=True)
            for _, name in files[MAX_SUMMARY_FILES:]:
                (self.folder / name).unlink(missing_ok=True)

    # -- noqa comments ----------------------------------------------------------------------
    def directives(self, path: str, digest: str) -> FileDirectives | None:
        """The noqa comments of the file at ``path`` if its bytes are those of ``digest``."""
        found = self._directives.get(path)
        return found[1] if found is not None and found[0] == digest else None

    def note_directives(self, path: str, digest: str, found: FileDirectives) -> None:
        self._new_directives[path] = (digest, found)

    # -- results ----------------------------------------------------------------------------
    def lookup(self, project: Project, path: Path, called_elsewhere: frozenset[str]) -> Outcome | None:
        """The cached outcome of ``path``'s analysis if nothing it depended on changed: its
        findings, the functions it reached and left to others, and those run on their own
        after all (files and folders read are not given back)."""
        from gpudoctor.lint.file_analysis import Outcome

        try:
            entry = self.results.get(str(path))
            if entry is None or entry["called_elsewhere"] != _names_key(called_elsewhere):
                return None
            if not self._still_read(project, entry):
                return None
            reached = {str(k): [str(q) for q in v] for k, v in entry["reached"].items()}
            files, dirs = ({str(self._pairs[kind][n][0]): str(self._pairs[kind][n][1]) for n in entry[kind]}
                           for kind in ("files", "dirs"))
            return Outcome(path, [finding_from_json(f) for f in entry["findings"]], files, dirs, reached=reached,
                           deferred=[str(q) for q in entry["deferred"]], anyway=[str(q) for q in entry["anyway"]],
                           extra=[finding_from_json(f) for f in entry["extra"]])
        except (KeyError, TypeError, ValueError, AttributeError, IndexError):  # an entry of the wrong shape
            return None

    def _still_read(self, project: Project, entry: dict[str, Any]) -> bool:
        """Does every file and folder listing ``entry`` read hash as it did then?"""
        if self._holds_in is not project:
            self._holds, self._holds_in = {"files": {}, "dirs": {}}, project
        for kind, now in (("files", project.digest_of), ("dirs", project.listing_digest_of)):
            pairs, holds = self._pairs[kind], self._holds[kind]
            for number in entry[kind]:
                held = holds.get(number)
                if held is None:
                    if type(number) is not int or number < 0:
                        return False  # (not a number this code wrote: the entry is made again)
                    name, digest = pairs[number]
                    held = holds[number] = now(name) == digest
                if not held:
                    return False
        return True

    def _numbered(self, kind: str, read: dict[str, str]) -> list[int]:
        """The numbers of these (path, digest) pairs in the table of ``kind``, added if new."""
        if self._numbers is None:
            self._numbers = {k: {(p[0], p[1]): n for n, p in enumerate(table)} for k, table in self._pairs.items()}
        numbers, table = self._numbers[kind], self._pairs[kind]
        out = []
        for pair in read.items():
            number = numbers.get(pair)
            if number is None:
                number = numbers[pair] = len(table)
                table.append(list(pair))
            out.append(number)
        return out

    def store(self, outcome: Outcome, called_elsewhere: frozenset[str]) -> None:
        if outcome.errors:
            return  # an internal error is retried next time
        self._changed = True
        self.results[str(outcome.path)] = {
            "called_elsewhere": _names_key(called_elsewhere),
            "files": self._numbered("files", outcome.files),
            "dirs": self._numbered("dirs", outcome.dirs),
            "findings": [asdict(f) for f in outcome.findings],
            "reached": outcome.reached,
            "deferred": outcome.deferred,
            "anyway": outcome.anyway,
            "extra": [asdict(f) for f in outcome.extra],
        }

    # -- the plan: which files to lint ---------------------------------------------------
    def lookup_plan(self, project: Project, key: str
                    ) -> tuple[list[Path], list[Path], dict[Path, frozenset[str]], int] | None:
        plan = self.plan
        try:
            if plan.get("key") != key or not self._still_read(project, plan):
                return None
            linted = [Path(p) for p in plan["linted"]]
            context = [Path(p) for p in plan["context"]]
            return linted, context, {path: frozenset(plan["called"].get(str(path), ()))
                                     for path in [*linted, *context]}, int(plan["left_out"])
        except (KeyError, TypeError, ValueError, AttributeError, IndexError):  # a plan of the wrong shape
            return None

    def store_plan(self, key: str, linted: list[Path], context: list[Path], called: dict[Path, frozenset[str]],
                   left_out: int, files: dict[str, str], dirs: dict[str, str]) -> None:
        self._changed = True
        self.plan = {"key": key, "linted": [str(p) for p in linted], "context": [str(p) for p in context],
                     "left_out": left_out,
                     "files": self._numbered("files", files), "dirs": self._numbered("dirs", dirs),
                     "called": {str(p): sorted(n) for p, n in called.items() if n}}

    def _compact(self, results: dict[str, dict[str, Any]]) -> None:
        """Renumber the pairs the plan and ``results`` name, dropping the others, once the
        tables hold twice as many as after the last time (a run adds the pairs of what it
        read; the entries it replaced leave theirs behind)."""
        size = sum(len(table) for table in self._pairs.values())
        if size <= 2 * self._compacted + COMPACT_SLACK:
            return
        for path, entry in list(results.items()):
            if not _numbers_in(entry, self._pairs):
                del results[path]  # (an entry of another shape: its file is analysed again)
        if self.plan and not _numbers_in(self.plan, self._pairs):
            self.plan = {}
        entries = [*results.values(), *([self.plan] if self.plan else [])]
        for kind, table in self._pairs.items():
            renumber: dict[int, int] = {}
            kept: list[list[str]] = []
            for entry in entries:
                numbers = []
                for number in entry[kind]:
                    new = renumber.get(number)
                    if new is None:
                        new = renumber[number] = len(kept)
                        kept.append(table[number])
                    numbers.append(new)
                entry[kind] = numbers
            self._pairs[kind] = kept
        self._numbers = None
        self._holds = {"files": {}, "dirs": {}}
        self._compacted = sum(len(table) for table in self._pairs.values())

    # -- writing -----------------------------------------------------------------------------
    def save(self, project: Project) -> None:
        """Write both stores, keeping the entries of files that still exist (if anything changed)."""
        if self.folder is None or self.base is None:
            return
        if not self._changed and not project.gate.new_facts and not project.gate.new_words and \
                not project.new_signatures and not self._new_directives and \
                not self._walks_changed and not self._walks_used:
            return
        facts = dict(self.facts)
        facts.update({str(p): e for p, e in project.gate.new_facts.items()})
        facts = {p: e for p, e in facts.items() if os.path.exists(p)}
        directives = dict(self._directives)
        directives.update(self._new_directives)
        directives = {p: e for p, e in directives.items() if p in facts or os.path.exists(p)}
        words = dict(self.import_words)
        words.update({str(p): e for p, e in project.gate.new_words.items()})
        words = {p: e for p, e in words.items() if p in facts or os.path.exists(p)}
        signatures = dict(self.signatures)
        signatures.update(project.new_signatures)
        signatures = {p: e for p, e in signatures.items() if p in facts or p in words or os.path.exists(p)}
        results = {p: e for p, e in self.results.items() if os.path.exists(p)}
        try:
            state = cache_folder.claim(self.base)
            if state != cache_folder.OURS:
                self._warn(f"{self.base} {state}, not a folder gpudoctor made: the cache is not written")
                return
            self.folder.mkdir(mode=0o755, exist_ok=True)
            if not cache_folder.is_own_folder(self.folder):
                self._warn(f"{self.folder} is not a folder gpudoctor made: the cache is not written")
                return
            cache_folder.prune(self.base, self.folder.name)
            if project.gate.new_facts or project.gate.new_words or project.new_signatures or self._new_directives:
                self._write(self._facts_name, {
                    "facts": {p: [d, f.to_json()] for p, (d, f) in facts.items()},
                    "import_words": {p: [d, None if w is None else sorted(w)] for p, (d, w) in words.items()},
                    "noqa": {p: [d, found.to_json()] for p, (d, found) in directives.items()},
                    "signatures": {p: [*status, digest] for p, (status, digest) in signatures.items()}})
            if self._changed:
                self._compact(results)
                self.results = results  # (the entries left out are numbered for the tables before)
                self._write(self._results_name, {"settings": self.settings_key, "files": results,
                                                 "plan": self.plan, "pairs": self._pairs["files"],
                                                 "listings": self._pairs["dirs"],
                                                 "compacted": self._compacted})
            self._save_walks()
        except OSError as exc:
            self._warn(f"cannot write the cache in {self.base}: {exc.strerror or exc} (use --no-cache to skip it)")

    def _write(self, name: str, data: object) -> None:
        """Seal and write one store, whole: a temporary file (created anew, so a link planted
        under its name is not followed) renamed over the old one (a rename replaces a link
        at the destination, never writes through it)."""
        assert self.folder is not None
        body = json.dumps(data, separators=(",", ":")).encode()
        sealed = cache_seal.seal(self._key, f"{self.folder.name}/{name}", body)
        if len(sealed) > LIMIT:  # it could not be read back: keep the old one out of the way
            (self.folder / name).unlink(missing_ok=True)
            self._warn(f"the cache {name} would be larger than {LIMIT >> 20} MiB: not written")
            return
        file_replace.replace(self.folder / name, sealed, 0o600)


def _pair_table(table: object) -> bool:
    """Is ``table`` a list of (path, digest) pairs, each two strings? (The pairs are keys
    of a dict and paths to look at: anything else is a store this code did not write.)"""
    return isinstance(table, list) and all(
        type(pair) is list and len(pair) == 2 and type(pair[0]) is str and type(pair[1]) is str for pair in table)


def _numbers_in(entry: object, pairs: dict[str, list[list[str]]]) -> bool:
    """Are ``entry``'s lists of files and folders read numbers of pairs in the tables?"""
    return isinstance(entry, dict) and all(
        isinstance(numbers := entry.get(kind), list) and
        all(type(n) is int and 0 <= n < len(table) for n in numbers)
        for kind, table in pairs.items())


def _names_key(names: frozenset[str]) -> str:
    """What a result keeps of the names the project uses from its file (compared, never
    read back: a module of keras can have hundreds)."""
    return hashlib.blake2b("\0".join(sorted(names)).encode(errors="surrogateescape"), digest_size=16).hexdigest()


def finding_from_json(data: dict[str, Any]) -> Finding:
    fix = data.get("fix")
    return Finding(
        code=data["code"], name=data["name"], message=data["message"], severity=data["severity"],
        site=Site(**data["site"]),
        related=tuple(Related(Site(**r["site"]), r["message"]) for r in data.get("related", ())),
        fix_hint=data.get("fix_hint"),
        fix=None if fix is None else Fix(fix["message"], fix["applicability"], tuple(
            Edit(e["content"], tuple(e["start"]), tuple(e["end"])) for e in fix["edits"])),
        reached=None if (reached := data.get("reached")) is None else
        Related(Site(**reached["site"]), reached["message"]),
        no_fix=data.get("no_fix"),
    )
