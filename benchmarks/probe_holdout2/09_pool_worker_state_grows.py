"""Long-lived Pool workers accumulate state across tasks until memory runs out.

Report: https://github.com/mementum/backtrader/pull/417 ("When running big optimizations,
child processes consume memory until they crash ... Limiting the number of tasks assigned
to each child process forces them to exit and release memory"); see also
https://github.com/python/cpython/issues/83712.

A parameter sweep maps ``run_backtest`` over many configurations with a 2-worker Pool. Each
worker memoises loaded price series in a module-level cache keyed by the configuration, so
every task adds ~8 MB that is never freed; a worker lives for the whole sweep, so each
worker's resident memory grows linearly (both workers together by ~16 MB per pair of
tasks). Without a limit the machine's OOM killer ends one worker and ``Pool.map`` would
then wait for ever; here the program bounds each process with ``RLIMIT_AS`` = 1 GiB (at ~0.9 GB a
worker fails with ``MemoryError`` and the Pool is left waiting) and the probe's
``--memory-limit 600MB`` stands for the machine's RAM. Fix from the report: ``Pool(maxtasksperchild=N)`` so workers
are replaced and their memory returned (and/or do not cache per task in the worker).
"""
import multiprocessing as mp
import resource

import numpy as np

resource.setrlimit(resource.RLIMIT_AS, (1024 * 2**20, 1024 * 2**20))

_price_cache = {}


def load_prices(key):
    if key not in _price_cache:
        rng = np.random.default_rng(key)
        _price_cache[key] = rng.standard_normal(1_000_000).cumsum()   # 8 MB per key
    return _price_cache[key]


def run_backtest(params):
    fast, slow = params
    prices = load_prices(fast * 1000 + slow)
    return fast, slow, float(prices[-1] - prices[0])


if __name__ == "__main__":
    grid = [(f, s) for f in range(5, 105) for s in range(20, 60)]
    with mp.Pool(2) as pool:
        results = pool.map(run_backtest, grid, chunksize=1)
    print(max(results, key=lambda r: r[2]))
