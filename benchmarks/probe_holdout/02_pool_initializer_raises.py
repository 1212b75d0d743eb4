"""A multiprocessing.Pool whose initializer raises: the workers are replaced for ever.

Modelled on python/cpython#87472 (bpo-43306, "Error in multiprocessing.Pool's initializer
doesn't stop execution", https://github.com/python/cpython/issues/87472). The initializer
loads a per-worker resource (here a model file that does not exist, as in a config with a
wrong path); it raises FileNotFoundError in every worker, the worker exits with status 1,
the Pool's maintenance thread starts a new worker, which dies the same way, for ever:
`pool.map` never returns, stderr fills with identical "Process ForkPoolWorker-N" tracebacks.
The fix from the report: make the initializer's failure visible (load/check the resource
in the parent first, or catch the error in the initializer), or use
concurrent.futures.ProcessPoolExecutor(initializer=...), which marks the pool broken and
raises BrokenProcessPool instead of re-spawning.
"""
import multiprocessing
import pickle

MODEL = None


def load_model(path):
    global MODEL
    with open(path, "rb") as f:
        MODEL = pickle.load(f)


def predict(x):
    return MODEL(x)


if __name__ == "__main__":
    with multiprocessing.Pool(2, initializer=load_model, initargs=("/nonexistent/model.pkl",)) as pool:
        print(pool.map(predict, range(10)))
