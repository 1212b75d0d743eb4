"""The prescan: which files are worth parsing, and which function bodies can wait."""

from __future__ import annotations

import textwrap
from pathlib import Path

import libcst as cst
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpudoctor.lint.frontend.parsed import ParsedModule, parse
from gpudoctor.lint.frontend.prescan import prescan
from gpudoctor.lint.frontend.skeleton import body_snippet, skeleton

FIXTURE_DIR = Path(__file__).resolve().parents[2] / "fixtures"


def _acts(source: str) -> bool:
    scan = prescan(textwrap.dedent(source))
    assert scan is not None
    return scan.acts


@pytest.mark.parametrize("source", [
    '"""Uses multiprocessing, they say."""\nimport json\n',  # only a docstring says it
    "# fork() here would be bad\nx = 1\n",
    "from multiprocessing.pool import ThreadPool\nThreadPool(4).map(len, [])\n",
    "import torch\nloader = torch.utils.data.DataLoader(ds, batch_size=4)\n",
    "import torch\nloader = torch.utils.data.DataLoader(ds, num_workers=0)\n",
    'import os\nos.environ["HF_HOME"] = "/data"\n',  # no GPU runtime reads it
    "import json\nsettings = {}\nsettings.update(json.load(open('s.json')))\n",  # an update, not config.update
    'import os\nprint(os.environ["CUDA_VISIBLE_DEVICES"])\n',  # a read, not a write
])
def test_code_that_cannot_matter_is_not_worth_linting(source: str) -> None:
    assert not _acts(source)


@pytest.mark.parametrize("source", [
    "import multiprocessing as mp\nmp.Pool(2)\n",
    "from concurrent.futures import ProcessPoolExecutor as PPE\n",
    "import os\ndef f():\n    if os.fork() == 0:\n        pass\n",
    "import multiprocessing as mp\nclass W(mp.Process):\n    pass\n",
    "import multiprocessing as mp\nq = mp.Queue()\n",
    "import torch\nloader = torch.utils.data.DataLoader(ds, num_workers=4)\n",
    "import torch\nloader = torch.utils.data.DataLoader(ds, **options)\n",
    'import os\nos.environ["CUDA_VISIBLE_DEVICES"] = "1"\n',
    'import os\nKEY = "CUDA_VISIBLE_DEVICES"\ndef f():\n    os.environ[KEY] = "1"\n',
    'import os\nos.environ.update({"TF_FORCE_GPU_ALLOW_GROWTH": "true"})\n',
    'import os\nos.putenv("CUDA_VISIBLE_DEVICES", "0")\n',
    "import tensorflow as tf\ndef f(gpu):\n    tf.config.experimental.set_memory_growth(gpu, True)\n",
    "x = 1  # noqa: GD101\n",
    'import os\nos.environ["KERAS_BACKEND"] = "jax"\n',  # read when keras is imported
    'import jax\ndef f():\n    jax.config.update("jax_platforms", "cpu")\n',
    "import jax\ndef f():\n    jax.distributed.initialize()\n",
])
def test_code_that_starts_configures_or_writes_the_environment_is_worth_linting(source: str) -> None:
    assert _acts(source)


ENTRY = """\
import multiprocessing as mp
import cupy as cp

from helpers import make_pool


def unrelated(x):
    return x + 1


def builds(n):
    return mp.Pool(n)


def calls_builder():
    cp.ones(3)
    return builds(2)


def uses_helper():
    cp.ones(3)
    return make_pool()


class Job:
    def step(self):
        return unrelated(1)

    def run_all(self, pool):
        return pool.map(unrelated, [1, 2])
"""


def test_entry_points_keep_what_acts_and_what_reaches_it() -> None:
    scan = prescan(ENTRY)
    assert scan is not None
    entries = {u.name for u in scan.entry_points(frozenset({"make_pool"}))}
    # builds acts; calls_builder reaches it; uses_helper calls an imported module that acts;
    # run_all feeds a pool. unrelated is only called by those: analysed when they call it.
    assert entries == {"builds", "calls_builder", "uses_helper", "run_all"}
    assert {u.name for u in scan.elidable()} == {"unrelated", "builds", "calls_builder",
                                                "uses_helper", "step", "run_all"}


