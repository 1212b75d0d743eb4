"""Pool.map hangs for ever when a worker raises an exception the parent cannot unpickle.

Report: https://github.com/python/cpython/issues/103061 (also bpo-35311,
https://github.com/python/cpython/issues/79492 and https://github.com/python/cpython/issues/93542).

A worker raises a custom exception whose ``__init__`` takes two required arguments but
passes one message to ``Exception.__init__``. Pickling it works in the worker; unpickling
it in the parent (``ParseError(*self.args)``) raises ``TypeError: __init__() missing 1
required positional argument``. That happens in the Pool's ``_handle_results`` thread in
the parent, which dies with the traceback printed on stderr; the result of the failed task
is never delivered, so ``pool.map`` waits for ever while the two workers sit idle waiting
for more tasks. Nothing uses CPU: a hang. The reporters' fix: make the exception
picklable (pass all constructor arguments to ``super().__init__`` or define
``__reduce__``), or use ``concurrent.futures.ProcessPoolExecutor``, which reports the
unpickling error as a failed future instead of hanging.
"""
import multiprocessing as mp


class ParseError(Exception):
    def __init__(self, path, line):
        super().__init__(f"{path}:{line}: bad record")
        self.path = path
        self.line = line


def parse_chunk(i):
    if i == 3:
        raise ParseError("data.csv", i)
    return i * 2


if __name__ == "__main__":
    with mp.Pool(2) as pool:
        results = pool.map(parse_chunk, range(8))
    print(results)
