"""A Pool task creates its own Pool: "daemonic processes are not allowed to have children".

Report: https://github.com/ThilinaRajapakse/simpletransformers/issues/1247 ("Daemonic
processes are not allowed to have children error": a library function that opens
``Pool(process_count)`` is called from inside a pooled worker); same in
https://github.com/noxdafox/pebble/issues/31.

A corpus-preprocessing job maps ``preprocess_shard`` over shards with an outer Pool. The
function reuses a helper, ``tokenize_all``, that parallelises itself with its own
``multiprocessing.Pool``. Pool workers are daemonic processes, and a daemonic process may
not start children: ``Pool.__init__`` in the worker fails with ``AssertionError: daemonic
processes are not allowed to have children``. The error is sent back to the parent and
re-raised by ``pool.map``: the program exits 1 within a second or two.
Fix: parallelise at one level only (make the helper accept a pool or run serially when
``multiprocessing.current_process().daemon``), use threads inside the worker, or use
``concurrent.futures.ProcessPoolExecutor`` for the outer level (its workers are not daemonic).
"""
import multiprocessing as mp


def tokenize(text):
    return text.lower().split()


def tokenize_all(texts, processes=2):
    with mp.Pool(processes) as pool:              # fine when called from the main process
        return pool.map(tokenize, texts)


def preprocess_shard(shard_id):
    texts = [f"Document {shard_id}-{i} About Parallel Python" for i in range(100)]
    tokens = tokenize_all(texts)
    return shard_id, sum(len(t) for t in tokens)


if __name__ == "__main__":
    with mp.Pool(2) as pool:
        results = pool.map(preprocess_shard, range(8))
    print(results)
