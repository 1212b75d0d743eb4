"""Both ends of a duplex Pipe send a large message before receiving: both block for ever.

Modelled on jquast/x84#24 ("the engine's pipe.send() is blocking at the same time the
client's pipe.send() is blocking", https://github.com/jquast/x84/issues/24) and
mdavis-xyz/lambda_multiprocessing#17 ("Pipe.send occasionally hangs when submitting a large
job to child process": the parent fills the pipe while the child's send of its result
blocks). A Linux pipe/socket buffer holds only a few hundred KiB at most; Connection.send()
of a 4 MiB payload blocks until the other side reads. Parent and child each send their
4 MiB block first and read afterwards, so both sit in send() (a write to a full socket)
for ever, with no CPU use. The fix: do not send large payloads from both ends at once --
receive before sending, send from a separate thread, use a multiprocessing.Queue (its
feeder thread sends in the background), or pass large data through shared memory/files.
"""
import multiprocessing

BLOCK = b"x" * (4 * 1024 * 1024)


def worker(conn):
    conn.send(BLOCK)          # the child's result
    data = conn.recv()
    conn.send(len(data))


if __name__ == "__main__":
    parent_conn, child_conn = multiprocessing.Pipe()
    p = multiprocessing.Process(target=worker, args=(child_conn,))
    p.start()
    parent_conn.send(BLOCK)   # the next job, sent before reading the result
    result = parent_conn.recv()
    print(len(result), parent_conn.recv())
    p.join()
