"""The gate: what a file's text says about whether it can matter, before any parse."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpudoctor.lint.analysis.project import Project
from gpudoctor.lint.frontend.text_facts import Facts, import_members


def test_members_of_from_imports() -> None:
    text = ("from . import a, b as c\n"
            "from ..x.y import (\n    p,  # the p\n    q\n)\n"
            "from z import *\n"
            "from m import n  # note\n"
            "import plain.module\n"
            "    from inner import deep\n")
    assert import_members(text) == (("a", 1), ("b", 1), ("x.y.p", 2), ("x.y.q", 2), ("m.n", 0), ("inner.deep", 0))


def test_import_names_on_the_first_line_and_after_any_line_break() -> None:
    from gpudoctor.lint.frontend.text_facts import import_names

    for newline in ("\n", "\r\n", "\r"):
        text = newline.join(["import a.b as c, d", "from .e import f", "\fimport g", "x = 'import h'",
                             "    from ..i import j", "#from k import l", ""])
        assert import_names(text) == (("a.b", 0), ("d", 0), ("e", 1), ("g", 0), ("i", 2)), repr(newline)


@pytest.mark.parametrize("text", [
    "import multiprocessing\n", "x = 1\n", "os.environ['A'] = '1'\n", "os.environ['A'] == '1'\n",
    "tf.config.experimental.set_memory_growth(g, True)\n", "# noqa: GD101\n", "# NOQA:E501,gd102\n",
    "CUDA_VISIBLE_DEVICES\n", "os.fork()\n", "torch.multiprocessing.spawn(f)\n", "XLA_FLAGS\n",
])
def test_the_words_searched_once_answer_as_the_searches_did(text: str) -> None:
    from gpudoctor.lint.frontend.text_facts import (
        _ACTS_WORDS,
        ACTS,
        PROCESS_WORDS,
        STARTS_WORDS,
        mentioned_words,
        mentions_acts,
        mentions_processes,
        mentions_starts,
    )

    words = mentioned_words(text)
    searched_acts = ACTS.search(text) is not None if any(w in text for w in _ACTS_WORDS) else \
        "noqa" in text.lower() and re.search(r"noqa:[\w \t,]*?\bGD\d", text, re.I) is not None
    assert mentions_acts(text, words) == searched_acts
    assert mentions_starts(words) == any(w in text for w in STARTS_WORDS)
    assert mentions_processes(words) == any(w in text for w in PROCESS_WORDS)


def test_facts_survive_the_trip_to_a_worker() -> None:
    import pickle

    facts = Facts(acts=False, uses_gpu=True, starts=True, follow=False, imports=(("pkg", 0),),
                  spawns=True, members=(("pkg.pool", 0),))
    assert pickle.loads(pickle.dumps(facts)) == facts


def test_facts_survive_the_cache_format() -> None:
    facts = Facts(acts=False, uses_gpu=True, starts=True, follow=True, imports=(("pkg", 0),),
                  spawns=True, members=(("pkg.pool", 0), ("sub", 1)))
    assert Facts.from_json(facts.to_json()) == facts


def _project(tmp_path: Path, pool_module: str) -> Project:
    (tmp_path / "workers").mkdir()
    (tmp_path / "workers" / "__init__.py").write_text("")
    (tmp_path / "workers" / "pool.py").write_text(pool_module)
    (tmp_path / "train.py").write_text("import tensorflow as tf\nfrom workers import pool\n\n"
                                       "tf.constant(1.0)\npool.run_all(print, [1])\n")
    return Project(tmp_path)


def test_an_importer_of_a_package_module_that_starts_processes_is_linted(tmp_path: Path) -> None:
    project = _project(tmp_path, "import multiprocessing as mp\n\ndef run_all(f, xs):\n"
                                 "    with mp.Pool(2) as p:\n        return p.map(f, xs)\n")
    assert project.gate.may_matter(tmp_path / "train.py")


def test_not_when_the_package_module_only_sets_a_gpu_variable(tmp_path: Path) -> None:
    """Through a member import only process starts count: a module that configures the GPU
    at import is followed when it is imported by name (``import workers.pool``)."""
    project = _project(tmp_path, "import os\nos.environ['CUDA_VISIBLE_DEVICES'] = '0'\n\n"
                                 "def run_all(f, xs):\n    return [f(x) for x in xs]\n")
    assert not project.gate.may_matter(tmp_path / "train.py")


def test_not_when_the_member_is_a_name_not_a_module(tmp_path: Path) -> None:
    project = _project(tmp_path, "import multiprocessing as mp\n")
    (tmp_path / "train.py").write_text("import tensorflow as tf\nfrom workers import helper\n")
    assert not project.gate.may_matter(tmp_path / "train.py")


def test_members_whatever_the_line_endings() -> None:
    for newline in ("\n", "\r\n", "\r"):
        text = (f"from workers import pool{newline}from jobs import (a,{newline}  b){newline}"
                f"from x import c, \\{newline}    d{newline}")
        expected = (("workers.pool", 0), ("jobs.a", 0), ("jobs.b", 0), ("x.c", 0), ("x.d", 0))
        assert import_members(text) == expected, repr(newline)


def test_candidates_of_a_module_whose_name_starts_with_import() -> None:
    """``from importlib import resources`` names importlib (a split at the first "import"
    once read it as a relative import of nothing)."""
    from gpudoctor.lint.frontend.text_facts import import_candidates

    found = import_candidates("from importlib import resources\nfrom .sub import (p,\n  q)\nimport os, a.b as c\n")
    assert set(found) == {("importlib", 0), ("importlib.resources", 0), ("sub", 1), ("sub.p", 1), ("sub.q", 1),
                          ("os", 0), ("a.b", 0)}


def test_what_a_package_init_hands_on() -> None:
    from gpudoctor.lint.frontend.text_facts import reexports

    named, stars = reexports("from .pools import make_pool as start, other\nfrom . import gpu\n"
                             "from .core import *\nfrom a.b import (c,  # c\n    d as e)\nimport os\n")
    assert named == {"start": ("pools.make_pool", 1), "other": ("pools.other", 1), "gpu": ("gpu", 1),
                     "c": ("a.b.c", 0), "e": ("a.b.d", 0)}
    assert stars == (("core", 1),)


POOLS = ("import multiprocessing as mp\n\n"
         "def _build(n):\n    return mp.Pool(n)\n\n"
         "def make_pool(n):\n    return _build(n)\n\n"
         "def shard(xs, n):\n    return [xs[i::n] for i in range(n)]\n\n"
         "class Runner:\n    def run(self, f, xs):\n        return [f(x) for x in xs]\n\n"
         "LIMIT = 4\n")


def _handing_project(tmp_path: Path, init: str, imported: str) -> Project:
    """A package ``jobs`` whose ``__init__`` is ``init``; its pools (POOLS) in the
    subpackage ``jobs.impl``; train.py uses TensorFlow and imports ``imported`` from jobs."""
    (tmp_path / "jobs" / "impl").mkdir(parents=True)
    (tmp_path / "jobs" / "__init__.py").write_text(init)
    (tmp_path / "jobs" / "impl" / "__init__.py").write_text("from .pools import *\n")
    (tmp_path / "jobs" / "impl" / "pools.py").write_text(POOLS)
    (tmp_path / "train.py").write_text(f"import tensorflow as tf\nfrom jobs import {imported}\n")
    return Project(tmp_path)


@pytest.mark.parametrize(("init", "imported", "linted"), [
    # a function that starts processes (through a helper of its module), by any route
    ("from .impl.pools import make_pool\n", "make_pool", True),
    ("from .impl.pools import make_pool as new_pool\n", "new_pool", True),
    ("from .impl import make_pool\n", "make_pool", True),  # a subpackage's star import
    ("from .impl import *\n", "make_pool", True),
    ("from jobs.impl.pools import (\n    make_pool,\n)\n", "make_pool", True),
    ("from .impl import make_pool\n", "(\n    shard,\n    make_pool,\n)", True),
    # a class of a module that starts processes: its methods may
    ("from .impl.pools import Runner\n", "Runner", True),
    # a function that starts none, a constant, a name the package does not import
    ("from .impl.pools import shard\n", "shard", False),
    ("from .impl.pools import LIMIT\n", "LIMIT", False),
    ("from .impl.pools import make_pool as shard\n", "make_pool", False),
    ("from .impl import *\n", "missing", False),
    ("", "make_pool", False),
])
def test_an_importer_of_a_function_a_package_hands_on(tmp_path: Path, init: str, imported: str,
                                                       linted: bool) -> None:
    """``from jobs import make_pool``, where the package's ``__init__`` imports it from one
    of its modules: the importer is linted when that function starts processes."""
    project = _handing_project(tmp_path, init, imported)
    assert project.gate.may_matter(tmp_path / "train.py") is linted


def test_a_package_that_hands_on_its_own_name_does_not_loop(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "__init__.py").write_text("from b import *\n")
    (tmp_path / "b" / "__init__.py").write_text("from a import *\n")
    (tmp_path / "train.py").write_text("import tensorflow as tf\nfrom a import make_pool\n")
    assert not Project(tmp_path).gate.may_matter(tmp_path / "train.py")


def test_a_function_handed_on_makes_its_caller_an_entry_point(tmp_path: Path) -> None:
    """In a linted file, a function that calls a handed-on function that starts processes
    is analysed on its own, as one calling a pool module's function is."""
    project = _handing_project(tmp_path, "from .impl.pools import make_pool, shard\n", "make_pool, shard")
    (tmp_path / "train.py").write_text("import tensorflow as tf\nfrom jobs import make_pool, shard\n\n"
                                       "def run():\n    return make_pool(2)\n\n"
                                       "def split(xs):\n    return shard(xs, 2)\n")
    assert [u.name for u in project.entry_points(tmp_path / "train.py")] == ["run"]


