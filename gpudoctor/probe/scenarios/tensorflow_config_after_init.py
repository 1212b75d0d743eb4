"""Configure TensorFlow's devices and threads after it has initialized.

Unsafe: the program runs an op first, then asks for memory growth on each GPU
and for a smaller intra-op thread pool. TensorFlow fixes its devices and thread
pools when it initializes, so the configuration raises ``RuntimeError``
("Physical devices cannot be modified after being initialized" with a GPU;
"Intra op parallelism cannot be modified after initialization" on any machine).
Programs that wrap these calls in ``try/except RuntimeError: print(e)`` carry on
with the settings they did not want.

Safe: the same configuration before the first op.

Run it yourself: ``python tensorflow_config_after_init.py unsafe|safe``.
"""

from __future__ import annotations

import sys

import tensorflow as tf

SCENARIO = {
    "name": "tensorflow-config-after-init",
    "rule": "GD302",
    "needs": ["tensorflow"],
    "gpu": False,
    "unsafe": "an op runs first; then set_memory_growth and set_intra_op_parallelism_threads",
    "safe": "set_memory_growth and set_intra_op_parallelism_threads before the first op",
    "expect": {"unsafe": ["crashed"], "safe": ["ok"]},
}


def configure() -> None:
    for gpu in tf.config.list_physical_devices("GPU"):
        tf.config.experimental.set_memory_growth(gpu, True)
    tf.config.threading.set_intra_op_parallelism_threads(1)


def step() -> float:
    ones = tf.ones((256, 256))
    return float(tf.reduce_sum(tf.matmul(ones, ones)))


def unsafe() -> None:
    print(step())
    configure()
    print(step())


def safe() -> None:
    configure()
    print(step())
    print("intra-op threads:", tf.config.threading.get_intra_op_parallelism_threads())


if __name__ == "__main__":
    if sys.argv[1:] == ["unsafe"]:
        unsafe()
    else:
        safe()
