"""Time gpudoctor on a corpus where every file matters (GPU framework + multiprocessing)."""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # checked.py, beside it (python -I adds no folder)
from checked import timed  # noqa: E402

TEMPLATE = '''\
import multiprocessing as mp
import cupy as cp
import helpers_{n} as helpers


def work_{n}(x):
    return float(cp.sum(cp.asarray(x)))


def prepare_{n}(items):
    data = [cp.arange(i) for i in items]
    return [d.get() for d in data]


class Runner{n}:
    def __init__(self, size):
        self.size = size

    def run(self, items):
        ctx = mp.get_context("spawn") if self.size > {n} else mp.get_context()
        with ctx.Pool(self.size) as pool:
            return pool.map(work_{n}, prepare_{n}(items))


if __name__ == "__main__":
    helpers.setup()
    print(Runner{n}(4).run(range(10)))
'''
HELPER = '''\
import os


def setup():
    os.environ.setdefault("CUPY_GPU_MEMORY_LIMIT", "50%")
'''


def generate(where: Path, count: int) -> None:
    for n in range(count):
        (where / f"job_{n}.py").write_text(TEMPLATE.format(n=n))
        (where / f"helpers_{n}.py").write_text(HELPER)


def _time(command: list[str], repeat: int) -> float:
    """The median wall time; a run that fails stops the benchmark (``checked``)."""
    return statistics.median(timed(command) for _ in range(repeat))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--files", type=int, default=400)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        corpus = Path(scratch)
        generate(corpus, args.files)
        floor = _time([sys.executable, "-c",
                       "import sys, pathlib, libcst\n"
                       "for p in pathlib.Path(sys.argv[1]).glob('*.py'): libcst.parse_module(p.read_text())",
                       str(corpus)], args.repeat)
        lint = [sys.executable, "-m", "gpudoctor", "lint", "--exit-zero", "--no-cache", str(corpus)]
        one = _time([*lint, "--jobs", "1"], args.repeat)
        two = _time([*lint, "--jobs", "2"], args.repeat)
    print(f"dense corpus: {2 * args.files} files, every one linted; median of {args.repeat} runs")
    print(f"  libcst parse only (floor)     {floor:7.2f} s")
    print(f"  gpudoctor lint --jobs 1       {one:7.2f} s  {one / floor:5.2f}x the floor")
    print(f"  gpudoctor lint --jobs 2       {two:7.2f} s  {two / floor:5.2f}x the floor  "
          f"{one / two:5.2f}x faster than --jobs 1")
    return 0


if __name__ == "__main__":
    sys.exit(main())
