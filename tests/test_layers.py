"""The linter stays light: it never reaches the probe, NVML, psutil or a GPU framework."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUFF = [sys.executable, "-m", "ruff"]


def test_ruff_passes_on_the_package() -> None:
    run = subprocess.run([*RUFF, "check", "gpudoctor", "tests"], cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr


def test_banned_imports_in_lint_are_caught(tmp_path: Path) -> None:
    copy = tmp_path / "repo"
    shutil.copytree(ROOT / "gpudoctor", copy / "gpudoctor", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", copy / "pyproject.toml")
    (copy / "gpudoctor" / "lint" / "sneaky.py").write_text("import pynvml\nimport gpudoctor.probe\n")
    run = subprocess.run([*RUFF, "check", "--no-cache", "gpudoctor/lint/sneaky.py"], cwd=copy,
                         capture_output=True, text=True)
    assert run.returncode == 1
    assert "TID251" in run.stdout and "pynvml" in run.stdout and "gpudoctor.probe" in run.stdout


def test_the_knowledge_imports_no_other_part_of_gpudoctor() -> None:
    # gpudoctor/knowledge is the bottom of the house (its ruff.toml bans the rest by name):
    # no import of gpudoctor outside it, at the top, for type checking or in a function.
    import ast

    offending = []
    for path in (ROOT / "gpudoctor" / "knowledge").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            offending += [f"{path.name}:{node.lineno} {name}" for name in names
                          if name.split(".")[0] == "gpudoctor" and not name.startswith("gpudoctor.knowledge")]
            if isinstance(node, ast.ImportFrom) and node.level:
                offending.append(f"{path.name}:{node.lineno} a relative import")
    assert offending == []


def test_linting_imports_no_gpu_stack(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("import multiprocessing as mp\nimport torch\nmp.Pool(2)\n")
    code = (
        "import sys; from gpudoctor.cli import main; main(['lint', '--exit-zero', sys.argv[1]]);"
        "bad = [m for m in ('pynvml', 'psutil', 'rich', 'torch', 'tensorflow', 'cupy', 'jax',"
        " 'gpudoctor.probe.nvml') if m in sys.modules]; print('LOADED', bad)"
    )
    # (in the file's folder: a run from the clone's root would leave its cache there, sealed
    # with the tests' key, for the user's next run to warn about)
    run = subprocess.run([sys.executable, "-c", code, str(tmp_path / "a.py")], capture_output=True, text=True,
                         cwd=tmp_path)
    assert run.stdout.strip().endswith("LOADED []"), run.stdout + run.stderr


def test_no_line_of_the_linter_reads_as_a_gpu_import() -> None:
    # Rule examples are code in strings, written behind a "| " margin (removed at class
    # creation) so that a plain text search of the linter finds no GPU framework import,
    # at any indentation.
    import re

    pattern = re.compile(
        r"^\s*(import|from)\s+(torch|cupy|tensorflow|jax|numba|pycuda|keras|pynvml|psutil|gpudoctor\.probe)\b")
    offending = [f"{path.relative_to(ROOT)}:{row}" for path in (ROOT / "gpudoctor" / "lint").rglob("*.py")
                 for row, line in enumerate(path.read_text().splitlines(), start=1) if pattern.match(line)]
    assert offending == []


def test_libcst_is_not_imported_when_nothing_needs_parsing(tmp_path: Path) -> None:
    # Most commits touch no file that can matter: pre-commit's run must not pay for libcst.
    (tmp_path / "plain.py").write_text('"""Uses multiprocessing, says the docstring."""\nimport json\n')
    code = ("import sys; from gpudoctor.cli import main; main(['lint', '--no-cache', sys.argv[1]]);"
            "print('LIBCST', 'libcst' in sys.modules)")
    run = subprocess.run([sys.executable, "-c", code, str(tmp_path / "plain.py")], capture_output=True, text=True,
                         cwd=tmp_path)
    assert run.stdout.strip().endswith("LIBCST False"), run.stdout + run.stderr


def test_rules_read_the_analysis_through_the_check_context_only() -> None:
    # A rule reads flows, events and states, and asks CheckContext for the rest
    # (process_starts, method_at, spawn_fix, definition_site, ...): never the analyzer or
    # the flow builder, so that either can change without touching a rule.
    import re

    reaching = re.compile(r"\bctx\._|\bFlowBuilder\b|\bAnalyzer\b|analysis\.(analyzer|project|shared_walks)\b")
    offending = [f"{path.name}:{row}" for path in (ROOT / "gpudoctor" / "lint" / "rules").glob("gd*.py")
                 for row, line in enumerate(path.read_text().splitlines(), start=1) if reaching.search(line)]
    assert offending == []


# The front end's and the analysis's modules, bottom layer first, each layer's modules in
# the order they may import one another: a module imports only modules listed before it
# (the front end's are all below the analysis's). An interpreter that must ask the analysis
# around it for something does so through a protocol below it (interpreter.py), not by
# importing the analyzer.
FRONTEND_LAYERS = (
    ("source text: reading a file, the text gate, the CPython prescan, libcst parsing and positions", (
        "reading", "literals", "positions", "module_files", "text_facts", "prescan", "skeleton", "chunked", "parsed",
        "conditions", "version_tests", "project_gate")),
)
ANALYSIS_LAYERS = (
    ("abstract values and the events code emits", ("values", "arguments", "events", "pickling", "ranks")),
    ("what an analysis knows of classes and modules", ("classes", "module_state")),
    ("the checked project: its files, its shared module walks and their summaries",
     ("shared_walks", "rings", "project", "summaries")),
    ("the interpreter: a frame, expressions and calls, statements", (
        "interpreter", "frame", "process_calls", "evaluator", "executor")),
    ("the analysis of a linted file and its flows", ("analyzer", "flows")),
)
LINT = ROOT / "gpudoctor" / "lint"
PACKAGES = {"frontend": FRONTEND_LAYERS, "analysis": ANALYSIS_LAYERS}


def _path(qualified: str) -> Path:
    """The file of ``frontend.x`` or ``analysis.x``."""
    package, module = qualified.split(".")
    return LINT / package / f"{module}.py"


def _package_imports(path: Path) -> list[tuple[str, str, int]]:
    """(module of the front end or the analysis imported, as "package.module"; where:
    "module", "type-checking" or "function"; row) for each import in the file."""
    import ast

    tree = ast.parse(path.read_text())
    where: dict[int, str] = {}
    for node in tree.body:
        checking = isinstance(node, ast.If) and ast.unparse(node.test).endswith("TYPE_CHECKING")
        for inner in ast.walk(node):
            where.setdefault(id(inner), "type-checking" if checking else "module")
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for inner in ast.walk(node):
                where[id(inner)] = "function"
    out = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module in {f"gpudoctor.lint.{p}" for p in PACKAGES}:
            names = [f"{node.module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module]
        out.extend((".".join(name.split(".")[2:4]), where[id(node)], node.lineno)
                   for name in names if name.split(".")[:3] in (["gpudoctor", "lint", p] for p in PACKAGES))
    return out


def _only_protocols(qualified: str) -> bool:
    import ast

    classes = [n for n in ast.parse(_path(qualified).read_text()).body if isinstance(n, ast.ClassDef)]
    return bool(classes) and all(any(ast.unparse(b).endswith("Protocol") for b in c.bases) for c in classes)


def _ordered() -> list[str]:
    return [f"{package}.{module}" for package, layers in PACKAGES.items() for _, modules in layers
            for module in modules]


def test_every_module_of_the_front_end_and_the_analysis_has_a_layer() -> None:
    listed = _ordered()
    assert len(listed) == len(set(listed))
    assert set(listed) == {f"{package}.{p.stem}" for package in PACKAGES for p in (LINT / package).glob("*.py")
                           if p.stem != "__init__"}


def test_front_end_and_analysis_modules_import_only_downward() -> None:
    # What a module imports, at its top, for type checking or inside a function, is
    # listed before it; only a module of protocols may be named from below, for type
    # checking. (A cycle hidden behind a function-local import is still a cycle.)
    order = {module: index for index, module in enumerate(_ordered())}
    layer = {f"{package}.{module}": name for package, layers in PACKAGES.items() for name, modules in layers
             for module in modules}
    upward = [f"{module}.py:{row} imports {target} ({layer[target]})"
              for module in order for target, where, row in _package_imports(_path(module))
              if order[target] >= order[module] and not (where == "type-checking" and _only_protocols(target))]
    assert upward == []


def test_the_front_end_never_reaches_the_interpreter() -> None:
    # The front end reads, gates, prescans and parses source: whatever imports it (the
    # cache, the reporters, noqa, the fixes, the worker pool) gets no interpreter with it.
    reaching = [f"frontend/{path.name}:{row} imports {target}" for path in (LINT / "frontend").glob("*.py")
                for target, _, row in _package_imports(path) if not target.startswith("frontend.")]
    assert reaching == []


def test_modules_are_imported_at_the_top_but_those_that_load_libcst() -> None:
    # A function-local import of a module of the analysis is there to keep libcst out of
    # a run that parses nothing (test_libcst_is_not_imported_when_nothing_needs_parsing);
    # for any other module it would only hide a dependency.
    def loads_libcst(qualified: str) -> bool:
        text = _path(qualified).read_text()
        return any(line.startswith(("import libcst", "from libcst")) for line in text.splitlines())

    hidden = [f"{path.name}:{row} imports {target}" for package in PACKAGES for path in (LINT / package).glob("*.py")
              for target, where, row in _package_imports(path) if where == "function" and not loads_libcst(target)]
    assert hidden == []


def test_the_server_reaches_the_linter_only_and_lint_never_loads_the_server() -> None:
    # The language server is a face over the linter: no probe, NVML, psutil or framework
    # in its process; and `gpudoctor lint` (pre-commit's start-up) never pays for pygls.
    code = ("import sys; import gpudoctor.server.server; from gpudoctor.cli import main; "
            "bad = [m for m in ('pynvml', 'psutil', 'rich', 'torch', 'tensorflow', 'cupy', 'jax', 'gpudoctor.probe')"
            " if m in sys.modules]; print('LOADED', bad)")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.stdout.strip().endswith("LOADED []"), run.stdout + run.stderr
    code = ("import sys; from gpudoctor.cli import main; main(['lint', '--help']);")
    run = subprocess.run([sys.executable, "-c", code + "print('SERVER', [m for m in sys.modules if 'pygls' in m])"],
                         capture_output=True, text=True)
    assert "SERVER []" in run.stdout, run.stdout + run.stderr


def _module_graph() -> dict[str, set[str]]:
    """Each module of the package -> the modules of the package it imports: at its top, for
    type checking or inside a function (a function-local import hides a cycle, ends none)."""
    import ast

    package = ROOT / "gpudoctor"
    names = {".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"): p
             for p in package.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in names.items():
        found = graph[name] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names if alias.name in names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and node.module in names:
                members = {f"{node.module}.{alias.name}" for alias in node.names}
                found.update(members & names.keys())
                if members - names.keys():
                    found.add(node.module)
        # (The package itself is every module's parent, imported before any of them: a name
        # taken from it, ``__version__``, orders nothing.)
        found -= {name, "gpudoctor"}
    return graph


def test_no_import_cycle_anywhere_in_the_package() -> None:
    graph = _module_graph()
    # Tarjan's strongly connected components, iteratively.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            for target in edges:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph[target]))))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        cycles.append(sorted(component))
    assert cycles == []
