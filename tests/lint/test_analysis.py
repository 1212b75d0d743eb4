"""The analysis core: names through aliases, order, functions, modules, start methods."""

from __future__ import annotations

import pytest

from tests.conftest import codes_at

WORKER = """
def work(i):
    return float(cp.sum(cp.arange(i)))
"""


@pytest.mark.parametrize(("imports", "pool"), [
    ("import multiprocessing\nimport cupy as cp", "multiprocessing.Pool(2)"),
    ("from multiprocessing import Pool\nimport cupy as cp", "Pool(2)"),
    ("from multiprocessing import get_context\nimport cupy as cp", "get_context('fork').Pool(2)"),
    ("import torch.multiprocessing as mp\nimport cupy as cp", "mp.Pool(2)"),
    ("from concurrent.futures import ProcessPoolExecutor as PPE\nimport cupy as cp", "PPE(2)"),
    ("import multiprocessing.pool\nimport cupy as cp", "multiprocessing.pool.Pool(2)"),
    ("import multiprocessing as mp\nfrom cupy import arange\nimport cupy as cp", "mp.Pool(2)"),
])
def test_aliases_resolve(lint_source, imports: str, pool: str) -> None:  # type: ignore[no-untyped-def]
    source = f"{imports}\n{WORKER}\nx = cp.ones(3)\npool = {pool}\npool.map(work, range(3))\n"
    row = source.splitlines().index(f"pool = {pool}") + 1
    assert ("GD101", row) in codes_at(lint_source(source))


def test_context_object_flows_into_pool(lint_source) -> None:  # type: ignore[no-untyped-def]
    findings = lint_source("""
        import multiprocessing as mp
        import cupy as cp
        ctx = mp.get_context("spawn")
        def work(i):
            return cp.arange(i)
        def main():
            cp.ones(3)
            with ctx.Pool(2) as pool:
                pool.map(work, range(3))
        if __name__ == "__main__":
            main()
    """)
    assert not [f for f in findings if f.code in ("GD101", "GD103")]


def test_order_matters_init_after_pool_is_fine(lint_source) -> None:  # type: ignore[no-untyped-def]
    findings = lint_source("""
        import multiprocessing as mp
        import cupy as cp
        def work(i):
            return float(cp.sum(cp.arange(i)))
        if __name__ == "__main__":
            pool = mp.Pool(2)
            x = cp.ones(3)
            pool.map(work, range(3))
    """)
    assert "GD101" not in {f.code for f in findings}


def test_pool_in_a_loop_is_forked_again_after_init(lint_source) -> None:  # type: ignore[no-untyped-def]
    findings = lint_source("""
        import multiprocessing as mp
        import cupy as cp
        def work(i):
            return float(cp.sum(cp.arange(i)))
        if __name__ == "__main__":
            for epoch in range(3):
                with mp.Pool(2) as pool:
                    pool.map(work, range(3))
                total = cp.ones(3).sum()
    """)
    assert ("GD101", 8) in codes_at(findings)


def test_init_inside_a_called_helper_is_seen(lint_source) -> None:  # type: ignore[no-untyped-def]
    findings = lint_source("""
        import multiprocessing as mp
        import tensorflow as tf
        def setup():
            return tf.config.list_physical_devices("GPU")
        def work(x):
            return tf.reduce_sum(tf.ones((x, x))).numpy()
        def main():
            setup()
            with mp.Pool(2) as pool:
                pool.map(work, [1, 2])
        if __name__ == "__main__":
            main()
    """)
    (finding,) = [f for f in findings if f.code == "GD101"]
    assert finding.site.row == 10
    assert [r.site.row for r in finding.related][:2] == [5, 9]


def test_cross_module_pool_in_helper(lint_source) -> None:  # type: ignore[no-untyped-def]
    findings = lint_source({
        "helpers.py": """
            import multiprocessing as mp
            def run_all(func, items):
                with mp.Pool(2) as pool:
                    return pool.map(func, items)
        """,
        "main.py": """
            import cupy as cp
            from helpers import run_all
            def work(i):
                return float(cp.sum(cp.arange(i)))
            if __name__ == "__main__":
                cp.cuda.Device(0).use()
                run_all(work, range(4))
        """,
    })
    hits = [f for f in findings if f.code == "GD101"]
    assert [(f.site.path.endswith("helpers.py"), f.site.row) for f in hits] == [(True, 4)]
    assert hits[0].related[0].site.path.endswith("main.py")


