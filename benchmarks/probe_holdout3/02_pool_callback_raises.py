"""An apply_async callback raises in the Pool's result-handler thread: close()+join() hang.

Report: https://github.com/python/cpython/issues/83371 (bpo-39190, "multiprocessing.Pool
deadlock when a callback raises"; see the fix PRs https://github.com/python/cpython/pull/17795
and https://github.com/python/cpython/pull/155777).

A log-analysis job scores files with ``apply_async`` and folds every result into a summary
in a ``callback``. The callback runs in the Pool's internal ``_handle_results`` thread of
the parent. For one file the callback divides by a zero line count and raises
ZeroDivisionError: the exception escapes ``ApplyResult._set`` and kills the result-handler
thread (its traceback is printed on stderr as "Exception in thread ... (_handle_results)"),
so that job is never marked done and never removed from the pool's cache. ``pool.join()``
then waits for the worker-handler thread, which keeps looping while the cache is not empty;
because nobody reads the result pipe any more it stays readable, so on 3.11 that loop
spins (~one core of CPU in the parent) without ever making progress. The main thread waits
for ever in ``join``; the workers sit idle.
Fix: never let a callback raise (catch inside it / do the bookkeeping after ``.get()``), or
collect AsyncResults and call ``.get()`` on each; fixed upstream by making the callback's
exception the job's result.
"""
import multiprocessing as mp
import time

summary = {}


def score_file(name):
    time.sleep(0.05)                      # pretend to parse a log file
    n_lines = 0 if name == "empty.log" else 100 + len(name)
    n_errors = len(name) % 7
    return name, n_errors, n_lines


def on_done(result):
    name, n_errors, n_lines = result
    summary[name] = n_errors / n_lines    # ZeroDivisionError for the empty file


if __name__ == "__main__":
    files = [f"app-{i:03d}.log" for i in range(20)] + ["empty.log"] + [f"db-{i:03d}.log" for i in range(20)]
    pool = mp.Pool(2)
    for name in files:
        pool.apply_async(score_file, (name,), callback=on_done)
    pool.close()
    pool.join()
    print(f"{len(summary)} files scored; worst: {max(summary, key=summary.get)}")