def test_a_scan_sent_to_a_worker_keeps_its_answers_without_its_text() -> None:
    """The parent's prescans travel to the workers (who then skip CPython's parse)."""
    import pickle

    scan = prescan(ENTRY)
    assert scan is not None and scan.acts  # scanned: the units know their names and whether they act
    before = ([(u.name, u.def_row, u.body_row, u.end_row, u.acts, u.refs) for u in scan.units],
              scan.top_rows, scan.names, scan.imports, scan.acts)
    data = pickle.dumps(scan)
    assert b"def builds" not in data  # the text stays behind
    copy = pickle.loads(data)
    assert ([(u.name, u.def_row, u.body_row, u.end_row, u.acts, u.refs) for u in copy.units],
            copy.top_rows, copy.names, copy.imports, copy.acts) == before
    assert {u.name for u in copy.entry_points(frozenset({"make_pool"}))} == \
        {u.name for u in scan.entry_points(frozenset({"make_pool"}))}


def test_a_worker_uses_a_sent_scan_only_while_the_file_is_unchanged(tmp_path: Path) -> None:
    from gpudoctor.lint.analysis.project import Project

    path = tmp_path / "m.py"
    path.write_text("import multiprocessing as mp\n\ndef go():\n    mp.Pool(2)\n")
    parent = Project(tmp_path)
    sent = parent.prescan(path)
    assert sent is not None and sent.acts
    scans = parent.all_scans()
    assert Project(tmp_path, known_scans=scans).prescan(path) is sent
    path.write_text("def go():\n    return 1\n")  # changed since the parent read it
    fresh = Project(tmp_path, known_scans=scans).prescan(path)
    assert fresh is not sent and fresh is not None and not fresh.acts


def _elide_all(text: str) -> tuple[ParsedModule, list[cst.FunctionDef]]:
    scan = prescan(text)
    assert scan is not None
    parsed = parse("m.py", text, scan.units, scan.elidable())
    assert isinstance(parsed, ParsedModule)
    defs = [s for s in parsed.module.body if isinstance(s, cst.FunctionDef)]
    for cls in (s for s in parsed.module.body if isinstance(s, cst.ClassDef)):
        defs.extend(m for m in cls.body.body if isinstance(m, cst.FunctionDef))  # type: ignore[union-attr]
    return parsed, defs


def test_positions_after_an_elided_body_are_the_original_ones() -> None:
    text = ("def first():\n    '''A docstring\n    over lines.'''\n    return 1\n\n\n"
            "def threadsafe(f):\n\n  @wraps(f)\n  def g(*a):\n    return f(*a)\n\n  return g\n\n"
            "class K:\n\tdef m(self):\n\t\treturn 'é' + 'x'\n\n"
            "value = first()\n")
    parsed, defs = _elide_all(text)
    assert [d.name.value for d in defs] == ["first", "threadsafe", "m"]
    assert all(parsed.is_elided(d) for d in defs)
    value = parsed.module.body[-1]
    assert parsed.resolve(value).row == 19
    body = parsed.body(defs[2])  # parsed now, at its own place
    assert not parsed.is_elided(defs[2])
    site = parsed.resolve(body[0])
    assert (site.row, site.col) == (17, 2)
    # The decorated nested def that opens the body comes back whole, where a full parse puts it.
    inner = parsed.body(defs[1])[0]
    assert isinstance(inner, cst.FunctionDef) and len(inner.decorators) == 1
    assert parsed.resolve(inner).row == 10


def test_crlf_and_one_line_bodies() -> None:
    text = "def a(): return 1\r\ndef b():\r\n    x = 1\r\n    return x\r\ny = b()\r\n"
    parsed, defs = _elide_all(text)
    assert not parsed.is_elided(defs[0])  # a body on the def line is left as it is
    assert parsed.is_elided(defs[1])
    assert parsed.resolve(parsed.module.body[-1]).row == 5
    assert parsed.resolve(parsed.body(defs[1])[1]).row == 4


