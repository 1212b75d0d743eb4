"""Rings of modules whose functions call one another: summaries made once, in rounds.

A call into a ring is answered by a round of it made apart from any analysis (rings.py),
so a linted file's findings must not depend on which files were analysed before it, in
which process, or whether a cache held some of them; and each round is made once.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpudoctor.knowledge.processes import Target
from gpudoctor.lint import file_analysis
from gpudoctor.lint.analysis.analyzer import Analyzer
from gpudoctor.lint.analysis.project import Project
from gpudoctor.lint.analysis.rings import RING_ROUNDS

HEAD = "from multiprocessing import Pool\nimport tensorflow as tf\n\n\ndef work(x):\n    return tf.constant(x)\n\n\n"


def _ring(root: Path, modules: int) -> list[Path]:
    """``modules`` modules that import one another and whose ``run()`` calls every other
    module's: the even ones initialize TensorFlow first, the odd ones only start a pool
    (whose fork follows the init of whichever even module's ``run()`` called them)."""
    (root / "pyproject.toml").write_text('[project]\nname = "x"\nrequires-python = ">=3.10"\n')
    (root / "ring").mkdir()
    (root / "ring" / "__init__.py").write_text("")
    for i in range(modules):
        others = [j for j in range(modules) if j != i]
        body = ["    tf.constant(1)"] if i % 2 == 0 else []
        body += [f"    m{j}.run()" for j in others] + ["    Pool(2).map(work, [1])"]
        (root / "ring" / f"m{i}.py").write_text(
            HEAD + "".join(f"from ring import m{j}\n" for j in others) + "\n\ndef run():\n" + "\n".join(body) + "\n")
    return sorted((root / "ring").glob("m*.py"))


# ``gpudoctor lint`` in a child process, with workers for any amount of work (the test's
# ring is far smaller than what a run hands to workers: engine.PARALLEL_MIN_BYTES).
_RUN = """
import sys
from gpudoctor.cli import main
from gpudoctor.lint import engine

engine.PARALLEL_MIN_BYTES = 0
raise SystemExit(main(["lint", "--output-format", "json", "--exit-zero", *sys.argv[1:]]))
"""


def _lint(root: Path, files: list[Path], *options: str) -> str:
    done = subprocess.run([sys.executable, "-c", _RUN, *options, *map(str, files)], cwd=root,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    return done.stdout


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_ring_gives_the_same_findings_in_any_order_with_any_jobs_and_cache(tmp_path: Path) -> None:
    files = _ring(tmp_path, 8)
    first = _lint(tmp_path, files, "--no-cache", "--jobs", "1")
    found = json.loads(first)
    # Every module's pool is found: an odd module's after the init of the even one whose run() calls it.
    assert sorted(Path(f["filename"]).name for f in found if f["code"] == "GD101") == [f"m{i}.py" for i in range(8)]
    orders = [list(reversed(files)), files[3:] + files[:3], files[1::2] + files[::2]]
    # Each order once, and each of --jobs 1 and 2 with a changed order (the cold cache run
    # below is --jobs 2 in the first order): each dimension, not the full product of them.
    for order, jobs in zip(orders, ("2", "1", "2"), strict=True):
        assert _lint(tmp_path, order, "--no-cache", "--jobs", jobs) == first, (order, jobs)
    cache = tmp_path.parent / f"{tmp_path.name}-cache"
    for order in (files, orders[0]):  # a cold run, then a warm one named in another order
        assert _lint(tmp_path, order, "--cache-dir", str(cache), "--jobs", "2") == first
    # One file named alone (pre-commit: its importers are analysed as its context).
    alone = _lint(tmp_path, [files[5]], "--no-cache", "--jobs", "1")
    assert "m5.py" in alone
    for options in (("--no-cache", "--jobs", "2"), ("--cache-dir", str(cache), "--jobs", "1")):
        assert _lint(tmp_path, [files[5]], *options) == alone, options


def test_each_round_of_a_ring_call_is_made_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Each analysis used to summarise every function of the ring again, from its own order:
    # n analyses of n summaries of n calls. A round is made once for all of them.
    modules = 10
    files = _ring(tmp_path, modules)
    made: list[tuple[object, int]] = []
    ring_round = Analyzer._ring_round

    def counted(self: Analyzer, func: object, key: tuple[object, ...], *rest: object) -> object:
        made.append((key, rest[2]))  # (the call, its round)
        return ring_round(self, func, key, *rest)  # type: ignore[arg-type]

    monkeypatch.setattr(Analyzer, "_ring_round", counted)
    project = Project(tmp_path)
    for path in files:
        outcome = file_analysis.analyse(project, path, Target(11), frozenset())
        assert not outcome.errors, outcome.errors
        assert any(f.code == "GD101" for f in outcome.findings), outcome.findings
    assert len(made) == len(set(made)) == modules * RING_ROUNDS, len(made)


def test_a_pool_started_a_few_ring_calls_away_is_found(tmp_path: Path) -> None:
    # a.run() initializes TensorFlow, then calls b.step(), which calls c.start(), which
    # starts the pool: the ring's rounds follow calls into it RING_ROUNDS deep.
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\nrequires-python = ">=3.10"\n')
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    names = ["a", "b", "c", "d"]
    calls = {"a": "    tf.constant(1)\n    b.step()\n", "b": "    c.start()\n", "c": "    Pool(2).map(work, [1])\n",
             "d": "    a.run()\n"}
    defs = {"a": "run", "b": "step", "c": "start", "d": "main"}
    for name in names:
        imports = "".join(f"from pkg import {other}\n" for other in names if other != name)
        (tmp_path / "pkg" / f"{name}.py").write_text(HEAD + imports + f"\n\ndef {defs[name]}():\n{calls[name]}")
    files = sorted((tmp_path / "pkg").glob("[abcd].py"))
    found = json.loads(_lint(tmp_path, files, "--no-cache", "--jobs", "1"))
    assert [(Path(f["filename"]).name, f["code"]) for f in found if f["code"] == "GD101"] == [("c.py", "GD101")], found
