"""Time gpudoctor on a corpus where every file matters (GPU framework + multiprocessing)."""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

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
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


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
        lint = _time([sys.executable, "-m", "gpudoctor", "lint", "--exit-zero", "--no-cache", str(corpus)],
                     args.repeat)
    print(f"dense corpus: {2 * args.files} files ({args.files} that matter); median of {args.repeat} runs")
    print(f"  libcst parse only (floor)   {floor:8.2f} s")
    print(f"  gpudoctor lint              {lint:8.2f} s  {lint / floor:6.2f}x the floor")
    return 0


if __name__ == "__main__":
    sys.exit(main())
