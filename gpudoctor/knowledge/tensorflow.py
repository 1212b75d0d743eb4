"""TensorFlow and Keras: what initializes CUDA, what builds the runtime, what is configuration.

TensorFlow creates its eager context, device objects, allocator and intra-op thread
pools on the first op. After that, device configuration raises RuntimeError and the
allocator environment variables are no longer read; a fork child that runs ops hangs
in the intra-op pool (its threads do not survive fork), even on a CPU-only build.

The table lists what runs ops or builds the runtime; anything else under ``tf`` is not
known to initialize (configuration objects, graph-mode helpers of ``tf.compat.v1``,
shapes, dtypes, protos). ``tf.keras`` is Keras (an alias, below). Standalone Keras 3
picks its backend from ``KERAS_BACKEND`` when ``keras`` is imported: its calls then
initialize JAX or PyTorch instead of TensorFlow.
"""

from __future__ import annotations

from gpudoctor.knowledge.framework import Framework, Runtime
from gpudoctor.knowledge.table import (
    DRIVER_INIT,
    GPU_OBJECT,
    INERT,
    RUNTIME_INIT,
    RUNTIME_OBJECT,
    TF_CONFIG,
    Api,
)

FW = "tensorflow"
GUIDE = "https://www.tensorflow.org/guide/gpu"
CONFIG = "https://www.tensorflow.org/api_docs/python/tf/config"


def _api(pattern: str, effect: str, source: str) -> Api:
    return Api(pattern, effect, FW, source)


# Top-level functions of the tf namespace that run an op (tf.__all__ of TensorFlow 2.21,
# the callables defined under tensorflow.python.ops, less decorators, initializers,
# specs and graph-only helpers). In eager mode each creates the context on first use.
TOP_LEVEL_OPS = (
    "Assert", "Variable", "abs", "acos", "acosh", "add", "add_n", "approx_top_k", "argmax", "argmin", "argsort",
    "as_string", "asin", "asinh", "assert_equal", "assert_greater", "assert_less", "assert_rank", "atan",
    "atan2", "atanh", "batch_to_space", "bitcast", "boolean_mask", "broadcast_dynamic_shape", "broadcast_to",
    "case", "cast", "clip_by_global_norm", "clip_by_norm", "clip_by_value", "complex", "concat", "cond",
    "constant", "convert_to_tensor", "conv", "cos", "cosh", "cumsum", "divide", "dynamic_partition",
    "dynamic_stitch", "edit_distance", "eig", "eigvals", "einsum", "ensure_shape", "equal", "exp",
    "expand_dims", "eye", "fill", "fingerprint", "floor", "foldl", "foldr", "gather", "gather_nd", "greater",
    "greater_equal", "histogram_fixed_width", "histogram_fixed_width_bins", "identity", "identity_n", "less",
    "less_equal", "linspace", "logical_and", "logical_not", "logical_or", "map_fn", "matmul", "maximum",
    "meshgrid", "minimum", "multiply", "negative", "no_op", "norm", "not_equal", "numpy_function", "one_hot",
    "ones", "ones_like", "pad", "parallel_stack", "pow", "print", "py_function", "random_index_shuffle", "range",
    "rank", "realdiv", "reduce_all", "reduce_any", "reduce_logsumexp", "reduce_max", "reduce_mean",
    "reduce_min", "reduce_prod", "reduce_sum", "repeat", "reshape", "reverse", "reverse_sequence", "roll",
    "round", "saturate_cast", "scalar_mul", "scan", "scatter_nd", "searchsorted", "sequence_mask", "shape",
    "shape_n", "sigmoid", "sign", "sin", "sinh", "size", "slice", "sort", "space_to_batch",
    "space_to_batch_nd", "split", "sqrt", "square", "squeeze", "stack", "stop_gradient", "strided_slice",
    "subtract", "switch_case", "tan", "tanh", "tensor_scatter_nd_add", "tensor_scatter_nd_max",
    "tensor_scatter_nd_min", "tensor_scatter_nd_sub", "tensor_scatter_nd_update", "tensordot", "tile",
    "timestamp", "transpose", "truediv", "truncatediv", "truncatemod", "unique", "unique_with_counts",
    "unravel_index", "unstack", "vectorized_map", "where", "while_loop", "zeros", "zeros_like",
    "SparseTensor", "IndexedSlices",
)
# Namespaces whose functions run ops (checked on TF-CPU 2.21: tf.data.Dataset.range and
# tf.summary.create_file_writer create the context; so does any math or nn op).
OP_NAMESPACES = ("math", "nn", "linalg", "random", "image", "signal", "strings", "sparse", "ragged",
                 "bitwise", "audio", "sets", "data", "summary", "lookup", "queue", "experimental.numpy")
