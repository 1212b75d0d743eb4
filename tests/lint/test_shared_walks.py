"""Module walks shared across linted files: the same findings whatever was analysed first.

A walk is reused only where the modules it met half-imported (an import cycle) are again
being imported; these tests analyse every linted file alone, and all of them in one
process in both orders, and demand the same outcome each way.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from gpudoctor.knowledge.processes import Target
from gpudoctor.lint import file_analysis
from gpudoctor.lint.analysis.analyzer import Analyzer
from gpudoctor.lint.analysis.project import Project
from gpudoctor.lint.limits import DEFAULT_LIMITS, Limits

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"

# A package whose __init__ imports its submodules, which import the package back: the
# shape of most large libraries. ``backend`` initializes CuPy when imported; ``ops``
# reaches it through the package; two scripts fork after importing different parts.
CYCLIC = {
    "pkg/__init__.py": "from pkg import ops\nfrom pkg import backend\n",
    "pkg/backend.py": "import cupy as cp\nimport pkg\n\nDEVICE = cp.cuda.Device(0)\nDEVICE.use()\n",
    "pkg/ops.py": ("import cupy as cp\nimport pkg\nfrom pkg import backend\n\n\n"
                   "def total(x):\n    return cp.sum(cp.asarray(x))\n"),
    "pkg/env.py": "import os\nimport pkg.ops\n\nos.environ['CUDA_VISIBLE_DEVICES'] = '1'\n",
    "train.py": ("import multiprocessing as mp\nimport cupy as cp\nfrom pkg.ops import total\n\n\n"
                 "def work(x):\n    return float(total(x))\n\n\n"
                 "if __name__ == '__main__':\n    with mp.Pool(2) as pool:\n        pool.map(work, [1, 2])\n"),
    "serve.py": ("import multiprocessing as mp\nimport cupy as cp\nimport pkg.env\n\n\n"
                 "def work(x):\n    return float(cp.sum(cp.asarray(x)))\n\n\n"
                 "if __name__ == '__main__':\n    with mp.Pool(2) as pool:\n        pool.map(work, [1, 2])\n"),
    "evaluate.py": ("import multiprocessing as mp\nimport cupy as cp\nimport pkg\n\n\n"
                    "def work(x):\n    return float(cp.sum(cp.asarray(x)))\n\n\n"
                    "if __name__ == '__main__':\n    p = mp.Process(target=work, args=(1,))\n    p.start()\n"),
}


def _outcomes(root: Path, files: list[Path], together: bool,
              limits: Limits = DEFAULT_LIMITS) -> dict[str, list[tuple[object, ...]]]:
    out = {}
    shared = Project(root, limits=limits)
    for path in files:
        project = shared if together else Project(root, limits=limits)
        outcome = file_analysis.analyse(project, path, Target(11))
        assert not outcome.errors, outcome.errors
        out[str(path)] = [(f.code, f.site.path, f.site.row, f.site.col, f.message,
                           [(r.site.path, r.site.row, r.message) for r in f.related])
                          for f in outcome.findings]
    return out


def _assert_order_free(root: Path, files: list[Path]) -> dict[str, list[tuple[object, ...]]]:
    alone = _outcomes(root, files, together=False)
    assert _outcomes(root, files, together=True) == alone
    assert _outcomes(root, list(reversed(files)), together=True) == alone
    return alone


def test_cyclic_package_same_findings_alone_and_shared(tmp_path: Path) -> None:
    for name, text in CYCLIC.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    files = [tmp_path / name for name in ("train.py", "serve.py", "evaluate.py")]
    alone = _assert_order_free(tmp_path, files)
    codes = {Path(path).name: {finding[0] for finding in found} for path, found in alone.items()}
    # The init at pkg/backend.py's top level reaches every script through the cycle.
    assert "GD101" in codes["train.py"], alone
    assert "GD101" in codes["evaluate.py"], alone
    assert "GD101" in codes["serve.py"], alone


@pytest.mark.parametrize("project", sorted(p.name for p in (FIXTURES / "projects").iterdir() if p.is_dir()))
def test_fixture_projects_same_findings_alone_and_shared(project: str) -> None:
    root = FIXTURES / "projects" / project
    _assert_order_free(root, sorted(root.rglob("*.py")))


def test_a_walk_is_reused_only_where_its_cycle_is_the_same(tmp_path: Path) -> None:
    for name, text in CYCLIC.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    project = Project(tmp_path)
    walk = Analyzer(project).fresh_walk
    backend = project.real(tmp_path / "pkg" / "backend.py")
    first = project.walks.get(backend, 1, walk)
    assert project.walks.get(backend, 1, walk) is first  # nothing is being walked either time
    assert project.walks.get(backend, 2, walk) is not first  # another depth is another walk
    # Inside a walk of the package, backend's ``import pkg`` meets the package half-run.
    package = project.real(tmp_path / "pkg" / "__init__.py")
    entry = project.walks.begin(package, first.state)  # stands for any walk under way
    try:
        inside = project.walks.get(backend, 1, walk)
    finally:
        project.walks.end(entry)
    assert inside is not first
    assert package in entry.misses or backend in entry.misses


def test_forgetting_walks_changes_no_finding(tmp_path: Path) -> None:
    for name, text in CYCLIC.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    files = [tmp_path / name for name in ("train.py", "serve.py", "evaluate.py")]
    kept = _outcomes(tmp_path, files, together=True)
    forgetful = replace(DEFAULT_LIMITS, max_kept_walks=1)  # the store starts afresh after every walk
    assert _outcomes(tmp_path, files, together=True, limits=forgetful) == kept


def _dense_cycle(root: Path, modules: int) -> list[Path]:
    """A package of ``modules`` modules that all import one another (each a dense cycle
    member), the first initializing CuPy when imported, and a script that forks after
    importing one of them."""
    (root / "pkg").mkdir()
    (root / "pkg" / "__init__.py").write_text("")
    for i in range(modules):
        lines = ["import cupy as cp", *(f"from pkg import m{j}" for j in range(modules) if j != i), ""]
        if i == 0:
            lines += ["cp.cuda.Device(0).use()", ""]
        lines += ["def run():", *(f"    m{j}.run()" for j in range(modules) if j != i), ""]
        (root / "pkg" / f"m{i}.py").write_text("\n".join(lines))
    (root / "train.py").write_text(
        "import multiprocessing as mp\nimport cupy as cp\nimport pkg.m3\n\n\n"
        "def work(x):\n    return float(cp.sum(cp.asarray(x)))\n\n\n"
        "if __name__ == '__main__':\n    with mp.Pool(2) as pool:\n        pool.map(work, [1, 2])\n")
    return sorted(root.rglob("*.py"))


def test_a_dense_import_cycle_is_walked_once_per_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Walked as Python runs it, each module's walk depends on which of the others are
    # being imported at the time: about n**3 walks (1,936 for these 16; 60 took minutes
    # and gigabytes). Walked for the cycles it is in, each is walked once.
    modules = 16
    files = _dense_cycle(tmp_path, modules)
    walks = []
    fresh_walk = Analyzer.fresh_walk

    def counted(self: Analyzer, path: Path, *rest: int) -> object:
        walks.append(path)
        return fresh_walk(self, path, *rest)

    monkeypatch.setattr(Analyzer, "fresh_walk", counted)
    alone = _outcomes(tmp_path, files, together=True)
    assert len(walks) <= 2 * modules, len(walks)
    # What a module of the cycle does when imported still reaches the script through it.
    assert "GD101" in {finding[0] for finding in alone[str(tmp_path / "train.py")]}, alone


def test_a_dense_import_cycle_gives_the_same_findings_in_any_order(tmp_path: Path) -> None:
    files = _dense_cycle(tmp_path, 6)
    _assert_order_free(tmp_path, files)
