"""A module-level ThreadPoolExecutor is used inside forked Pool workers: futures never finish.

Report: https://github.com/rohanpm/more-executors/issues/140 ("Improve fork-safety": thread-
backed futures "hang when accessed" after fork); related CPython fork hang in the same
module: https://github.com/python/cpython/pull/28007 (bpo-45021).

A feature-extraction script keeps one ``ThreadPoolExecutor`` (4 threads) at module level to
download/prefetch files concurrently, and warms it up in the parent. It then parallelises
the CPU-heavy part with a ``multiprocessing`` Pool (``fork``); each worker calls the same
``fetch_many`` helper, which submits to the inherited executor. In the child the executor
object still lists its 4 worker threads, but threads do not survive fork(), so
``submit`` starts no new thread and the work item sits in the queue: ``future.result()``
blocks for ever in every worker, and the parent blocks in ``pool.map``. No CPU is used.
Fix: create thread pools after the fork (inside the worker / Pool initializer), use the
``spawn`` start method, or do not mix a module-level executor with fork.
"""
import concurrent.futures as cf
import multiprocessing as mp
import time

io_pool = cf.ThreadPoolExecutor(max_workers=4)


def fetch(url):
    time.sleep(0.2)                               # stands for an HTTP GET
    return url.encode() * 1000


def fetch_many(urls):
    futures = [io_pool.submit(fetch, u) for u in urls]
    return [f.result() for f in futures]


def extract_features(shard):
    blobs = fetch_many([f"https://data.example/{shard}/{i}" for i in range(3)])
    return shard, sum(len(b) for b in blobs)


if __name__ == "__main__":
    print("warm-up:", len(fetch_many([f"https://data.example/warmup/{i}" for i in range(4)])), flush=True)
    with mp.Pool(2) as pool:
        print(pool.map(extract_features, range(6)))