RAN = "run on TensorFlow-CPU 2.21 with Keras 3.15: the eager context was created"
KERAS_RAN = "run on Keras 3.15.1 with the TensorFlow backend: the TensorFlow runtime was created"

TABLE = (
    # No broad rule: a tf.* name not listed here is not known to initialize anything
    # (``tf.compat.v1.reset_default_graph()``, ``tf.TensorShape``, ``tf.nest``, protos).
    *(_api(f"tensorflow.{name}", GPU_OBJECT, RAN + " (an op)") for name in TOP_LEVEL_OPS),
    *(_api(f"tensorflow.{name}.*", GPU_OBJECT, RAN + " (ops)") for name in OP_NAMESPACES),
    _api("tensorflow.random.set_seed", INERT, "sets the global seed without creating the context"),
    # A summary writer is a host resource (an events file): making one starts the runtime,
    # but the writer lives on no device.
    _api("tensorflow.summary.create_file_writer", RUNTIME_OBJECT, RAN + "; the writer is a host resource"),
    _api("tensorflow.summary.create_noop_writer", RUNTIME_OBJECT, RAN + "; the writer is a host resource"),
    # tf.experimental.numpy's type queries forward to NumPy and create no context
    # (tensorflow/python/ops/numpy_ops/np_utils.py finfo -> np.finfo; checked at run time on
    # TensorFlow 2.21: no eager context after each of these).
    *(_api(f"tensorflow.experimental.numpy.{name}", INERT, "forwards to NumPy; no context (TF 2.21)")
      for name in ("finfo", "iinfo", "issubdtype", "result_type", "promote_types")),
    _api("tensorflow.data.Options", INERT, "an options object"),
    _api("tensorflow.io.*", GPU_OBJECT, "file reading and decoding ops (tf.io.read_file, decode_*)"),
    _api("tensorflow.io.gfile.*", INERT, "file system helpers, no device"),
    _api("tensorflow.io.TFRecordOptions", INERT, "an options object"),
    # Feature specifications for parse_example: plain descriptions (tensorflow/python/ops/
    # parsing_config.py, namedtuples), no op runs when one is made.
    *(_api(f"tensorflow.io.{spec}", INERT, "a parsing specification (a namedtuple)")
      for spec in ("FixedLenFeature", "FixedLenSequenceFeature", "VarLenFeature", "RaggedFeature",
                   "SparseFeature")),
    _api("tensorflow.saved_model.load", GPU_OBJECT, "restores variables on the default device"),
    _api("tensorflow.saved_model.save", RUNTIME_INIT, "traces and writes the model's variables"),
    _api("tensorflow.distribute.MirroredStrategy", RUNTIME_INIT, RAN),
    _api("tensorflow.distribute.MultiWorkerMirroredStrategy", RUNTIME_INIT, "lists the local devices"),
    _api("tensorflow.distribute.OneDeviceStrategy", RUNTIME_INIT, "places on a device"),
    _api("tensorflow.distribute.experimental.*", RUNTIME_INIT, "strategies list their devices"),
    # TF1-style sessions create the devices (and reserve the memory) when built.
    _api("tensorflow.compat.v1.Session", RUNTIME_INIT, "a session creates its devices"),
    _api("tensorflow.compat.v1.InteractiveSession", RUNTIME_INIT, "a session creates its devices"),
    # TensorFlow 1.x spelled them at the top level (``tf.Session``); code written for it
    # still runs on tf.compat.v1 installs through ``import tensorflow.compat.v1 as tf``.
    _api("tensorflow.Session", RUNTIME_INIT, "TensorFlow 1.x tf.Session: a session creates its devices"),
    _api("tensorflow.InteractiveSession", RUNTIME_INIT, "TensorFlow 1.x tf.InteractiveSession"),
    # TF1-era Estimators: the object is plain Python; training, predicting and evaluating
    # build the graph and run it in a session (tensorflow_estimator, removed in TF 2.16).
    _api("tensorflow.estimator.Estimator", INERT, "the estimator object holds its model function"),
    _api("tensorflow.estimator.Estimator.train", RUNTIME_INIT, "runs the graph in a session"),
    _api("tensorflow.estimator.Estimator.predict", RUNTIME_INIT, "runs the graph in a session"),
    _api("tensorflow.estimator.Estimator.evaluate", RUNTIME_INIT, "runs the graph in a session"),
    # Physical device queries call cuInit (driver) without building the runtime: the
    # guide lists physical devices *before* configuring memory growth.
    _api("tensorflow.config.list_physical_devices", DRIVER_INIT, GUIDE),
    _api("tensorflow.config.experimental.list_physical_devices", DRIVER_INIT, GUIDE),
    _api("tensorflow.config.get_visible_devices", DRIVER_INIT, CONFIG),
    _api("tensorflow.config.experimental.get_visible_devices", DRIVER_INIT, CONFIG),
    _api("tensorflow.python.client.device_lib.list_local_devices", DRIVER_INIT,
         "tensorflow/python/client/device_lib.py"),
    # They enumerate the physical devices too (TF 2.21 python/eager/context.py).
    *(_api(f"tensorflow.config.{name}", DRIVER_INIT, "TF 2.21 python/eager/context.py: enumerates physical devices")
      for name in ("experimental.get_memory_growth", "get_memory_growth", "experimental.get_device_details",
                   "get_device_details", "get_logical_device_configuration",
                   "experimental.get_virtual_device_configuration")),
    # Memory statistics need the runtime: ensure_initialized() first (run: the context is
    # built even when the call then raises for a missing device).
    *(_api(f"tensorflow.config.experimental.{name}", RUNTIME_INIT, "TF 2.21 python/eager/context.py; " + RAN)
      for name in ("get_memory_info", "reset_memory_stats", "get_memory_usage")),
    # Logical devices exist only once the runtime is up.
    _api("tensorflow.config.list_logical_devices", RUNTIME_INIT, GUIDE),
    _api("tensorflow.config.experimental.list_logical_devices", RUNTIME_INIT, GUIDE),
    _api("tensorflow.test.is_gpu_available", RUNTIME_INIT, "tensorflow/python/framework/test_util.py"),
    _api("tensorflow.test.gpu_device_name", RUNTIME_INIT, "tensorflow/python/framework/test_util.py"),
    # Configuration: must run before the runtime exists (tf.config docs, "RuntimeError").
    _api("tensorflow.config.set_visible_devices", TF_CONFIG, CONFIG),
    _api("tensorflow.config.experimental.set_visible_devices", TF_CONFIG, CONFIG),
    _api("tensorflow.config.experimental.set_memory_growth", TF_CONFIG, GUIDE),
    _api("tensorflow.config.set_logical_device_configuration", TF_CONFIG, GUIDE),
    _api("tensorflow.config.experimental.set_virtual_device_configuration", TF_CONFIG, GUIDE),
    _api("tensorflow.config.threading.set_intra_op_parallelism_threads", TF_CONFIG, CONFIG),
    _api("tensorflow.config.threading.set_inter_op_parallelism_threads", TF_CONFIG, CONFIG),
    # Keras: models, optimizers, metrics, variables, ops and random numbers create the
    # runtime of the backend (TensorFlow unless KERAS_BACKEND says otherwise, below);
    # layers, losses, callbacks and inputs are plain Python until a model is built.
    _api("keras.Sequential", GPU_OBJECT, "https://keras.io/api/models/sequential/"),
    _api("keras.Model", GPU_OBJECT, "https://keras.io/api/models/model/"),
    _api("keras.models.*", GPU_OBJECT, "https://keras.io/api/models/"),
    _api("keras.applications.*", GPU_OBJECT, "https://keras.io/api/applications/"),
    _api("keras.optimizers.*", RUNTIME_INIT, KERAS_RAN),
    _api("keras.metrics.*", RUNTIME_INIT, KERAS_RAN),
    _api("keras.Variable", GPU_OBJECT, KERAS_RAN),
    _api("keras.ops.*", GPU_OBJECT, KERAS_RAN),
    _api("keras.random.*", GPU_OBJECT, KERAS_RAN),
    _api("keras.Input", INERT, "a symbolic tensor; checked: thread settings still apply after it "
         "(TF 2.21, Keras 3), while a Sequential model with layers initializes the runtime"),
    _api("keras.layers.*", INERT, "layers create weights when built, not when constructed"),
    _api("keras.losses.*", INERT, "loss objects are plain Python until called"),
    _api("keras.callbacks.*", INERT, "callbacks are plain Python"),
    _api("keras.utils.*", INERT, "host-side utilities"),
    _api("keras.mixed_precision.set_global_policy", INERT, "policy setting"),
)

