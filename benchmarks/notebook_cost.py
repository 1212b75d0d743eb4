"""What linting a notebook costs against a ``.py`` file of the same code.

For each notebook of the corpus of ``benchmarks/notebooks.py`` (filled by that script
first), the program the linter analyses (its code cells joined, IPython's syntax
neutralised: ``notebook.read``) is written beside it as a ``.py`` file in a second
folder, and ``gpudoctor lint --no-cache`` is timed on each, alone in a project of its
own, the notebook and its ``.py`` in turn (A B A B ...), as separate processes: the
median of ``--runs`` runs of each.
The script prints per notebook the two medians, their ratio and the cost per code cell,
then the sum of the per-file medians, and the same for the whole corpus linted as one
folder (where the start-up of the process is paid once), with the default ``--jobs`` and
with ``--jobs 1``.

``--in-corpus`` times each file inside the corpus instead of alone in a project of
its own: a run that names one file of a project also reads the project's other files for
their imports, and for a notebook that reading is its JSON and its cells.

``--profile`` also times, in this process, the notebook's own steps on every notebook:
reading the JSON (``json.loads`` alone), the whole ``notebook.read`` (JSON, joining the
cells, neutralising magics), and mapping every program row back to its cell
(``Notebook.locate``, which each finding's position and each related location in a
message use), against a libcst parse of the program (what the analysis of the ``.py``
starts with). Speed is never asserted: the script prints figures.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import notebooks as corpus_script  # noqa: E402 - the corpus and its pins live beside this script
from checked import captured  # noqa: E402


def _program(raw: bytes) -> str:
    from gpudoctor.lint import notebook

    return notebook.read(raw).program


def _code_cells(raw: bytes) -> int:
    return sum(1 for cell in json.loads(raw)["cells"] if cell.get("cell_type") == "code")


def _project(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pyproject.toml").write_text(corpus_script.CORPUS_PYPROJECT, encoding="utf-8")
    return folder


def write_python_twins(names: list[str], corpus: Path, twins: Path, alone: Path) -> None:
    """``twins/NAME.py`` for each notebook (the program the linter reads from it), and
    each notebook and its twin alone in a project of its own under ``alone``, where a
    run that names it reads no other file."""
    _project(twins)
    for name in names:
        raw = (corpus / name).read_bytes()
        target = twins / f"{name}.py"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(_program(raw), encoding="utf-8")
        flat = name.replace("/", "__")
        (_project(alone / "ipynb" / flat) / "nb.ipynb").write_bytes(raw)
        (_project(alone / "py" / flat) / "nb.py").write_text(_program(raw), encoding="utf-8")


def _run(python: str, cwd: Path, paths: list[str]) -> float:
    command = [python, "-m", "gpudoctor", "lint", "--no-cache", "--exit-zero", "--output-format", "concise",
               *paths]  # a path may be an option (--jobs 1)
    _, seconds = captured(command, cwd)  # a run that fails stops the benchmark (``checked``)
    return seconds


def paired(python: str, runs: int, a: tuple[Path, list[str]], b: tuple[Path, list[str]]) -> tuple[float, float]:
    """Median seconds of A and of B, run in turn after one warm-up of each."""
    _run(python, *a)
    _run(python, *b)
    times_a, times_b = [], []
    for _ in range(runs):
        times_a.append(_run(python, *a))
        times_b.append(_run(python, *b))
    return statistics.median(times_a), statistics.median(times_b)


def _median_time(action, repeat: int) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def _steps(raw: bytes, repeat: int) -> list[float]:
    """Seconds of: the JSON, the whole read, locating every row, a libcst parse."""
    import libcst

    from gpudoctor.lint import notebook

    found = notebook.read(raw)
    rows = found.program.count("\n")
    return [
        _median_time(lambda: json.loads(raw), repeat),
        _median_time(lambda: notebook.read.__wrapped__(raw), repeat),
        _median_time(lambda: [found.locate(row) for row in range(1, rows + 1)], repeat),
        _median_time(lambda: libcst.parse_module(found.program), max(1, repeat // 3)),
    ]


def profile(names: list[str], corpus: Path, repeat: int) -> None:
    """The notebook's own steps against a libcst parse of its program, in this process."""
    print(f"\nin-process, median of {repeat}, milliseconds:")
    print(f"{'notebook':62s} {'kB':>6s} {'json':>7s} {'read':>7s} {'locate':>7s} {'parse':>8s}")
    totals = [0.0, 0.0, 0.0, 0.0]
    for name in names:
        raw = (corpus / name).read_bytes()
        figures = _steps(raw, repeat)
        totals = [t + f for t, f in zip(totals, figures, strict=True)]
        print(f"{name[-62:]:62s} {len(raw) / 1000:6.0f} " + " ".join(f"{f * 1000:7.1f}" for f in figures[:3])
              + f" {figures[3] * 1000:8.1f}")
    print(f"{'all':62s} {'':6s} " + " ".join(f"{t * 1000:7.1f}" for t in totals[:3]) + f" {totals[3] * 1000:8.1f}")
    print("(locate: every row of the program mapped once, far more than the findings need)")


