"""A finding in a module a linted file reaches, when only the linted file is named (as the
per-file pre-commit hook names the changed files): shown at the call or import there."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from gpudoctor.lint.cache import Cache
from gpudoctor.lint.engine import LintResult, lint_paths
from gpudoctor.lint.rules._registry import all_rules
from gpudoctor.lint.selection import build_selection
from gpudoctor.lint.settings import Settings

POOLS = """\
import multiprocessing as mp


def make_pool(n):
    return mp.Pool(n)
"""
MAIN = """\
import cupy as cp

from pools import make_pool


def work(i):
    return float(cp.sum(cp.arange(i)))


def main():
    cp.ones(3)
    pool = make_pool(2)
    pool.map(work, range(3))


if __name__ == "__main__":
    main()
"""


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")


def _lint(root: Path, named: list[str], cache: Cache | None = None) -> LintResult:
    codes = [r.code for r in all_rules()]
    settings = Settings(build_selection(codes, codes), 12, "linux", root)
    result = lint_paths([root / n for n in named], settings, cache=cache)
    assert not result.internal_errors, result.internal_errors
    return result


def _shown(result: LintResult) -> list[tuple[str, str, int]]:
    return [(f.code, Path(f.site.path).name, f.site.row) for f in result.findings]


def test_a_pool_in_a_helper_is_shown_at_the_call_when_only_the_caller_is_named(tmp_path: Path) -> None:
    _write(tmp_path, {"pools.py": POOLS, "main.py": MAIN})
    result = _lint(tmp_path, ["main.py"])
    assert _shown(result) == [("GD101", "main.py", 12)]
    finding = result.findings[0]
    assert finding.message.startswith("this call reaches pools.py:5: the Pool forks its worker processes")
    assert "(cupy.ones, line 11)" in finding.message  # written from main.py, not pools.py
    assert finding.site.col == 11  # make_pool(2), not main() under the main guard
    first = finding.related[0]
    assert (Path(first.site.path).name, first.site.row) == ("pools.py", 5)
    assert first.message == "where it happens, reached through the call at main.py:12"
    assert finding.fix is None  # a fix would edit pools.py, which is not being linted


def test_shown_once_where_it_happens_when_both_files_are_named(tmp_path: Path) -> None:
    _write(tmp_path, {"pools.py": POOLS, "main.py": MAIN})
    assert _shown(_lint(tmp_path, ["main.py", "pools.py"])) == [("GD101", "pools.py", 5)]


def test_through_a_chain_of_calls_the_last_call_in_the_named_file(tmp_path: Path) -> None:
    """main() calls _start(), which calls make_pool: shown at make_pool(2), the call in
    main.py nearest the pool, not at main() or _start()."""
    _write(tmp_path, {
        "pools.py": POOLS,
        "main.py": MAIN.replace("    pool = make_pool(2)\n    pool.map(work, range(3))",
                                "    _start().map(work, range(3))\n\n\ndef _start():\n    return make_pool(2)"),
    })
    result = _lint(tmp_path, ["main.py"])
    assert _shown(result) == [("GD101", "main.py", 16)]
    assert (result.findings[0].site.col, result.findings[0].message[:35]) == (11, "this call reaches pools.py:5: the P")


def test_through_a_helper_module_the_call_in_the_named_file(tmp_path: Path) -> None:
    """main.py calls runner.run, which calls pools.make_pool: shown at run(...) in main.py
    (main.py chooses the start method itself, which is why it is linted)."""
    _write(tmp_path, {
        "pools.py": POOLS,
        "runner.py": "from multiprocessing import cpu_count\n\nfrom pools import make_pool\n\n\n"
                     "def run(f, xs):\n    return make_pool(cpu_count()).map(f, xs)\n",
        "main.py": MAIN.replace("from pools import make_pool", "import multiprocessing as mp\n\nfrom runner import run")
        .replace("    cp.ones(3)\n    pool = make_pool(2)\n    pool.map(work, range(3))",
                 "    mp.set_start_method('fork')\n    cp.ones(3)\n    run(work, range(3))"),
    })
    result = _lint(tmp_path, ["main.py"])
    assert _shown(result) == [("GD101", "main.py", 15)]
    assert result.findings[0].message.startswith("this call reaches pools.py:5:")
    assert "(cupy.ones, line 14)" in result.findings[0].message


def test_through_an_import_that_runs_the_pool(tmp_path: Path) -> None:
    _write(tmp_path, {
        "warm.py": "import multiprocessing as mp\n\nimport cupy as cp\n\n\ndef work(i):\n"
                   "    return float(cp.sum(cp.arange(i)))\n\n\nwith mp.Pool(2) as pool:\n"
                   "    pool.map(work, range(3))\n",
        "main.py": "import cupy as cp\n\ncp.ones(3)\nimport warm  # noqa: E402\n",
    })
    result = _lint(tmp_path, ["main.py"])
    assert ("GD101", "main.py", 4) in _shown(result)
    assert result.findings[0].message.startswith("this import reaches warm.py:10:")


def test_a_noqa_at_the_call_suppresses_it(tmp_path: Path) -> None:
    _write(tmp_path, {"pools.py": POOLS,
                      "main.py": MAIN.replace("make_pool(2)\n", "make_pool(2)  # noqa: GD101\n")})
    assert _shown(_lint(tmp_path, ["main.py"])) == []


def test_not_a_finding_that_depends_on_its_own_code_alone(tmp_path: Path) -> None:
    """GD303 (a try that swallows the error of a too-late configuration) says nothing about
    the file that imports the module: it is shown only where it is, when that is linted."""
    _write(tmp_path, {
        "gpu.py": "import tensorflow as tf\n\ntry:\n    tf.config.experimental.set_memory_growth("
                  "tf.config.list_physical_devices('GPU')[0], True)\nexcept RuntimeError as e:\n    print(e)\n",
        "main.py": MAIN.replace("import cupy as cp\n", "import cupy as cp\n\nimport gpu\n", 1),
    })
    assert "GD303" not in {code for code, _, _ in _shown(_lint(tmp_path, ["main.py"]))}
    assert ("GD303", "gpu.py", 4) in _shown(_lint(tmp_path, ["main.py", "gpu.py"]))


@pytest.mark.parametrize("jobs", [1, 2])
def test_the_same_from_the_cache_and_from_workers(tmp_path: Path, jobs: int) -> None:
    _write(tmp_path, {"pools.py": POOLS, "main.py": MAIN, "other.py": MAIN})
    codes = [r.code for r in all_rules()]
    settings = Settings(build_selection(codes, codes), 12, "linux", tmp_path)
    runs = [lint_paths([tmp_path / "main.py", tmp_path / "other.py"], settings,
                       cache=Cache(tmp_path, "key"), jobs=jobs) for _ in range(2)]
    assert runs[1].cached == 2
    assert runs[0].findings == runs[1].findings
    assert _shown(runs[1]) == [("GD101", "main.py", 12), ("GD101", "other.py", 12)]


def test_the_places_a_message_names_are_written_from_its_new_home() -> None:
    from gpudoctor.lint.findings import Finding, Related, Site
    from gpudoctor.lint.rehoming import rehome

    def site(path: str, row: int) -> Site:
        return Site(path, row, 4, row, 9)

    finding = Finding("GD101", "fork-after-gpu-init",
                      "forks after init (api, gpu.py:6; ../train.py:11; line 3); line 30 of 10",
                      "error", site("/p/pkg/pools.py", 3),
                      (Related(site("/p/pkg/gpu.py", 6), "init"), Related(site("/p/train.py", 11), "use")),
                      reached=Related(site("/p/train.py", 20), "call"))
    moved = rehome(finding, {Path("/p/train.py"): "train.py"})
    assert moved is not None and moved.site == site("/p/train.py", 20)
    assert moved.message == ("this call reaches pkg/pools.py:3: forks after init "
                             "(api, pkg/gpu.py:6; line 11; pkg/pools.py:3); line 30 of 10")
