"""A ProcessPoolExecutor task times out, but leaving the ``with`` block waits for it for ever.

Report: https://github.com/algorithmicsuperintelligence/openevolve/issues/297 (fixed in
https://github.com/algorithmicsuperintelligence/openevolve/pull/469).

An evaluator runs each candidate in a ProcessPoolExecutor and bounds it with
``future.result(timeout=...)``. One task blocks in a network read that never completes
(here a socket to a local server that accepts but never answers, standing in for an HTTP
call without a timeout). ``result(timeout=3)`` raises ``TimeoutError`` as intended and the
program logs it, but ``Future.cancel()`` cannot cancel a running task, and the ``with``
block's ``__exit__`` calls ``shutdown(wait=True)``, which joins the executor's management
thread, which waits for the stuck worker. The worker is blocked in ``recv`` and the parent
in ``shutdown``: a hang although the user asked for a timeout. Fix from the PR: on timeout,
``shutdown(wait=False, cancel_futures=True)`` and terminate/kill the executor's worker
processes (Python 3.14: ``terminate_workers()``/``kill_workers()``), and give the blocking
call its own timeout.
"""
import socket
import threading
from concurrent.futures import ProcessPoolExecutor, TimeoutError


def silent_server(sock):
    conns = []
    while True:
        conn, _ = sock.accept()
        conns.append(conn)          # accept, never answer


def evaluate(port):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"GET /score HTTP/1.0\r\n\r\n")
    return s.recv(4096)             # no timeout: waits for ever


if __name__ == "__main__":
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    threading.Thread(target=silent_server, args=(srv,), daemon=True).start()
    port = srv.getsockname()[1]
    with ProcessPoolExecutor(max_workers=2) as ex:
        fut = ex.submit(evaluate, port)
        try:
            print(fut.result(timeout=3))
        except TimeoutError:
            print("evaluation timed out, giving up on it", flush=True)
            fut.cancel()
    print("evolution completed")
