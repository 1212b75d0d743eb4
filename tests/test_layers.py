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


def test_linting_imports_no_gpu_stack(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("import multiprocessing as mp\nimport torch\nmp.Pool(2)\n")
    code = (
        "import sys; from gpudoctor.cli import main; main(['lint', '--exit-zero', sys.argv[1]]);"
        "bad = [m for m in ('pynvml', 'psutil', 'rich', 'torch', 'tensorflow', 'cupy', 'jax',"
        " 'gpudoctor.probe.nvml') if m in sys.modules]; print('LOADED', bad)"
    )
    run = subprocess.run([sys.executable, "-c", code, str(tmp_path / "a.py")], capture_output=True, text=True)
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
    run = subprocess.run([sys.executable, "-c", code, str(tmp_path / "plain.py")], capture_output=True, text=True)
    assert run.stdout.strip().endswith("LIBCST False"), run.stdout + run.stderr


def test_rules_read_the_analysis_through_the_check_context_only() -> None:
    # A rule reads flows, events and states, and asks CheckContext for the rest
    # (process_starts, method_at, spawn_fix, definition_site, ...): never the analyzer or
    # the flow builder, so that either can change without touching a rule.
    import re

    reaching = re.compile(r"\bctx\._|\bFlowBuilder\b|\bAnalyzer\b|analysis\.(analyzer|project|walker)\b")
    offending = [f"{path.name}:{row}" for path in (ROOT / "gpudoctor" / "lint" / "rules").glob("gd*.py")
                 for row, line in enumerate(path.read_text().splitlines(), start=1) if reaching.search(line)]
    assert offending == []
