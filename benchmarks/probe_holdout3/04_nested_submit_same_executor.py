"""Tasks submit sub-tasks to their own ThreadPoolExecutor and wait: pool starvation deadlock.

Report: https://github.com/langchain-ai/langchain/pull/10638 (a runnable running in an
executor with max_concurrency=1 submits its inner call to the same executor and waits on
``.result()``: "This code seems to be dead locking"); the concurrent.futures docs warn about
the same pattern (https://github.com/python/cpython/pull/141620).

An embedding pipeline runs ``process_document`` for each document on a 4-thread executor;
each document splits itself into chunks and submits ``embed_chunk`` for every chunk to the
same executor, then waits for those futures. With 8 documents the 4 threads all pick up a
document and block in ``future.result()``; the chunk tasks are queued behind the remaining
documents and no thread is ever free to run them. All threads wait on conditions; the
process uses no CPU and never finishes.
Fix: use a separate executor for the inner tasks (or run them inline), or make the outer
level not wait inside the pool (submit the inner work from the caller).
"""
from concurrent.futures import ThreadPoolExecutor
import time

executor = ThreadPoolExecutor(max_workers=4)


def embed_chunk(chunk):
    time.sleep(0.05)                      # stands for a model / API call
    return [len(chunk) / 100.0] * 8


def process_document(doc):
    chunks = [doc[i:i + 200] for i in range(0, len(doc), 200)]
    futures = [executor.submit(embed_chunk, c) for c in chunks]
    return [f.result() for f in futures]


if __name__ == "__main__":
    docs = [("lorem ipsum dolor sit amet " * 40) + str(i) for i in range(8)]
    embeddings = list(executor.map(process_document, docs))
    print(sum(len(e) for e in embeddings), "chunk embeddings")
