"""The gate: what a file's text says about whether it can matter, before any parse.

Facts about a file are a function of its bytes alone, so the cache keeps them by hash.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from gpudoctor.knowledge.distributed import (
    COLLECTIVE_MODULES,
    GATE_CALLS,
    GENERIC_CALL_PATTERN,
    IMPORT_PATTERN,
    STRATEGY_WORDS,
)
from gpudoctor.knowledge.distributed import GATE_WORDS as COLLECTIVE_WORDS
from gpudoctor.knowledge.processes import LIBRARY_POOLS
from gpudoctor.knowledge.registry import CALL_TIME_VARIABLES, CONFIG_WORDS, GPU_WORDS, READERS

# The keyword that makes a library's method start processes (``num_proc=``).
LIBRARY_POOL_WORDS = tuple(sorted({pool.workers + "=" for pool in LIBRARY_POOLS}))
# What a file must mention for a rule to report anything in it: a process or thread start,
# a GPU environment write or device configuration, a DataLoader, or a gpudoctor directive.
# (Device configuration that must precede a runtime: registry.CONFIG_WORDS.)
ACTS = re.compile(
    r"multiprocess|concurrent\.futures|ProcessPool|fork\(|DataLoader|start_processes|\.spawn\(|"
    + "".join(re.escape(word) + "|" for word in LIBRARY_POOL_WORDS) +
    r"environ\[[^\]\n]+\]\s*=[^=]|environ\.(?:update|setdefault)|putenv|"
    + "|".join(re.escape(word) for word in (*CONFIG_WORDS, *STRATEGY_WORDS)) +
    r"|(?i:noqa:[\w \t,]*?\bGD\d)|gpudoctor:"
)
# Words one of which a file matching ACTS contains (``str.find`` is faster than the
# regular expression, docs/performance.md "The text gate"; the expression confirms).
_ACTS_WORDS = ("multiprocess", "concurrent.futures", "ProcessPool", "fork(", "DataLoader", *LIBRARY_POOL_WORDS,
               "start_processes", ".spawn(", "environ", "putenv", *CONFIG_WORDS, *STRATEGY_WORDS, "gpudoctor:")
# Any case, as ruff and flake8 read it; a gpudoctor code anywhere in the list.
_NOQA_GD = re.compile(r"noqa:[\w \t,]*?\bGD\d", re.I)
# What an imported module must mention for a GPU-using importer to matter: it starts
# processes (the importer's GPU work may run in them) or configures the GPU (after the
# importer initialized it), by a call or by a variable a GPU runtime reads, or it calls a
# collective of a distributed job (the importer may call it under a test on the rank). Plain words,
# which ``str.find`` searches for faster than a regular expression (docs/performance.md).
PROCESS_WORDS = ("multiprocess", "concurrent.futures", "ProcessPool", "fork(", "DataLoader", *LIBRARY_POOL_WORDS,
                 "start_processes",
                 ".spawn(")
STARTS_WORDS = (*PROCESS_WORDS, *CONFIG_WORDS, *STRATEGY_WORDS, *READERS,
                *sorted(CALL_TIME_VARIABLES - READERS.keys()))
# A collective of a distributed job (knowledge/distributed.py): its words, in a file that
# imports a module whose collectives the tables list (see mentions_collectives).
_COLLECTIVE_IMPORT = re.compile(IMPORT_PATTERN, re.M)
_GENERIC_CALL = re.compile(GENERIC_CALL_PATTERN)


def _alternatives(words: tuple[str, ...]) -> str:
    """A regular expression for any of ``words``, without those that contain another one
    (``cupyx`` is found as ``cupy``)."""
    kept = [w for w in words if not any(other != w and other in w for other in words)]
    return "|".join(re.escape(word) for word in kept)


# What a module must mention for its code to have effects worth following into it: a
# name of a GPU framework (registry.GPU_WORDS).
USES_GPU = re.compile(_alternatives(GPU_WORDS))
# Import statements, parenthesized ones whole: an import of a module names it in one of them.
_IMPORT_STATEMENT = re.compile(r"^[ \t]*(?:from[ \t]+[\w.]+[ \t]+import[ \t]*(?:\([^)]*\)|[^\n]*)|import[ \t][^\n]*)",
                               re.M)
_WORD = re.compile(r"\w+")
_RELATIVE_IMPORT = re.compile(r"^[ \t]*from[ \t]+\.", re.M)
_COMMENT = re.compile(r"#[^\n]*")
_CONTINUED = re.compile(r"\\\r?\n")
# These two start with a line break, not ``^`` in MULTILINE mode: the regular expression
# engine then looks for the break (fast), not at every position; texts get one in front.
_FROM_IMPORT = re.compile(r"\n[ \t\f]*from[ \t]+(\.*[\w.]*)[ \t]+import[ \t]*(\([^)]*\)|[^\n#;]*)")
_PLAIN_IMPORT = re.compile(r"\n[ \t\f]*import[ \t]+([^\n#;]+)")
_IMPORT_LINE = re.compile(r"\n[ \t\f]*(?:from\s+(\.*[\w.]*)\s+import|import\s+([\w., ]+))")
# Every word any of the mentions below look for, searched once per file.
_ALL_WORDS = tuple(dict.fromkeys((*_ACTS_WORDS, *STARTS_WORDS)))


@dataclass(frozen=True)
class Facts:
    """What the gate needs to know about one file; a function of its bytes alone (cacheable)."""

    acts: bool  # its code can get a finding: starts processes, configures the GPU, ...
    uses_gpu: bool  # it mentions a GPU framework
    starts: bool  # as an imported module, it starts processes or configures the GPU
    follow: bool  # as an imported module, its code is worth walking
    imports: tuple[tuple[str, int], ...]  # (module, relative level) of its import lines
    spawns: bool = False  # as an imported module, it starts processes (``starts`` without the GPU settings)
    members: tuple[tuple[str, int], ...] = ()  # ``pkg.name`` for each ``from pkg import name``
    program: bool = False  # run as a program: a notebook, or a script with a main guard

    def __reduce__(self) -> tuple[type[Facts], tuple[object, ...]]:
        # Pickled as its fields (workers get every file's facts): faster than a
        # dataclass's default, which pickles a dict of them (docs/performance.md).
        return (Facts, (self.acts, self.uses_gpu, self.starts, self.follow, self.imports, self.spawns,
                        self.members, self.program))

    def to_json(self) -> list[object]:
        return [self.acts, self.uses_gpu, self.starts, self.follow, [list(i) for i in self.imports],
                self.spawns, [list(m) for m in self.members], self.program]

    @classmethod
    def from_json(cls, data: list[Any]) -> Facts:  # as to_json wrote it, read back from JSON
        acts, uses_gpu, starts, follow, imports, spawns, members, program = data
        return cls(bool(acts), bool(uses_gpu), bool(starts), bool(follow),
                   tuple((str(n), int(level)) for n, level in imports),
                   bool(spawns), tuple((str(n), int(level)) for n, level in members), bool(program))


UNREADABLE = Facts(acts=True, uses_gpu=False, starts=False, follow=False, imports=())  # reported as GD000


def _plain_lines(text: str) -> str:
    """``text`` with lines a ``^`` finds: a file whose lines end in a lone ``\r`` (old Mac
    style) gets ``\n`` endings (CRLF files already have them)."""
    return text.replace("\r", "\n") if "\r" in text and "\n" not in text else text


def import_names(text: str) -> tuple[tuple[str, int], ...]:
    text = _plain_lines(text)
    found: list[tuple[str, int]] = []
    for match in _IMPORT_LINE.finditer("\n" + text):
        if match.group(1) is not None:
            dotted = match.group(1)
            level = len(dotted) - len(dotted.lstrip("."))
            names = [dotted.lstrip(".")]
        else:
            level = 0
            names = [n.split(" as ")[0].strip() for n in match.group(2).split(",")]
        found.extend((name, level) for name in names if name or level)
    return tuple(dict.fromkeys(found))


def mentioned_words(text: str) -> frozenset[str]:
    """The words of the mentions below that ``text`` contains: each searched for once, and
    the answers of ``mentions_acts``, ``mentions_starts`` and ``mentions_processes`` read from it."""
    return frozenset(word for word in _ALL_WORDS if word in text)


def mentions_processes(words: frozenset[str]) -> bool:
    """Does the text mention one of PROCESS_WORDS? (``words``: its ``mentioned_words``.)"""
    return not words.isdisjoint(PROCESS_WORDS)


def _from_imports(text: str) -> Iterator[tuple[str, int, str, str]]:
    """(module, level, name, bound name) for each name of each ``from module import ...``
    (``*`` for a star import), read line by line."""
    text = _plain_lines(text)
    if "\\\n" in text or "\\\r\n" in text:  # a statement continued on the next line
        text = _CONTINUED.sub(" ", text)
    if ";" in text:  # statements joined on one line are read as lines of their own
        text = text.replace(";", "\n")
    for match in _FROM_IMPORT.finditer("\n" + text):
        dotted = match.group(1)
        base = dotted.lstrip(".")
        level = len(dotted) - len(base)
        names = match.group(2)
        if "#" in names:
            names = _COMMENT.sub("", names)
        for part in names.strip(" \t()\r\n").split(","):
            name, _, alias = part.strip(" \t()\r\n").partition(" as ")
            name = name.strip()
            yield base, level, name, alias.strip() or name


def import_members(text: str) -> tuple[tuple[str, int], ...]:
    """(``pkg.name``, level) for every ``from pkg import name``: the modules such an import
    may run, when ``name`` is a module of the package rather than a name it binds."""
    return tuple(dict.fromkeys((f"{base}.{name}" if base else name, level)
                               for base, level, name, _bound in _from_imports(text) if name.isidentifier()))


def reexports(text: str) -> tuple[dict[str, tuple[str, int]], tuple[tuple[str, int], ...]]:
    """What a package ``__init__`` hands on from other modules: the name each ``from m import
    name [as bound]`` binds, mapped to (``m.name``, level), and the (``m``, level) of each
    ``from m import *``. An importer's ``from pkg import bound`` gets ``m``'s ``name``."""
    named: dict[str, tuple[str, int]] = {}
    stars: list[tuple[str, int]] = []
    for base, level, name, bound in _from_imports(text):
        if name == "*":
            stars.append((base, level))
        elif name.isidentifier() and bound.isidentifier():
            named[bound] = (f"{base}.{name}" if base else name, level)
    return named, tuple(dict.fromkeys(stars))


def from_imports(text: str) -> tuple[tuple[str, int, str, str], ...]:
    """(module, level, name, bound name) for each name of each ``from module import ...``
    (``*`` for a star import)."""
    return tuple(_from_imports(text))


def dotted_imports(text: str) -> tuple[tuple[str, str], ...]:
    """(module, bound name) for every ``import module [as bound]``, the module in full:
    ``import a.b`` runs ``a`` and ``a.b`` and binds ``a``."""
    found: list[tuple[str, str]] = []
    for match in _PLAIN_IMPORT.finditer("\n" + _plain_lines(text)):
        for part in match.group(1).split(","):
            module, _, alias = part.strip(" \t()\r").partition(" as ")
            module, alias = module.strip(), alias.strip()
            if module and all(p.isidentifier() for p in module.split(".")):
                found.append((module, alias if alias.isidentifier() else module.split(".")[0]))
    return tuple(dict.fromkeys(found))


def plain_imports(text: str) -> tuple[tuple[str, str], ...]:
    """(module, bound name) for every ``import module [as bound]``: ``import a.b`` binds
    ``a``, to the module ``a``."""
    found: list[tuple[str, str]] = []
    for match in _PLAIN_IMPORT.finditer("\n" + _plain_lines(text)):
        for part in match.group(1).split(","):
            module, _, alias = part.strip(" \t()\r").partition(" as ")
            module, alias = module.strip(), alias.strip()
            if alias.isidentifier() and all(p.isidentifier() for p in module.split(".")):
                found.append((module, alias))
            elif not alias and all(p.isidentifier() for p in module.split(".")):
                found.append((module.split(".")[0], module.split(".")[0]))
    return tuple(dict.fromkeys(found))


def attributes_read(text: str, bound: str) -> tuple[str, ...]:
    """The names the text reads as ``bound.name`` (not as ``other.bound.name``)."""
    if f"{bound}." not in text:
        return ()
    return tuple(dict.fromkeys(re.findall(rf"(?<![\w.]){bound}\.(\w+)", text)))


def mentions_starts(words: frozenset[str]) -> bool:
    """Does the text mention one of STARTS_WORDS? (``words``: its ``mentioned_words``.)"""
    return not words.isdisjoint(STARTS_WORDS)


def mentions_collectives(text: str) -> bool:
    """Does the text name a collective of a distributed job, in a file that imports a module
    that has them? (The import first: few files have one, and the words are many.)"""
    if not collectives_possible(text):
        return False
    if any(word in text for word in COLLECTIVE_WORDS):
        return True
    # (``.reduce(`` first, then its owner: one search per generic name, not one per pair)
    return any(call in text for call in GATE_CALLS) and _GENERIC_CALL.search(text) is not None


def collectives_possible(text: str) -> bool:
    """Does the text import a module whose collectives the tables list? (The modules' names
    are looked for first: most files name none.)"""
    return any(module in text for module in COLLECTIVE_MODULES) and _COLLECTIVE_IMPORT.search(text) is not None


def mentions_acts(text: str, words: frozenset[str]) -> bool:
    """The ACTS search, with a fast rejection of the many files that mention none of its
    words (``words``: the text's ``mentioned_words``)."""
    if not words.isdisjoint(_ACTS_WORDS):
        return ACTS.search(text) is not None
    return "noqa" in text.lower() and _NOQA_GD.search(text) is not None


def has_relative_import(text: str) -> bool:
    """Does a line of the text start with ``from .``? (The search is only made in a text
    with a space or a tab before a dot: most have none.)"""
    return ("\t." in text or " ." in text) and _RELATIVE_IMPORT.search(text) is not None


def imported_words(text: str) -> set[str]:
    """Every word of every import statement: a module imported by any means is among them."""
    return {word for match in _IMPORT_STATEMENT.finditer(text) for word in _WORD.findall(match.group(0))}


def import_candidates(text: str) -> tuple[tuple[str, int], ...]:
    """(module, level) for every module an import statement may import, members included:
    ``from pkg import a`` may import ``pkg`` and ``pkg.a``."""
    found: list[tuple[str, int]] = []
    # Statements joined by a backslash or a semicolon are statements of their own lines.
    text = text.replace("\\\n", " ").replace(";", "\n")
    for match in _IMPORT_STATEMENT.finditer(text):
        statement = _COMMENT.sub("", match.group(0)).strip()
        if statement.startswith("from"):
            # (not str.partition("import"): ``from importlib import x`` names importlib)
            dotted = statement[4:].lstrip().split(None, 1)[0] if statement[4:].strip() else ""
            level = len(dotted) - len(dotted.lstrip("."))
            base = dotted.lstrip(".")
            found.append((base, level))  # its members: import_members, below
        else:
            for part in statement[6:].split(","):
                name = part.split(" as ")[0].strip()
                if name:
                    found.append((name, 0))
    found.extend(import_members(text))
    return tuple(dict.fromkeys(found))
