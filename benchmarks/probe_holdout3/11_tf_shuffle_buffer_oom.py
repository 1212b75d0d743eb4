"""tf.data ``shuffle(buffer_size=len(dataset))`` on decoded images fills RAM.

Report: https://github.com/tensorflow/tensorflow/issues/32376 ("Shuffle function on tf.data
fills up RAM memory": a perfect shuffle buffer holds the whole decoded dataset; maintainer:
"Use a smaller buffer size"); see also https://github.com/tensorflow/tensorflow/issues/42586.

An image-classification input pipeline decodes and normalises images in parallel
(``map(..., num_parallel_calls=AUTOTUNE)``) and then asks for a perfect shuffle with
``shuffle(buffer_size=N_IMAGES)``. Before the first batch can be produced the shuffle buffer
must be filled with all 20,000 decoded float32 images (128x128x3, ~196 KB each, ~3.9 GB),
so resident memory climbs steadily while tf.data's threads fill the buffer. On a machine
without that much RAM the process is OOM-killed (or, as in the report, the system thrashes);
here the program caps its own address space at 3 GiB (``RLIMIT_AS``) so that an
allocation fails once the buffer holds ~1.2 GB (a ``MemoryError`` in the generator's
``PyFunc``, or an OOM while allocating a tensor, both surfaced by ``model.fit`` as
``ResourceExhaustedError``), and the probe's ``--memory-limit 1200MB`` stands for the
machine's RAM.
Fix: shuffle file names / indices before decoding and keep the element shuffle buffer small
(e.g. 1,000), or cache encoded bytes rather than decoded float tensors.
"""
import resource

import numpy as np
import tensorflow as tf

resource.setrlimit(resource.RLIMIT_AS, (3 * 2**30, 3 * 2**30))

N_IMAGES = 20_000


def read_images():
    rng = np.random.default_rng(0)
    for i in range(N_IMAGES):
        yield rng.integers(0, 255, (128, 128, 3), dtype=np.uint8), i % 10


def decode(image, label):
    return tf.image.convert_image_dtype(image, tf.float32), label


ds = tf.data.Dataset.from_generator(
    read_images,
    output_signature=(tf.TensorSpec((128, 128, 3), tf.uint8), tf.TensorSpec((), tf.int64)),
)
ds = ds.map(decode, num_parallel_calls=tf.data.AUTOTUNE)
ds = ds.shuffle(buffer_size=N_IMAGES)          # perfect shuffle: the whole dataset in RAM
ds = ds.batch(64).prefetch(tf.data.AUTOTUNE)

model = tf.keras.Sequential([
    tf.keras.Input((128, 128, 3)),
    tf.keras.layers.Conv2D(8, 3, strides=4, activation="relu"),
    tf.keras.layers.GlobalAveragePooling2D(),
    tf.keras.layers.Dense(10),
])
model.compile("adam", tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
model.fit(ds, epochs=1, verbose=2)
