"""Keras model built in the parent, then used for prediction in forked Pool workers: hangs.

Report: https://github.com/tensorflow/tensorflow/issues/8220 ("Session hang issue with
python multiprocessing"); same pattern in https://github.com/keras-team/keras/issues/9964
("Keras is not multi-processing safe": predict() hangs when the model is created outside
the child).

A scoring script builds (or loads) a small Keras model at module level, runs it once in
the parent (which starts TensorFlow's intra-/inter-op thread pools), and then fans the
scoring of several shards out to a ``multiprocessing`` Pool using the default ``fork``
start method so the workers can reuse the model without reloading it. A forked child has
only the thread that called fork(); TensorFlow's runtime state (thread pools, mutexes held
by pool threads at fork time) is copied but its threads are not, so ``model.predict`` in
each worker blocks for ever waiting for work that no thread will pick up. The parent
waits in ``pool.map``; nothing uses CPU.
Fix from the reports: do not touch TensorFlow in the parent before forking -- create/load
the model inside each worker (Pool initializer) and/or use the ``spawn`` start method
(``multiprocessing.get_context("spawn")``), or run inference in one process with batching.
"""
import multiprocessing as mp

import numpy as np
import tensorflow as tf

model = tf.keras.Sequential([
    tf.keras.Input((32,)),
    tf.keras.layers.Dense(64, activation="relu"),
    tf.keras.layers.Dense(1),
])
shard = np.random.default_rng(0).random((256, 32), dtype=np.float32)
print("sanity check in parent:", float(model(shard).numpy().sum()), flush=True)


def score_shard(i):
    return float(model.predict(shard + i, verbose=0).sum())


if __name__ == "__main__":
    with mp.Pool(2) as pool:
        scores = pool.map(score_shard, range(4))
    print("scores", scores)