# -- generated programs: the skeleton always parses, and every body comes back whole ------

_STATEMENTS = st.sampled_from([
    "x = 1", "return x", "pass", "'''doc\nstring'''", "if x:\n    y = 2\nelse:\n    y = 3",
    "for i in range(3):\n    continue", "with open(p) as f:\n    f.read()",
    "@decorate\ndef inner(a):\n    return a", "@d1\n@d2(\n    1)\nclass Inner:\n    z = 1",
    "# a comment\nx = 0", "s = ('a'\n     'b')", "t = '''multi\nline'''", "lam = lambda: 0",
    "async_ok = 'é' * 3", "try:\n    pass\nexcept Exception:\n    raise",
])


@st.composite
def _function(draw: st.DrawFn, indent: str) -> str:
    name = draw(st.sampled_from(["f", "g", "run", "__init__", "work", "h"]))
    decorators = draw(st.lists(st.sampled_from(["@property", "@staticmethod", "@wraps(f)"]), max_size=2))
    header = draw(st.sampled_from([f"def {name}(self, x=1):", f"async def {name}(x):",
                                   f"def {name}(\n{indent}    a,\n{indent}    b=2,\n{indent}):"]))
    tab = draw(st.sampled_from(["    ", "\t", "  "]))
    body = draw(st.lists(_STATEMENTS, min_size=1, max_size=4))
    lines = [indent + d for d in decorators] + [indent + header]
    for statement in body:
        lines.extend(indent + tab + part for part in statement.split("\n"))
    if draw(st.booleans()):
        lines.append("")
    return "\n".join(lines)


@st.composite
def _module(draw: st.DrawFn) -> str:
    parts = []
    for _ in range(draw(st.integers(1, 5))):
        kind = draw(st.sampled_from(["def", "class", "statement"]))
        if kind == "def":
            parts.append(draw(_function("")))
        elif kind == "class":
            methods = [draw(_function("    ")) for _ in range(draw(st.integers(1, 3)))]
            parts.append("class C(Base):\n    attr = 1\n" + "\n".join(methods))
        else:
            parts.append(draw(st.sampled_from(["import os", "value = f(1)", "if True:\n    pass"])))
    newline = draw(st.sampled_from(["\n", "\r\n"]))
    return (newline.join("\n\n".join(parts).split("\n")) + newline)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_module())
def test_generated_programs_elide_and_restore_exactly(text: str) -> None:
    full = cst.parse_module(text)
    parsed, defs = _elide_all(text)
    source, _ = skeleton(text, prescan(text).elidable())  # type: ignore[union-attr]
    cst.parse_module(source)
    full_defs = [s for s in full.body if isinstance(s, cst.FunctionDef)]
    for cls in (s for s in full.body if isinstance(s, cst.ClassDef)):
        full_defs.extend(m for m in cls.body.body if isinstance(m, cst.FunctionDef))  # type: ignore[union-attr]
    assert len(defs) == len(full_defs)
    for mine, theirs in zip(defs, full_defs, strict=True):
        restored = parsed.body(mine)
        own = parsed._snippets[-1].module if restored is not getattr(mine.body, "body", None) else parsed.module
        # Each module renders with its own default indentation; compare the text lines.
        assert [own.code_for_node(s).split() for s in restored] == \
            [full.code_for_node(s).split() for s in getattr(theirs.body, "body", ())]


def test_body_snippet_of_a_method_parses_alone() -> None:
    text = "class A:\n    def m(self):\n        return 1\n"
    scan = prescan(text)
    assert scan is not None
    snippet, offset = body_snippet(text, scan.units[0])
    assert offset == 0 and cst.parse_module(snippet).body


