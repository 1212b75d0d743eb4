"""Set TensorFlow's environment variables after it has initialized.

TensorFlow reads its environment once, when it initializes: a variable written
later is silently ignored. ``TF_FORCE_GPU_ALLOW_GROWTH=true`` written after the
first op leaves the process holding nearly all of a GPU's memory; the same goes
for ``CUDA_VISIBLE_DEVICES`` written in a fork child of an initialized parent.
Without a GPU those effects cannot be seen, so the scenario also writes
``TF_NUM_INTRAOP_THREADS``, read at the same moment, whose effect — the size of
the intra-op thread pool — shows in the process's native thread count on any
machine. Each variant checks that count and exits with an error naming the
ignored setting when the pool does not have the requested size.

Unsafe: one op, then the variables are written, then another op.
Safe: the variables are written before TensorFlow is imported.

Run it yourself: ``python tensorflow_env_after_init.py unsafe|safe``.
"""

from __future__ import annotations

import os
import sys

SCENARIO = {
    "name": "tensorflow-env-after-init",
    "rule": "GD301",
    "needs": ["tensorflow"],
    "gpu": False,
    "unsafe": "one op runs; then TF_FORCE_GPU_ALLOW_GROWTH and TF_NUM_INTRAOP_THREADS are set; another op runs",
    "safe": "the variables are set before TensorFlow is imported",
    "expect": {"unsafe": ["crashed"], "safe": ["ok"]},
}

# More threads than TensorFlow ever starts by default (about one per CPU for each
# of its two pools), so the pool's size tells whether the variable was read.
REQUESTED = 3 * (os.cpu_count() or 1) + 16


def set_variables() -> None:
    os.environ["TF_FORCE_GPU_ALLOW_GROWTH"] = "true"
    os.environ["TF_NUM_INTRAOP_THREADS"] = str(REQUESTED)


def native_threads() -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("Threads:"))


def step() -> float:
    import tensorflow as tf

    ones = tf.ones((1000, 1000))  # big enough to use the intra-op pool
    return float(tf.reduce_sum(tf.matmul(ones, ones)))


def check(when: str) -> None:
    threads = native_threads()
    if threads < REQUESTED:
        sys.exit(f"TF_NUM_INTRAOP_THREADS={REQUESTED} set {when} was ignored: the process has "
                 f"{threads} native threads, fewer than the requested intra-op pool alone. "
                 "TF_FORCE_GPU_ALLOW_GROWTH, set at the same moment, is ignored the same way.")
    print(f"TF_NUM_INTRAOP_THREADS={REQUESTED} set {when} took effect: {threads} native threads")


def unsafe() -> None:
    step()
    set_variables()
    step()
    check("after TensorFlow initialized")


def safe() -> None:
    set_variables()
    step()
    check("before TensorFlow was imported")


if __name__ == "__main__":
    if sys.argv[1:] == ["unsafe"]:
        unsafe()
    else:
        safe()