def test_module_level_init_of_an_imported_package_counts(lint_source) -> None:  # type: ignore[no-untyped-def]
    findings = lint_source({
        "pkg/__init__.py": "",
        "pkg/gpu.py": "import torch\nDEVICE_OK = torch.cuda.is_available()\n",
        "main.py": """
            import multiprocessing as mp
            import torch
            import pkg.gpu
            def work(i):
                return torch.ones(i).cuda().sum().item()
            if __name__ == "__main__":
                with mp.Pool(2) as pool:
                    pool.map(work, range(3))
        """,
    })
    assert ("GD101", 8) in codes_at(findings)


def test_strings_and_comments_do_not_count(lint_source) -> None:  # type: ignore[no-untyped-def]
    findings = lint_source("""
        import multiprocessing as mp
        # x = cupy.arange(3) would initialize CUDA
        DOC = "call torch.cuda.is_available() first"
        def work(i):
            return i
        if __name__ == "__main__":
            with mp.get_context("fork").Pool(2) as pool:
                pool.map(work, range(3))
    """)
    assert findings == []


def test_unresolvable_callee_assumes_no_effect(lint_source) -> None:  # type: ignore[no-untyped-def]
    findings = lint_source("""
        import multiprocessing as mp
        import somelib
        import cupy as cp
        def work(i):
            return float(cp.sum(cp.arange(i)))
        if __name__ == "__main__":
            somelib.setup_everything()
            with mp.get_context("fork").Pool(2) as pool:
                pool.map(work, range(3))
    """)
    assert "GD101" not in {f.code for f in findings}


def test_recursion_and_deep_nesting_do_not_crash(lint_source) -> None:  # type: ignore[no-untyped-def]
    nested = "    x = " + "[" * 60 + "]" * 60 + "\n"
    findings = lint_source("""
        import multiprocessing as mp
        def a(n):
            return b(n)
        def b(n):
            return a(n)
        if __name__ == "__main__":
            a(3)
    """ + nested)
    assert findings == []


def test_one_line_compound_statements_are_walked(lint_source) -> None:  # type: ignore[no-untyped-def]
    findings = lint_source("""
        import multiprocessing as mp
        import cupy as cp
        def work(i):
            return float(cp.sum(cp.arange(i)))
        if __name__ == "__main__":
            cp.ones(3)
            with mp.Pool(2) as pool: pool.map(work, range(3))
    """)
    assert ("GD101", 8) in codes_at(findings)


def test_literal_flags_choose_the_branch(lint_source) -> None:  # type: ignore[no-untyped-def]
    findings = lint_source("""
        import multiprocessing as mp
        from multiprocessing.pool import ThreadPool
        import cupy as cp
        def pool_class(use_processes):
            if not use_processes:
                return ThreadPool
            return mp.Pool
        def work(i):
            return float(cp.sum(cp.arange(i)))
        def main():
            cp.ones(3)
            with pool_class(False)(2) as pool:
                pool.map(work, range(3))
            with pool_class(True)(2) as pool:
                pool.map(work, range(3))
    """)
    assert {f.site.row for f in findings if f.code == "GD101"} == {15}


def test_short_circuit_on_a_literal_flag(lint_source) -> None:  # type: ignore[no-untyped-def]
    findings = lint_source("""
        import multiprocessing
        import multiprocessing.dummy
        import cupy as cp
        FORCE = None
        def pool_class(use_processes):
            if not use_processes or FORCE:
                return multiprocessing.dummy.Pool
            return multiprocessing.Pool
        def work(i):
            return float(cp.sum(cp.arange(i)))
        def main():
            cp.ones(3)
            with pool_class(False)(2) as pool:
                pool.map(work, range(3))
    """)
    assert [f for f in findings if f.code in ("GD101", "GD103")] == []


def test_allocator_settings_after_a_device_query_are_still_read(lint_source) -> None:  # type: ignore[no-untyped-def]
    findings = lint_source("""
        import os
        import torch
        if torch.cuda.is_available():
            os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
            os.environ["CUDA_VISIBLE_DEVICES"] = "0"
        torch.ones(1, device="cuda")
        os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:False"
    """)
    assert {(f.code, f.site.row) for f in findings} == {("GD301", 6), ("GD301", 8)}


def _package_then_gpu_import(module_text: str, modules: int, program: bool = False) -> dict[str, str]:
    """main.py imports a package of ``modules`` modules (each ``module_text``), then gpuinit,
    which initializes CuPy at import, then forks a pool whose workers use CuPy: at its top
    level (a library module), or under a main guard (a program)."""
    sources = {f"big/m{i}.py": module_text for i in range(modules)}
    sources["big/__init__.py"] = "".join(f"from . import m{i}\n" for i in range(modules))
    sources["gpuinit.py"] = "import cupy as cp\ncp.cuda.Device(0).use()\n"
    sources["main.py"] = """
        import multiprocessing as mp
        import cupy as cp
        import big
        import gpuinit
        def work(x):
            return cp.sum(cp.asarray(x))
        if __name__ == '__main__':
            with mp.Pool(2) as pool:
                pool.map(work, [1])
    """.replace("__name__ == '__main__'", "__name__ == '__main__'" if program else "True")
    return sources