def test_the_prescan_changes_no_finding(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Gating by the prescan, eliding bodies and positioning a node from its top-level
    statement alone are optimizations: the findings (message and positions included) of
    every fixture and every rule example are the same without them."""
    from gpudoctor.lint.engine import lint_paths
    from gpudoctor.lint.frontend import prescan as prescan_module
    from gpudoctor.lint.frontend import project_gate as project_gate_module
    from gpudoctor.lint.rules._registry import all_rules
    from gpudoctor.lint.selection import build_selection
    from gpudoctor.lint.settings import Settings
    from tests.lint.expectations import all_cases, run_case

    codes = [r.code for r in all_rules()]
    examples = []
    for index, text in enumerate(t for r in all_rules() for t in (*r.INVALID, *r.VALID)):
        folder = tmp_path / f"example{index}"
        folder.mkdir()
        (folder / "main.py").write_text(text, encoding="utf-8")
        examples.append(folder)

    def key(findings: list) -> list:  # type: ignore[type-arg]
        return sorted((f.code, f.site.path, f.site.row, f.site.col, f.message,
                       tuple((r.site.path, r.site.row, r.message) for r in f.related)) for f in findings)

    def everything(cases: list) -> list:  # type: ignore[type-arg]
        out = [key(run_case(case)[2]) for case in cases]
        for folder in examples:
            settings = Settings(build_selection(codes, codes), 12, "linux", folder)
            out.append(key(lint_paths([folder / "main.py"], settings).findings))
        return out

    cases = all_cases()
    fast = everything(cases)
    monkeypatch.setattr(prescan_module.Prescan, "elidable", lambda self: [])
    monkeypatch.setattr(project_gate_module.ProjectGate, "_acts", lambda self, path: True)
    from gpudoctor.lint.frontend import parsed as parsed_module

    monkeypatch.setattr(parsed_module.ParsedModule, "_resolve_in_statement", lambda self, node, anchor: None)
    assert fast == everything(cases)
    assert sum(map(len, fast)) > 100


@settings(max_examples=300, deadline=None)
@given(text=st.text(alphabet=st.sampled_from(list("ab \\'\"\n\r\té{}")), max_size=12),
       prefix=st.sampled_from(["", "r", "R", "u", "b", "rb"]),
       quote=st.sampled_from(['"', "'", '"""', "'''"]))
def test_string_values_are_what_python_reads(text: str, prefix: str, quote: str) -> None:
    from gpudoctor.lint.frontend.literals import string_value

    try:
        node = cst.parse_expression(prefix + quote + text + quote)
    except (cst.ParserSyntaxError, cst.CSTValidationError, RecursionError):
        return  # not one literal
    if not isinstance(node, cst.SimpleString):
        return
    import warnings

    try:
        with warnings.catch_warnings():  # invalid escapes in generated literals
            warnings.simplefilter("ignore")
            expected = node.evaluated_value
    except (SyntaxError, ValueError):
        return
    assert string_value(node) == expected


def test_prescan_walk_is_ast_walk_without_context_nodes() -> None:
    import ast

    from gpudoctor.lint.frontend.prescan import _walk

    source = (Path(__file__).resolve().parents[2] / "gpudoctor" / "lint" / "analysis" / "executor.py").read_text()
    tree = ast.parse(source)
    expected = [n for n in ast.walk(tree) if not isinstance(n, ast.expr_context)]
    assert list(_walk(tree)) == expected


@given(st.text(alphabet="ab \t\f\v\r\n\x1c\u2028#", max_size=40))
def test_lines_split_at_python_line_breaks_only(text: str) -> None:
    from gpudoctor.lint.frontend.reading import NEWLINE, split_lines

    assert split_lines(text) == NEWLINE.split(text)


@pytest.mark.parametrize(("source", "acts"), [
    # choosing the start method acts on the processes the code it calls starts
    ("import multiprocessing as mp\nmp.set_start_method('fork')\n", True),
    ("import multiprocessing as mp\nif __name__ == '__main__':\n    mp.set_start_method('fork')\n", True),
    ("import multiprocessing as mp\n\ndef main():\n    mp.set_start_method('fork')\n    run()\n", True),
    # a string naming a start API starts nothing, whatever statement follows it
    ("def f():\n    method = 'fork'\n    return method\n", False),
    ("def f():\n    kind = 'Pool'\n    x = 1\n    return getattr(m, kind)\n", False),
    ("NAME = 'Process'\nOTHER = 1\n", False),
])
def test_what_acts_is_code_not_strings(source: str, acts: bool) -> None:
    assert prescan(source).acts is acts
