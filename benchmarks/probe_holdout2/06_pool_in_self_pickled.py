"""A class keeps its Pool in ``self.pool`` and maps a bound method: the Pool gets pickled.

Report: https://github.com/guofei9987/blind_watermark/issues/149 ("multiprocessing mode
has error. NotImplementedError: pool objects cannot be passed between processes or
pickled"; also https://github.com/DEAP/deap/issues/434).

``Embedder`` creates ``self.pool = multiprocessing.Pool()`` in ``__init__`` and calls
``self.pool.map(self.embed_block, blocks)``. A bound method is pickled together with its
instance, and the instance holds the Pool; ``Pool.__reduce__`` raises
``NotImplementedError: pool objects cannot be passed between processes or pickled``. The
task handler thread fails and ``map`` re-raises it in the parent, exit status 1. Fix:
do not keep the pool on the object whose method is mapped (create the pool locally in the
method, or map a module-level function with the needed data), or exclude it in
``__getstate__``.
"""
import multiprocessing as mp

import numpy as np


class Embedder:
    def __init__(self, strength, processes=2):
        self.strength = strength
        self.pool = mp.Pool(processes)

    def embed_block(self, block):
        return block + self.strength * np.sign(block.mean())

    def embed(self, image):
        blocks = [image[i:i + 8] for i in range(0, len(image), 8)]
        return np.concatenate(self.pool.map(self.embed_block, blocks))


if __name__ == "__main__":
    img = np.random.rand(256, 256)
    e = Embedder(0.1)
    out = e.embed(img)
    print(out.shape)