@pytest.mark.parametrize(("module_text", "modules", "followed"), [
    ("import torch\nX = 1\n", 12, True),  # many small modules: little source
    ("import torch\nX = 1\n" + "# a line of comment\n" * 20, 12, False),  # as many larger ones
    ("import torch\nX = 1\n", 40, False),  # past the count of modules as well
])
def test_the_budget_of_modules_followed_is_counted_in_source(
        lint_source, module_text: str, modules: int, followed: bool) -> None:  # type: ignore[no-untyped-def]
    """Imports are followed until the modules analysed for a linted file hold the budget's
    characters (or count), here made small: a package of many small modules leaves room
    for the import after it, one of as many larger modules does not (gpudoctor then
    reports the advisory GD103, not knowing the parent initialized CuPy)."""
    from dataclasses import replace

    from gpudoctor.lint.limits import DEFAULT_LIMITS

    small = replace(DEFAULT_LIMITS, max_extra_chars=4000, max_extra_modules=30)
    found = codes_at(lint_source(_package_then_gpu_import(module_text, modules), limits=small))
    assert found == ({("GD101", 9)} if followed else {("GD103", 9)})


def test_a_programs_own_imports_are_followed_past_the_budget(lint_source) -> None:  # type: ignore[no-untyped-def]
    """A script with a main guard runs what it imports: the helper imported after a large
    package is followed, and its CuPy init seen."""
    from dataclasses import replace

    from gpudoctor.lint.limits import DEFAULT_LIMITS

    small = replace(DEFAULT_LIMITS, max_extra_chars=4000, max_extra_modules=30)
    sources = _package_then_gpu_import("import torch\nX = 1\n", 40, program=True)
    assert codes_at(lint_source(sources, limits=small)) == {("GD101", 9)}


@pytest.mark.parametrize("use", [
    "from jobs import make_pool\npool = make_pool(2)",
    "import jobs\npool = jobs.make_pool(2)",
    "import jobs as j\npool = j.make_pool(2)",
])
def test_a_pool_factory_a_package_hands_on(lint_source, use: str) -> None:  # type: ignore[no-untyped-def]
    """main.py names no process start: it calls a pool factory that the package jobs takes
    from one of its modules. The pool forks after main.py initialized CuPy: GD101 there."""
    findings = lint_source({
        "jobs/__init__.py": "from .pools import make_pool\n",
        "jobs/pools.py": "import multiprocessing as mp\n\n\ndef make_pool(n):\n    return mp.Pool(n)\n",
        "main.py": "import cupy as cp\n\n\ndef work(i):\n    return float(cp.sum(cp.arange(i)))\n\n\n"
                   "def main():\n    cp.ones(3)\n    " + use.replace("\n", "\n    ") + "\n"
                   "    pool.map(work, range(3))\n",
    })
    assert [(f.code, f.site.path.endswith("pools.py"), f.site.row) for f in findings] == [("GD101", True, 5)]


