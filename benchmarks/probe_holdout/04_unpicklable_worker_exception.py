"""A Pool task raises an exception that cannot be unpickled: Pool.map hangs for ever.

Modelled on python/cpython#103061 ("multiprocessing.Pool hangs on certain custom
Exceptions", https://github.com/python/cpython/issues/103061) and python/cpython#79492
(bpo-35311, "exception unpickling error causes multiprocessing.Pool to hang forever").
The task raises a custom exception whose __init__ takes two arguments but passes one
message to Exception.__init__; pickling it in the worker works, unpickling it in the parent
calls MyError(msg) and raises TypeError inside the Pool's result-handler thread
("Exception in thread Thread-3 (_handle_results)"). That thread dies, no result is ever
delivered, `pool.map` waits for ever. The fix (maintainers' answer): make the exception
picklable -- pass all constructor arguments to super().__init__ or define __reduce__ --
or raise a plain exception type from worker code.
"""
import multiprocessing


class RecordError(Exception):
    def __init__(self, record, reason):
        super().__init__(f"record {record}: {reason}")
        self.record = record
        self.reason = reason


def parse(record):
    if record == 5:
        raise RecordError(record, "malformed")
    return record


if __name__ == "__main__":
    with multiprocessing.Pool(2) as pool:
        print(pool.map(parse, range(10)))