def _line(label: str, cells: int, t_nb: float, t_py: float) -> None:
    print(f"{label:62s} {cells:5d} {t_nb:7.3f} {t_py:7.3f} {t_nb / t_py:6.2f} "
          f"{t_nb / cells * 1000:8.1f} {(t_nb - t_py) / cells * 1000:7.2f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cache", type=Path, default=corpus_script.DEFAULT_CACHE,
                        help=f"the corpus cache of benchmarks/notebooks.py (default {corpus_script.DEFAULT_CACHE})")
    parser.add_argument("--python", default=sys.executable,
                        help="the interpreter whose gpudoctor lints (default: this one)")
    parser.add_argument("--runs", type=int, default=5, help="timed runs of each command (default 5)")
    parser.add_argument("--only", action="append", default=[], metavar="SOURCE",
                        help="only this source's notebooks (repeatable)")
    parser.add_argument("--in-corpus", action="store_true",
                        help="time each file inside the corpus (as pre-commit names one file of a project: "
                             "the run also reads the project's other files for their imports) rather than alone")
    parser.add_argument("--profile", action="store_true", help="also time the notebook's steps in this process")
    args = parser.parse_args()

    pinned, _ = corpus_script.load_expectations(corpus_script.EXPECTATIONS)
    pinned = [n for n in pinned if not args.only or n.source.name in args.only]
    corpus = args.cache / "corpus"
    absent = [n.name for n in pinned if not (corpus / n.name).is_file()]
    if absent:
        print(f"notebook_cost: {len(absent)} notebook(s) are not in {corpus}: run benchmarks/notebooks.py first",
              file=sys.stderr)
        return 2
    names = [n.name for n in pinned]
    twins, alone = args.cache / "python", args.cache / "alone"
    write_python_twins(names, corpus, twins, alone)

    where = "inside the corpus" if args.in_corpus else "each alone in a project"
    print(f"gpudoctor lint --no-cache, one process per run, median of {args.runs}, one file a run ({where}); "
          "seconds, and ms per code cell")
    print(f"{'notebook':62s} {'cells':>5s} {'.ipynb':>7s} {'.py':>7s} {'ratio':>6s} {'ms/cell':>8s} {'extra':>7s}")
    sum_nb = sum_py = 0.0
    cells_total = 0
    for name in names:
        cells = _code_cells((corpus / name).read_bytes())
        cells_total += cells
        if args.in_corpus:
            pair = (corpus, [name]), (twins, [f"{name}.py"])
        else:
            flat = name.replace("/", "__")
            pair = (alone / "ipynb" / flat, ["nb.ipynb"]), (alone / "py" / flat, ["nb.py"])
        t_nb, t_py = paired(args.python, args.runs, *pair)
        sum_nb, sum_py = sum_nb + t_nb, sum_py + t_py
        _line(name[-62:], cells, t_nb, t_py)
    _line("sum of the per-file medians", cells_total, sum_nb, sum_py)
    sources = sorted({name.split("/", 1)[0] for name in names})
    t_nb, t_py = paired(args.python, args.runs, (corpus, sources), (twins, sources))
    _line("the corpus as one folder (one process)", cells_total, t_nb, t_py)
    t_nb, t_py = paired(args.python, args.runs, (corpus, ["--jobs", "1", *sources]),
                        (twins, ["--jobs", "1", *sources]))
    _line("the corpus as one folder, --jobs 1", cells_total, t_nb, t_py)
    print("(extra: ms per code cell that the notebook costs more than its .py)")
    if args.profile:
        profile(names, corpus, max(3, args.runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