def test_strings_joined_again_and_again_stay_bounded(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Each call joins either of two strings to its argument: ten calls deep, 1024
    strings, and a recursive walk (os.walk's path joins) doubles them at every call. Past
    a few short strings, a concatenation is unknown (the strings rules read are names)."""
    from pathlib import Path

    from gpudoctor.lint.analysis.analyzer import Analyzer
    from gpudoctor.lint.analysis.project import Project
    from gpudoctor.lint.analysis.values import Str
    from gpudoctor.lint.limits import DEFAULT_LIMITS

    chain = "".join(f"def f{i}(p):\n    return f{i + 1}(p + ('/a' if p else '/b'))\n\n" for i in range(10))
    longest = "y" * DEFAULT_LIMITS.max_string_chars
    (tmp_path / "walk.py").write_text(f"{chain}def f10(p):\n    return p\n\n\n"
                                      f"SHORT = f8('x')\nALL = f0('x')\nLONG = '{longest}' + 'z'\n")
    path = Path(tmp_path / "walk.py")
    state = Analyzer(Project(tmp_path), frozenset({path})).module(path)
    assert state.env["SHORT"] == frozenset({Str("x/a/a"), Str("x/a/b"), Str("x/b/a"), Str("x/b/b")})
    assert not any(isinstance(atom, Str) for atom in state.env["ALL"])  # 1024 > max_strings
    assert not any(isinstance(atom, Str) for atom in state.env["LONG"])
    assert DEFAULT_LIMITS.max_strings < 1024


@pytest.mark.parametrize(("middle", "followed"), [
    ("from pools import make_pool\n\n\ndef run(f, xs):\n    return make_pool(2).map(f, xs)\n", True),
    # through a silent relay: runner.py leads to pools.py two imports away
    ("from relay import make_pool\n\n\ndef run(f, xs):\n    return make_pool(2).map(f, xs)\n", True),
    # through two: three imports away, past how far a silent module is looked through
    ("from relay2 import make_pool\n\n\ndef run(f, xs):\n    return make_pool(2).map(f, xs)\n", False),
])
def test_a_helper_that_mentions_nothing_but_passes_the_work_on_is_followed(
        lint_source, middle: str, followed: bool) -> None:  # type: ignore[no-untyped-def]
    """runner.py names no GPU framework and starts nothing itself: it hands main.py's work
    to pools.py, whose pool forks after main.py initialized CuPy."""
    findings = lint_source({
        "pools.py": "import multiprocessing as mp\n\n\ndef make_pool(n):\n    return mp.Pool(n)\n",
        "relay.py": "from pools import make_pool as _make\n\n\ndef make_pool(n):\n    return _make(n)\n",
        "relay2.py": "from relay import make_pool as _make\n\n\ndef make_pool(n):\n    return _make(n)\n",
        "runner.py": middle,
        "main.py": """
            import multiprocessing as mp
            import cupy as cp
            from runner import run
            def work(i):
                return float(cp.sum(cp.arange(i)))
            if __name__ == "__main__":
                mp.set_start_method("fork")
                cp.ones(3)
                run(work, range(3))
        """,
    })
    hits = [(f.code, f.site.path.rsplit("/", 1)[-1], f.site.row) for f in findings if f.code == "GD101"]
    assert hits == ([("GD101", "pools.py", 5)] if followed else [])


FORKSERVER_MAIN = """
import multiprocessing as mp
import torch

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"

def work(i):
    return torch.ones(i, device=DEVICE).sum().item()

if __name__ == "__main__":
    with mp.get_context("forkserver").Pool(2) as pool:
        pool.map(work, range(3))
"""


@pytest.mark.parametrize(("minor", "reported"), [(10, False), (12, False), (13, True), (14, True)])
def test_the_forkserver_runs_the_main_scripts_top_level_from_313(lint_source, minor: int, reported: bool) -> None:  # type: ignore[no-untyped-def]
    """3.13.8+/3.14.1+ preload __main__ in the server (gh-126631): its top-level init is
    inherited by every worker. Before, each worker ran the top level itself."""
    assert (("GD101", 11) in codes_at(lint_source(FORKSERVER_MAIN, minor=minor))) is reported


@pytest.mark.parametrize("preload", ['["numpy"]', "[]", "modules_from_config()"])
def test_a_preload_list_without_main_or_unknown_preloads_no_main_module(lint_source, preload: str) -> None:  # type: ignore[no-untyped-def]
    source = FORKSERVER_MAIN.replace('if __name__ == "__main__":\n',
                                     f'if __name__ == "__main__":\n    mp.set_forkserver_preload({preload})\n')
    assert not [f for f in lint_source(source, minor=14) if f.code == "GD101"]


def test_a_module_of_a_package_is_not_taken_for_a_preloaded_script(lint_source) -> None:  # type: ignore[no-untyped-def]
    """A package's module runs with ``python -m``: the server is given its name, not its
    path, and does not preload it."""
    findings = lint_source({"pkg/__init__.py": "", "pkg/train.py": FORKSERVER_MAIN,
                            "script.py": FORKSERVER_MAIN}, minor=14)
    assert {(f.code, f.site.path.rsplit("/", 1)[-1]) for f in findings} == {("GD101", "script.py")}


def test_executor_max_tasks_per_child_none_keeps_the_default_context(lint_source) -> None:  # type: ignore[no-untyped-def]
    findings = lint_source("""
        from concurrent.futures import ProcessPoolExecutor
        import torch
        def work(i):
            return torch.ones(i, device="cuda").sum().item()
        def main(limit):
            torch.cuda.is_available()
            with ProcessPoolExecutor(2, max_tasks_per_child=None) as ex:
                list(ex.map(work, range(3)))
            with ProcessPoolExecutor(2, max_tasks_per_child=limit) as ex:
                list(ex.map(work, range(3)))
    """)
    assert codes_at(findings) == {("GD101", 8)}


@pytest.mark.parametrize(("call", "reported"), [
    ('Parallel(n_jobs=2, backend="multiprocessing")', True),
    ('Parallel(n_jobs=-1, backend="multiprocessing")', True),
    ('Parallel(n_jobs=jobs, backend="multiprocessing")', True),
    ('Parallel(backend="multiprocessing")', False),  # n_jobs unset: one job, in this process
    ('Parallel(n_jobs=1, backend="multiprocessing")', False),
    ("Parallel(n_jobs=2)", False),  # loky
    ('Parallel(n_jobs=2, backend="threading")', False),
    ('Parallel(n_jobs=2, backend=mp.get_context("spawn"))', False),
    ('Parallel(n_jobs=2, backend=mp.get_context("fork"))', True),
])
def test_joblib_parallel_forks_with_the_multiprocessing_backend(lint_source, call: str, reported: bool) -> None:  # type: ignore[no-untyped-def]
    findings = lint_source(f"""
        import multiprocessing as mp
        import torch
        from joblib import Parallel, delayed
        def work(i):
            return torch.ones(i, device="cuda").sum().item()
        def main(jobs):
            torch.cuda.is_available()
            return {call}(delayed(work)(i) for i in range(4))
    """)
    assert (("GD101", 9) in codes_at(findings)) is reported


def test_joblib_in_a_daemonic_worker_runs_its_tasks_there(lint_source) -> None:  # type: ignore[no-untyped-def]
    """joblib's multiprocessing backend falls back to one job in a daemonic process."""
    findings = lint_source("""
        import multiprocessing as mp
        import torch
        from joblib import Parallel, delayed
        def inner(i):
            return torch.ones(i, device="cuda").sum().item()
        def task(xs):
            torch.cuda.is_available()
            return Parallel(n_jobs=4, backend="multiprocessing")(delayed(inner)(x) for x in xs)
        if __name__ == "__main__":
            with mp.get_context("spawn").Pool(2) as pool:
                pool.map(task, [[1], [2]])
    """)
    assert findings == []


# A framework's own tree (numba/numba keeps numba/cuda/ as a package; its
# numba/cuda/tests/cudapy/test_multiprocessing.py forks after cuda.current_context()).
NUMBA_TREE = {
    "numba/__init__.py": "",
    "numba/cuda/__init__.py": "from numba.cuda.api import *\n",
    "numba/cuda/api.py": """
        def current_context():
            return None
        def to_device(array):
            return array
    """,
    "numba/cuda/_internal.py": """
        def cuda_path():
            return "/usr/local/cuda"
    """,
    "numba/cuda/tests/__init__.py": "",
}
FORK_TEST = """
    import multiprocessing as mp
    from numba import cuda
    from numba.cuda import _internal
    def child(q):
        q.put(cuda.to_device([1]))
    def test_fork():
        {before}
        ctx = mp.get_context("fork")
        proc = ctx.Process(target=child, args=(ctx.Queue(),))
        proc.start()
"""


def test_a_frameworks_own_tree_is_that_framework(lint_source) -> None:  # type: ignore[no-untyped-def]
    test = FORK_TEST.format(before="cuda.current_context()")
    findings = lint_source({**NUMBA_TREE, "numba/cuda/tests/test_fork.py": test})
    assert ("GD101", 11) in codes_at(findings)


@pytest.mark.parametrize(("before", "reported"), [
    ("cupy.arange(3)", True),
    # A private module of the framework is its implementation: the tables (which list
    # public names only) do not reach it through their wildcards (cupy.* makes arrays).
    ("_environment.get_cuda_path()", False),
])
def test_private_modules_of_a_frameworks_tree_are_not_its_api(  # type: ignore[no-untyped-def]
        lint_source, before: str, reported: bool) -> None:
    findings = lint_source({
        "cupy/__init__.py": "from cupy._creation import arange\n",
        "cupy/_creation.py": "def arange(n):\n    return list(range(n))\n",
        "cupy/_environment.py": "def get_cuda_path():\n    return '/usr/local/cuda'\n",
        "tests/test_fork.py": f"""
            import multiprocessing as mp
            import cupy
            from cupy import _environment
            def work(i):
                return cupy.arange(i)
            def test_pool():
                {before}
                with mp.get_context("fork").Pool(2) as pool:
                    pool.map(work, range(3))
        """,
    })
    assert (("GD101", 9) in codes_at(findings)) is reported


@pytest.mark.parametrize("layout", ["", "src/"])
def test_a_framework_package_under_src_counts_too(lint_source, layout: str) -> None:  # type: ignore[no-untyped-def]
    tree = {f"{layout}{name}": text for name, text in NUMBA_TREE.items()}
    findings = lint_source({**tree, "tests/test_fork.py": FORK_TEST.format(before="cuda.current_context()")})
    assert ("GD101", 11) in codes_at(findings)


@pytest.mark.parametrize("helper", ["torch.py", "utils/torch.py"])
def test_a_module_named_like_a_framework_is_the_projects_own(lint_source, helper: str) -> None:  # type: ignore[no-untyped-def]
    """A top-level module file, or a module of another package, is not the framework."""
    importer = "import torch" if "/" not in helper else "from utils import torch"
    findings = lint_source({
        helper: """
            class cuda:
                @staticmethod
                def is_available():
                    return False
        """,
        **({"utils/__init__.py": ""} if "/" in helper else {}),
        "main.py": f"""
            import multiprocessing as mp
            import cupy
            {importer}
            def work(i):
                return float(cupy.arange(i).sum())
            if __name__ == "__main__":
                torch.cuda.is_available()
                with mp.get_context("fork").Pool(2) as pool:
                    pool.map(work, range(3))
        """,
    })
    assert findings == []


def test_framework_names_of_project_files(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from gpudoctor.lint.analysis.project import Project

    for name in ("cupy/__init__.py", "cupy/cuda/device.py", "cupy/_core/core.py", "utils/torch.py",
                 "torch.py", "src/jax/numpy/__init__.py", "keras/src/ops/numpy.py", "tests/test_x.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    project = Project(tmp_path)
    names = {name: project.framework_name(tmp_path / name) for name in (
        "cupy/__init__.py", "cupy/cuda/device.py", "cupy/_core/core.py", "utils/torch.py", "torch.py",
        "src/jax/numpy/__init__.py", "keras/src/ops/numpy.py", "tests/test_x.py")}
    assert names == {
        "cupy/__init__.py": "cupy", "cupy/cuda/device.py": "cupy.cuda.device", "cupy/_core/core.py": None,
        "utils/torch.py": None, "torch.py": None, "src/jax/numpy/__init__.py": "jax.numpy",
        "keras/src/ops/numpy.py": "keras.src.ops.numpy", "tests/test_x.py": None,
    }
def test_an_unknown_value_joined_with_a_known_one_stays_unknown() -> None:
    from gpudoctor.lint.analysis.values import SOME_UNKNOWN, UNKNOWN, Bool, join, one, truth

    flag = one(Bool(True))
    assert truth(join(UNKNOWN, flag)) is None  # ``x = cfg.x`` then ``if c: x = True``
    assert join(UNKNOWN, flag) == flag | SOME_UNKNOWN
    assert join(flag, flag) == flag
    assert join(UNKNOWN, UNKNOWN) == UNKNOWN and join(UNKNOWN, SOME_UNKNOWN) == UNKNOWN


def test_branches_of_one_run_of_a_chain_exclude_each_other_not_of_two_runs() -> None:
    from gpudoctor.lint.analysis.events import Branch, Event, Merge, ThreadStart
    from gpudoctor.lint.analysis.flows import State
    from gpudoctor.lint.findings import Site

    chain, thread = Site("m.py", 3, 0, 3, 9), Site("m.py", 4, 4, 4, 40)

    def run(state: State) -> tuple[State, State]:
        """A thread in branch 0, then the state in branch 1 and after the chain."""
        for effect in (Branch(chain, 0), ThreadStart(thread, "threading.Thread"), Merge(chain, False),
                       Branch(chain, 1)):
            state = state.apply(Event(effect))
        inside = state
        return inside, state.apply(Event(Merge(chain, True)))

    inside, after = run(State())
    assert inside.threads_at(inside.branches) == []  # the other branch of the same run
    assert len(after.threads_at(after.branches)) == 1  # after the chain it may run
    again, _ = run(after)
    # The next run's branch 1: the first run's thread may still run, its own may not.
    assert len(again.threads_at(again.branches)) == 1


_THREAD_SUBCLASS = """
    import os
    import threading


    class Client(threading.Thread):
        def run(self):
            pass


    class Other(threading.Thread):
        def run(self):
            pass


    def main(n):
        for _ in range(n):
            clients = [Client() for _ in range(3)]
            for c in clients:
                c.start()
            {join}
            if os.fork() == 0:
                os._exit(0)


    main(3)
"""


@pytest.mark.parametrize(("join", "found"), [
    ("for c in clients:\n                c.join()", False),  # each Client thread joined before the fork
    ("pass", True),  # never joined: the next turn of the loop forks while they may run
    ("Other().join()", True),  # another class's threads joined, not these
])
def test_threads_of_a_thread_subclass_are_joined_by_join(lint_source, join: str,  # type: ignore[no-untyped-def]
                                                         found: bool) -> None:
    # bert-as-service's benchmark joins its client threads (a Thread subclass) before the
    # next server forks: the join was not seen, and GD102 said they may still run.
    findings = lint_source(_THREAD_SUBCLASS.replace("{join}", join))
    assert any(f.code == "GD102" for f in findings) is found, [(f.code, f.site.row, f.message) for f in findings]


def test_a_package_module_named_like_the_standard_library_imports_the_standard_library(lint_source) -> None:  # type: ignore[no-untyped-def]
    # ``rembg/multiprocessing.py`` doing ``import multiprocessing`` gets the standard
    # library's (Python 3 has no implicit relative imports), not itself.
    files = {
        "rembg/__init__.py": "",
        "rembg/bg.py": "import torch\n\nDEVICE = 'cuda' if torch.cuda.is_available() else 'cpu'\n",
        "rembg/multiprocessing.py": """\
            import multiprocessing

            import torch

            from .bg import DEVICE


            def worker(x):
                return torch.ones(x, device=DEVICE)


            def parallel(items):
                w = multiprocessing.Process(target=worker, args=(items,))
                w.start()
            """,
        "rembg/cli.py": "from .multiprocessing import parallel\n\n\ndef main():\n    parallel(3)\n",
    }
    findings = lint_source(files, select=["GD101"])
    assert {(f.site.path.rsplit("/", 1)[-1], f.site.row) for f in findings} == {("multiprocessing.py", 14)}


def test_a_script_folder_module_named_like_the_standard_library_shadows_it(lint_source) -> None:  # type: ignore[no-untyped-def]
    # A folder of scripts (no __init__.py): the script's own folder comes first on the path.
    files = {
        "queue.py": "import multiprocessing\n\n\ndef start(f):\n    multiprocessing.Process(target=f).start()\n",
        "main.py": """\
            import queue

            import torch


            def work():
                torch.ones(1).cuda()


            if __name__ == "__main__":
                torch.cuda.init()
                queue.start(work)
            """,
    }
    findings = lint_source(files, select=["GD101"])
    assert [f.code for f in findings] == ["GD101"]


def test_a_worker_function_in_a_module_naming_no_framework_is_followed(lint_source) -> None:  # type: ignore[no-untyped-def]
    # The target's module mentions no GPU framework and starts nothing (the gate would not
    # follow it), but the function calls a method of the model it is handed.
    files = {
        "worker.py": "def run(model, n):\n    for _ in range(n):\n        model.predict(n)\n",
        "net.py": """\
            import tensorflow as tf


            class Net:
                def __init__(self):
                    self.model = tf.keras.Sequential([tf.keras.layers.Dense(2)])

                def predict(self, x):
                    return self.model(tf.ones((1, x)))
            """,
        "main.py": """\
            import multiprocessing as mp

            import net
            import worker

            if __name__ == "__main__":
                model = net.Net()
                model.predict(3)
                p = mp.Process(target=worker.run, args=(model, 2))
                p.start()
                with mp.Pool(2) as pool:
                    pool.starmap(worker.run, [(model, 1)])
            """,
    }
    found = {(f.code, f.site.row) for f in lint_source(files, select=["GD101"]) if f.site.path.endswith("main.py")}
    assert found == {("GD101", 10), ("GD101", 11)}


def test_a_device_option_defaulting_to_cuda_names_cuda(lint_source) -> None:  # type: ignore[no-untyped-def]
    # ``--device`` defaults to "cuda": a run with the defaults places the tensor on the GPU
    # before the pool forks. A flag's default decides no test (both ways stay analysed).
    source = """\
        import argparse
        import multiprocessing as mp

        import torch


        def work(device):
            return torch.ones(2).to(device)


        def get_args():
            parser = argparse.ArgumentParser()
            parser.add_argument("--device", default="cuda")
            parser.add_argument("--gpu-id", dest="gpu", default="cuda:1")
            parser.add_argument("--quiet", action="store_true")
            return parser.parse_args()


        def main():
            args = get_args()
            if not args.quiet:
                torch.ones(2).to(args.gpu)
            with mp.Pool(2) as pool:  # here
                pool.map(work, [args.device] * 2)


        if __name__ == "__main__":
            main()
        """
    import textwrap

    text = textwrap.dedent(source)
    findings = [f for f in lint_source(source, select=["GD101"]) if f.code == "GD101"]
    assert [f.site.row for f in findings] == [i for i, line in enumerate(text.splitlines(), 1) if "# here" in line]
    assert "when `not args.quiet` is true" in findings[0].message


def test_lists_joined_with_plus_keep_the_items_of_both(lint_source) -> None:  # type: ignore[no-untyped-def]
    source = """\
        import multiprocessing as mp

        import torch


        def work(n):
            return torch.ones(n).cuda()


        class Images:
            def evaluate(self):
                with mp.Pool(2) as pool:  # here
                    pool.map(work, [1])


        class Texts:
            def evaluate(self):
                return None


        IMAGE = [Images]
        TEXT = [Texts]
        ALL = IMAGE + TEXT


        def run():
            torch.ones(1).cuda()
            for cls in ALL:
                cls().evaluate()


        if __name__ == "__main__":
            run()
        """
    import textwrap

    text = textwrap.dedent(source)
    findings = [f for f in lint_source(source, select=["GD101"])]
    assert {f.site.row for f in findings} <= {i for i, line in enumerate(text.splitlines(), 1) if "# here" in line}
    assert findings, "the pool of a class reached only through the joined list is analysed"


def test_a_dataclass_field_holds_what_its_constructor_is_given(lint_source) -> None:  # type: ignore[no-untyped-def]
    # ``memory_growth`` defaults to False, but the caller passes True: the branch runs.
    source = """\
        from dataclasses import dataclass

        import tensorflow as tf


        @dataclass
        class Config:
            name: str
            memory_growth: bool = False

            def setup(self):
                if self.memory_growth:
                    for gpu in tf.config.list_physical_devices("GPU"):
                        tf.config.experimental.set_memory_growth(gpu, True)  # here


        def main():
            tf.constant(1)
            Config("x", memory_growth=True).setup()


        if __name__ == "__main__":
            main()
        """
    import textwrap

    text = textwrap.dedent(source)
    findings = [f for f in lint_source(source, select=["GD302"])]
    assert {f.site.row for f in findings} == {i for i, line in enumerate(text.splitlines(), 1) if "# here" in line}


def test_a_project_decorator_that_wraps_the_function_does_not_run_it_at_import(lint_source) -> None:  # type: ignore[no-untyped-def]
    # yolov5's ``@smart_inference_mode()``: the decorator hands the function to an object the
    # analysis cannot see and returns what that gives back (a wrapper), so the function runs
    # where it is called (under the main guard), never as a callback of the import. A
    # registrar that hands the function back may have it called later (a hook): it still is.
    data = """\
        from multiprocessing.pool import Pool


        def verify(x):
            return x


        def scan(n):
            with Pool(2) as pool:
                return list(pool.imap(verify, range(n)))
        """
    tools = """\
        import torch


        def smart(flag=True):
            def decorate(fn):
                return (torch.inference_mode if flag else torch.no_grad)()(fn)

            return decorate


        def register(fn):
            torch.utils.hooks.register(fn)
            return fn
        """
    main = """\
        from data import scan
        from tools import register, smart


        @DECORATOR
        def run(n):
            return scan(n)


        if __name__ == "__main__":
            run(3)
        """
    for decorator, reported in (("smart()", False), ("register", True)):
        files = {"data.py": data, "tools.py": tools, "main.py": main.replace("DECORATOR", decorator)}
        assert bool(lint_source(files, platform="darwin", select=["GD104"])) is reported, decorator


def test_a_logging_queue_listener_is_a_thread_until_it_is_stopped(lint_source) -> None:  # type: ignore[no-untyped-def]
    # The usual way to log from pool workers: the listener's thread runs in the parent
    # while the pool forks (eynollah's predictor.py and eynollah.py).
    source = """\
        import logging
        import logging.handlers
        import multiprocessing as mp


        def work(queue, i):
            logging.getLogger().addHandler(logging.handlers.QueueHandler(queue))
            return i


        def main(stop_first):
            queue = mp.Queue()
            listener = logging.handlers.QueueListener(queue, logging.StreamHandler())
            listener.start()
            if stop_first:
                listener.stop()
                with mp.Pool(2) as pool:
                    pool.starmap(work, [(queue, 1)])
            else:
                with mp.Pool(2) as pool:  # here
                    pool.starmap(work, [(queue, 1)])
                listener.stop()


        if __name__ == "__main__":
            main(False)
            main(True)
        """
    import textwrap

    text = textwrap.dedent(source)
    findings = lint_source(source, select=["GD102"])
    assert {f.site.row for f in findings} == {i for i, line in enumerate(text.splitlines(), 1) if "# here" in line}
    assert "(logging.handlers.QueueListener)" in findings[0].message