FRAMEWORK = Framework(
    name=FW,
    display="TensorFlow",
    modules=("tensorflow", "keras"),
    runtimes=(Runtime("tensorflow", "TensorFlow", "TensorFlow", cuda=False,
                      libraries=("libtensorflow_framework", "_pywrap_tensorflow_internal"),
                      evidence="its eager context exists",
                      seen=("tensorflow.python.eager.context", ("_context", "_context_handle"), "set")),),
    cuda_in_child="TensorFlow aborts or hangs",
    cpu_pool="TensorFlow's intra-op thread pool",
    table=TABLE,
    consequence="hang, or abort with CUDA_ERROR_NOT_INITIALIZED",
    # Its intra-op thread pool makes a fork child hang on a CPU-only build too.
    initialized="initialized its runtime",
    host_copy="t.numpy()",
    environment=("TF_FORCE_GPU_ALLOW_GROWTH", "TF_GPU_ALLOCATOR"),  # GUIDE
    # keras/src/backend/config.py reads KERAS_BACKEND when keras is imported.
    import_environment={"KERAS_BACKEND": "keras"},
    aliases=(("tensorflow.keras.", "keras."),
             ("tensorflow.python.estimator.estimator.", "tensorflow.estimator.")),
    backend_switch={"keras": ("KERAS_BACKEND", {"tensorflow": "tensorflow", "jax": "jax", "torch": "torch"})},
    host_methods=frozenset({"numpy"}),
    # Keras model methods run on the device but hand back NumPy arrays, a History, floats.
    host_result_methods=frozenset({"predict", "predict_on_batch", "fit", "evaluate", "summary", "save",
                                   "save_weights", "load_weights", "get_weights", "count_params", "to_json",
                                   "compile"}),
    reserves="reserves nearly all free GPU memory",  # GUIDE, "Limiting GPU memory growth"
    # gpu_bfc_allocator.cc GetAllowGrowthValue compares with "true" and "false" exactly and
    # ignores (with a log line) anything else.
    memory_caps={"TF_FORCE_GPU_ALLOW_GROWTH": frozenset({"true"}),
                 "TF_GPU_ALLOCATOR": frozenset({"cuda_malloc_async"})},
    capping_config=frozenset({"set_memory_growth", "set_logical_device_configuration",
                              "set_virtual_device_configuration", "set_visible_devices"}),
    # keras/src/layers/layer.py (3.15) Layer.__call__ runs self.call (a Model is a Layer);
    # tf.keras of TF 2.x (tf_keras/src/engine/base_layer.py) the same.
    call_methods={"keras.layers.Layer": "call", "keras.Layer": "call", "keras.Model": "call",
                  "keras.models.Model": "call", "keras.src.layers.layer.Layer": "call"},
)