def test_names_read_as_attributes_of_imported_packages() -> None:
    from gpudoctor.lint.frontend.text_facts import attributes_read, plain_imports

    text = "import jobs\nimport a.b, c as d\nx = jobs.make_pool(2)\ny = d.run(); a.b.f()\nz.jobs.q\n"
    assert plain_imports(text) == (("jobs", "jobs"), ("a", "a"), ("c", "d"))
    assert attributes_read(text, "jobs") == ("make_pool",)
    assert attributes_read(text, "d") == ("run",)
    assert attributes_read(text, "c") == ()


@pytest.mark.parametrize(("source", "linted"), [
    ("import jobs\n\njobs.make_pool(2)\n", True),
    ("import jobs as j\n\ndef run():\n    return j.make_pool(2)\n", True),
    ("import jobs\n\njobs.shard([], 2)\n", False),
    ("import jobs\n\nother.jobs.make_pool(2)\n", False),
])
def test_an_importer_of_a_package_that_reads_a_handed_on_function(tmp_path: Path, source: str,
                                                                   linted: bool) -> None:
    project = _handing_project(tmp_path, "from .impl.pools import make_pool, shard\n", "shard")
    (tmp_path / "train.py").write_text("import tensorflow as tf\n" + source)
    assert project.gate.may_matter(tmp_path / "train.py") is linted


def test_a_function_reading_a_handed_on_function_is_an_entry_point(tmp_path: Path) -> None:
    project = _handing_project(tmp_path, "from .impl.pools import make_pool, shard\n", "shard")
    (tmp_path / "train.py").write_text("import tensorflow as tf\nimport jobs\n\n"
                                       "def run():\n    return jobs.make_pool(2)\n\n"
                                       "def split(xs):\n    return len(xs)\n")
    assert [u.name for u in project.entry_points(tmp_path / "train.py")] == ["run"]
