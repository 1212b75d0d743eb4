"""Time gpudoctor against ruff (and optionally fixit) on the keras source, in one run."""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import venv
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # checked.py, beside it (python -I adds no folder)
from checked import SUCCESS, timed  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def _median_seconds(command: list[str], cwd: Path, repeat: int, edit: Path | None = None,
                    ok: tuple[int, ...] = SUCCESS) -> float:
    """``edit``: a file given a comment line more before each run (its bytes change, its
    findings do not), as a commit that touched only it. A run that fails stops the
    benchmark (``checked``)."""
    times = []
    for index in range(repeat):
        if edit is not None:
            with edit.open("a") as stream:
                stream.write(f"# edit {index}\n")
        times.append(timed(command, cwd, ok=ok))
    return statistics.median(times)


def _tools_venv(where: Path, fixit: bool) -> Path:
    venv.EnvBuilder(with_pip=True).create(where)
    python = where / "bin" / "python"
    packages = ["keras", "ruff"] + (["fixit"] if fixit else [])
    subprocess.run([python, "-m", "pip", "install", "-q", *packages], check=True)
    return python


def _keras_source(python: Path, into: Path) -> Path:
    location = subprocess.run(
        [python, "-c", "import importlib.util as u; print(u.find_spec('keras').submodule_search_locations[0])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()
    target = into / "keras"
    shutil.copytree(location, target, ignore=shutil.ignore_patterns("__pycache__"))
    return into


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--fixit", action="store_true", help="also time fixit's default rules (slow)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        scratch_path = Path(scratch)
        python = _tools_venv(scratch_path / "venv", args.fixit)
        corpus = _keras_source(python, scratch_path / "corpus")
        files = sum(1 for _ in corpus.rglob("*.py"))
        ruff = [str(python.parent / "ruff"), "check", "--exit-zero", "keras"]
        gpudoctor = [sys.executable, "-m", "gpudoctor", "lint", "--exit-zero", "keras"]
        edited = "keras/src/saving/saving_lib_test.py"
        one_file = [sys.executable, "-m", "gpudoctor", "lint", "--exit-zero", "--no-cache", edited]
        one_file_warm = [sys.executable, "-m", "gpudoctor", "lint", "--exit-zero", edited]
        timed(ruff, corpus)  # fill ruff's cache
        timed(gpudoctor, corpus)  # and gpudoctor's
        results = {
            "ruff check (cold, --no-cache)": _median_seconds([*ruff, "--no-cache"], corpus, args.repeat),
            "ruff check (warm)": _median_seconds(ruff, corpus, args.repeat),
            "gpudoctor lint (cold, --no-cache)": _median_seconds([*gpudoctor, "--no-cache"], corpus, args.repeat),
            "gpudoctor lint (warm)": _median_seconds(gpudoctor, corpus, args.repeat),
            "gpudoctor lint, one file (pre-commit)": _median_seconds(one_file, corpus, args.repeat),
            # the cache warm (module summaries of what it imports), only that file edited
            "gpudoctor lint, one file edited (warm)": _median_seconds(one_file_warm, corpus, args.repeat,
                                                                       corpus / edited),
        }
        if args.fixit:
            # (fixit has no --exit-zero: exit 1 is its findings)
            results["fixit lint"] = _median_seconds([str(python.parent / "fixit"), "lint", "keras"], corpus, 1,
                                                    ok=(0, 1))
    cold, warm = results["ruff check (cold, --no-cache)"], results["ruff check (warm)"]
    print(f"keras corpus: {files} files; median of {args.repeat} runs; {os.cpu_count()} CPUs")
    for name, seconds in results.items():
        print(f"  {name:40s} {seconds:7.2f} s  {seconds / cold:6.1f}x ruff cold  {seconds / warm:6.1f}x ruff warm")
    return 0


if __name__ == "__main__":
    sys.exit(main())
