"""A Pool task returns an object that cannot be pickled: MaybeEncodingError in the parent.

Modelled on numba/numba#682 (https://github.com/numba/numba/issues/682:
"multiprocessing.pool.MaybeEncodingError: Error sending result: ... Reason:
'PicklingError(...)'") and ramibch/django-tex#36 (MaybeEncodingError from a worker's
result). Each task opens a per-record resource and returns an object that keeps it (here a
"parsed file" holding its open file handle and a threading.Lock, as a parser object
does). The worker cannot pickle the result to send it back; the Pool turns that into
multiprocessing.pool.MaybeEncodingError ("Error sending result: ... Reason: 'TypeError(\"cannot
pickle '_thread.lock' object\")'"), raised in the parent by `pool.map`: the program exits
with status 1. The fix: return plain, picklable data from the task (the parsed values,
not the object holding the lock/file), or define __getstate__ on the object.
"""
import multiprocessing
import threading


class ParsedFile:
    def __init__(self, name):
        self.name = name
        self.lock = threading.Lock()
        self.values = [len(name)] * 3


def parse(name):
    return ParsedFile(name)


if __name__ == "__main__":
    with multiprocessing.Pool(2) as pool:
        parsed = pool.map(parse, [f"file{i}.csv" for i in range(6)])
    print(sum(sum(p.values) for p in parsed))
