"""Counting into a ``Manager().dict()`` from several processes is very slow, not hung.

Report: https://github.com/flav-io/flavio/pull/123 ("these ``Manager().dict()`` objects are
actually very slow. In particular, writing a single entry to such a shared dict took me
around 20 us, while the same write to a normal dict took me only 30 ns"); also
https://github.com/luizalabs/shared-memory-dict/issues/10.

Four worker processes count word occurrences into one ``multiprocessing.Manager().dict()``.
Every ``counts[w] = counts.get(w, 0) + 1`` is two round trips (pickle, socket, the manager's
server thread, unpickle) to the manager process, so 4 x 300,000 updates take minutes on a
2-core machine, while the same loop on a local dict takes a fraction of a second. The
processes are alive and busy (the manager's server process and the workers use CPU, the
parent waits in ``join``) and the counter advances: slow but progressing, not a deadlock;
a user who gives up after a minute thinks it hangs (and the get/set pair also loses
updates between processes). Fix: count in a local ``dict``/``Counter`` in each worker and
merge once at the end (return it from a Pool task, or one ``update`` call), or use shared
memory (``multiprocessing.Array``/``Value``) for fixed-size counters.
"""
import multiprocessing as mp
import random


def count_words(counts, seed, n):
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(500)]
    for _ in range(n):
        w = rng.choice(words)
        counts[w] = counts.get(w, 0) + 1


if __name__ == "__main__":
    with mp.Manager() as manager:
        counts = manager.dict()
        procs = [mp.Process(target=count_words, args=(counts, s, 300_000)) for s in range(4)]
        for p in procs:
            p.start()
        for p in procs:
            p.join()
        print(sum(counts.values()))
