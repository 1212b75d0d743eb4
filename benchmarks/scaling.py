"""How the cost of `gpudoctor lint` grows with loop depth, module length, nesting, import
cycles and ignore patterns.

Each case is a generated file linted in a process of its own (``--jobs 1 --no-cache``);
the wall time and the peak memory (the child's maximum resident set, from ``wait4``) are
printed against the depth or the size, with figures per 100 kB for the long modules and,
beside them, what parsing the same file with libcst alone costs (the floor: every
top-level statement of a module is parsed by libcst, so its memory is libcst's tree).
Where a size grows, the growth exponent is printed too: the slope of log(time over
start-up) against log(size), 1 for a cost that grows as the input does.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # checked.py, beside it (python -I adds no folder)
from checked import failure, not_found  # noqa: E402

HEAD = """\
from multiprocessing import Pool
import tensorflow as tf


def work(x):
    return tf.constant(x)


tf.constant(1)
"""


def nested_loops(depth: int) -> str:
    """A pool started inside ``depth`` nested loops, after TensorFlow initialized."""
    lines = [HEAD.rstrip("\n")]
    lines.extend("    " * k + (f"for i{k} in range(2):" if k % 2 == 0 else f"while c{k}:") for k in range(depth))
    lines.append("    " * depth + "Pool(2).map(work, [1])")
    return "\n".join(lines) + "\n"


def long_module(size: int) -> str:
    """A module of about ``size`` characters of top-level statements of every kind (each
    binding new names), that starts a pool at the end."""
    chunks = [HEAD, "c = 1\n"]
    total, n = sum(map(len, chunks)), 0
    while total < size:
        chunk = (f"x{n} = {n} + len('abc')\n"
                 f"if c:\n    y{n} = x{n}\nelse:\n    y{n} = None\n"
                 f"for i in range(c):\n    z{n} = [y{n}, i]\n"
                 f"try:\n    w{n} = z{n}\nexcept ValueError:\n    w{n} = None\n")
        chunks.append(chunk)
        total += len(chunk)
        n += 1
    chunks.append("Pool(2).map(work, [1])\n")
    return "".join(chunks)


def conditional(terms: int) -> str:
    """A conditional expression of ``terms`` terms, then a pool start."""
    chain = " else ".join(f"{i} if c" for i in range(terms))
    return HEAD + f"c = 1\nx = {chain} else 0\nPool(2).map(work, [1])\n"


def elif_chain(arms: int) -> str:
    chain = "".join(f"elif c == {i}:\n    x = {i}\n" for i in range(arms))
    return HEAD + f"c = 1\nif c == -1:\n    x = 0\n{chain}else:\n    Pool(2).map(work, [1])\n"


def ring(folder: Path, modules: int) -> Path:
    """``modules`` modules each importing the next and reading a name of it, the last
    importing the first; each starts a pool after TensorFlow initialized (all linted)."""
    package = folder / "ring"
    package.mkdir()
    (package / "__init__.py").write_text("")
    for i in range(modules):
        following = (i + 1) % modules
        (package / f"m{i}.py").write_text(HEAD + f"import ring.m{following}\nX = 1\nY = ring.m{following}.X\n"
                                          "Pool(2).map(work, [1])\n")
    return package


def dense_cycle(folder: Path, modules: int) -> Path:
    """``modules`` modules that each import all the others and call their ``run()``, each
    ``run()`` initializing TensorFlow and starting a pool (all linted): the input grows as
    ``modules`` squared."""
    package = folder / f"dense{modules}"
    package.mkdir()
    (package / "__init__.py").write_text("")
    for i in range(modules):
        others = [j for j in range(modules) if j != i]
        lines = [HEAD.rstrip("\n"), *(f"from dense{modules} import m{j}" for j in others), "", "", "def run():",
                 "    tf.constant(1)", *(f"    m{j}.run()" for j in others), "    Pool(2).map(work, [1])", ""]
        (package / f"m{i}.py").write_text("\n".join(lines))
    return package


def pattern_bomb(folder: Path, stars: int) -> Path:
    """A project whose .gitignore holds one line of ``stars`` stars and an ``a``, beside 30
    files whose long names it does not match (matched by a backtracking matcher, each name
    costs it time that grows as a power of ``stars``)."""
    project = folder / f"bomb{stars}"
    project.mkdir()
    (project / "pyproject.toml").write_text('[project]\nname = "bomb"\n')
    (project / ".gitignore").write_text("*" * stars + "a\n")
    for i in range(30):
        (project / f"{'b' * 40}{i}.py").write_text(HEAD)
    return project



def _numbers(text: str) -> list[int]:
    """A comma-separated list of whole numbers (empty: none)."""
    return [int(part) for part in text.split(",") if part.strip()]

def exponent(sizes: list[float], times: list[float]) -> str:
    """The least-squares slope of log(time) against log(size), as text ("-" if undefined)."""
    points = [(math.log(x), math.log(y)) for x, y in zip(sizes, times, strict=True) if x > 0 and y > 0]
    if len(points) < 2:
        return "-"
    mean_x = sum(x for x, _ in points) / len(points)
    mean_y = sum(y for _, y in points) / len(points)
    spread = sum((x - mean_x) ** 2 for x, _ in points)
    if spread == 0:
        return "-"
    return f"{sum((x - mean_x) * (y - mean_y) for x, y in points) / spread:.2f}"


TIMED_OUT = -1


def measure(command: list[str], cwd: Path, timeout: float) -> tuple[float, float, int]:
    """Run ``command``; return its wall time (s), its peak resident memory (MiB), and its
    exit status: 0, or TIMED_OUT if it was killed after ``timeout`` seconds (a result of
    the case). Any other end stops the benchmark (``checked``): its stderr, kept in a
    temporary file, is read after the clock stopped."""
    with tempfile.TemporaryFile() as stderr:
        started = time.perf_counter()
        try:
            child = subprocess.Popen(command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=stderr)
        except OSError as error:
            raise not_found(command, error, cwd) from None
        while True:
            pid, status, usage = os.wait4(child.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() - started > timeout:
                child.kill()
                _, status, usage = os.wait4(child.pid, 0)
                child.returncode = TIMED_OUT
                return time.perf_counter() - started, usage.ru_maxrss / 1024, TIMED_OUT
            time.sleep(0.005)
        elapsed = time.perf_counter() - started
        child.returncode = os.waitstatus_to_exitcode(status)
        stderr.seek(0)
        problem = failure(command, child.returncode, stderr.read().decode(errors="replace"), cwd=cwd)
    if problem is not None:
        raise problem
    return elapsed, usage.ru_maxrss / 1024, child.returncode


def lint(target: Path, cwd: Path, repeat: int, timeout: float) -> tuple[float, float, int]:
    command = [sys.executable, "-m", "gpudoctor", "lint", "--no-cache", "--jobs", "1", "--exit-zero",
               "-o", os.devnull, str(target)]
    runs = []
    for _ in range(repeat):
        runs.append(measure(command, cwd, timeout))
        if runs[-1][2] == TIMED_OUT:
            break
    return statistics.median(r[0] for r in runs), max(r[1] for r in runs), runs[-1][2]


def parse_only(target: Path, cwd: Path, timeout: float) -> tuple[float, float]:
    command = [sys.executable, "-c", "import sys, libcst\nlibcst.parse_module(open(sys.argv[1]).read())", str(target)]
    elapsed, memory, _ = measure(command, cwd, timeout)
    return elapsed, memory


def status(code: int, timeout: float) -> str:
    return f"TIMED OUT after {timeout:.0f} s" if code == TIMED_OUT else "ok"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--depths", default="4,8,12,16,24,32,40", help="loop depths (comma-separated)")
    parser.add_argument("--sizes", default="100,300,1000,3000", help="module sizes in kB (comma-separated)")
    parser.add_argument("--ring", type=int, default=100, help="modules in the import ring (0: none)")
    parser.add_argument("--dense", default="10,20,40,60",
                        help="module counts of the dense import cycles (comma-separated; empty: none)")
    parser.add_argument("--stars", default="40,5000",
                        help="stars in the .gitignore line (comma-separated; empty: none)")
    parser.add_argument("--repeat", type=int, default=1, help="runs per case (the median time is shown)")
    parser.add_argument("--timeout", type=float, default=120, help="seconds a case may run before it is killed")
    args = parser.parse_args()
    timeout = args.timeout
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        (folder / "pyproject.toml").write_text('[project]\nname = "scaling"\nrequires-python = ">=3.10"\n')
        empty = folder / "empty.py"
        empty.write_text(HEAD)
        lint(empty, folder, 1, timeout)  # (warms the file system cache and the bytecode)
        base, base_memory, _ = lint(empty, folder, 3, timeout)
        print(f"start-up (a {len(HEAD)}-character file): {base:.2f} s, {base_memory:.0f} MiB\n")

        print("nested loops (a pool started inside them)")
        print(f"{'depth':>6} {'time s':>8} {'over start-up s':>16} {'peak MiB':>9}  status")
        for depth in _numbers(args.depths):
            path = folder / f"loops_{depth}.py"
            path.write_text(nested_loops(depth))
            elapsed, memory, code = lint(path, folder, args.repeat, timeout)
            print(f"{depth:>6} {elapsed:>8.2f} {elapsed - base:>16.2f} {memory:>9.0f}  {status(code, timeout)}")

        print("\nlong modules (top-level statements of every kind, a pool started at the end)")
        print(f"{'kB':>6} {'time s':>8} {'s/100 kB':>9} {'peak MiB':>9} {'MiB/100 kB':>11}"
              f" {'libcst parse s':>15} {'libcst MiB':>11}  status")
        long_sizes, long_times = [], []
        for kilobytes in _numbers(args.sizes):
            path = folder / f"long_{kilobytes}.py"
            path.write_text(long_module(kilobytes * 1000))
            elapsed, memory, code = lint(path, folder, args.repeat, timeout)
            long_sizes.append(kilobytes)
            long_times.append(elapsed - base)
            floor, floor_memory = parse_only(path, folder, timeout)
            hundreds = kilobytes / 100
            print(f"{kilobytes:>6} {elapsed:>8.2f} {(elapsed - base) / hundreds:>9.2f} {memory:>9.0f}"
                  f" {(memory - base_memory) / hundreds:>11.0f} {floor:>15.2f} {floor_memory:>11.0f}"
                  f"  {status(code, timeout)}")
        print(f"growth exponent (time over start-up against size): {exponent(long_sizes, long_times)}")

        print("\nnested past what the analysis follows")
        print(f"{'case':>28} {'time s':>8} {'peak MiB':>9}  status")
        for name, text in (("conditional, 500 terms", conditional(500)),
                           ("conditional, 1500 terms", conditional(1500)),
                           ("elif chain, 2000 arms", elif_chain(2000))):
            path = folder / (name.replace(" ", "_").replace(",", "") + ".py")
            path.write_text(text)
            elapsed, memory, code = lint(path, folder, args.repeat, timeout)
            print(f"{name:>28} {elapsed:>8.2f} {memory:>9.0f}  {status(code, timeout)}")
        if args.ring:
            elapsed, memory, code = lint(ring(folder, args.ring), folder, args.repeat, timeout)
            print(f"{f'import ring, {args.ring} modules':>28} {elapsed:>8.2f} {memory:>9.0f}  {status(code, timeout)}"
                  f"  ({(elapsed - base) / args.ring * 1000:.0f} ms a module)")

        if args.dense:
            print("\ndense import cycles (every module imports and calls all the others)")
            print(f"{'modules':>8} {'lines':>7} {'time s':>8} {'peak MiB':>9}  status")
            lines_of, times = [], []
            for modules in _numbers(args.dense):
                package = dense_cycle(folder, modules)
                elapsed, memory, code = lint(package, folder, args.repeat, timeout)
                size = sum(len(p.read_text().splitlines()) for p in package.glob("*.py"))
                lines_of.append(size)
                times.append(elapsed - base)
                print(f"{modules:>8} {size:>7} {elapsed:>8.2f} {memory:>9.0f}  {status(code, timeout)}")
            print(f"growth exponent (time over start-up against lines): {exponent(lines_of, times)}")

        if args.stars:
            print("\na .gitignore line of stars and an 'a', 30 files it does not match")
            print(f"{'stars':>8} {'time s':>8} {'over start-up s':>16}  status")
            for stars in _numbers(args.stars):
                project = pattern_bomb(folder, stars)
                elapsed, _, code = lint(project, project, args.repeat, timeout)
                print(f"{stars:>8} {elapsed:>8.2f} {elapsed - base:>16.2f}  {status(code, timeout)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
