"""TensorFlow: what initializes CUDA, what builds the runtime, what is configuration.

TensorFlow creates its eager context, device objects, allocator and intra-op thread
pools on the first op. After that, device configuration raises RuntimeError and the
allocator environment variables are no longer read; a fork child that runs ops hangs
in the intra-op pool (its threads do not survive fork), even on a CPU-only build.
"""

from __future__ import annotations

from gpudoctor.lint.knowledge.framework import Framework
from gpudoctor.lint.knowledge.table import (
    DRIVER_INIT,
    GPU_OBJECT,
    INERT,
    RUNTIME_INIT,
    TF_CONFIG,
    Api,
)

FW = "tensorflow"
GUIDE = "https://www.tensorflow.org/guide/gpu"
CONFIG = "https://www.tensorflow.org/api_docs/python/tf/config"


def _api(pattern: str, effect: str, source: str) -> Api:
    return Api(pattern, effect, FW, source)


TABLE = (
    # Broad rule: a call into tensorflow runs an op or builds tensors, so it creates the
    # runtime and returns device-resident values. The exceptions follow.
    _api("tensorflow.*", GPU_OBJECT, "tensorflow/python/eager/context.py: ensure_initialized() on first op"),
    # Physical device queries call cuInit (driver) without building the runtime: the
    # guide lists physical devices *before* configuring memory growth.
    _api("tensorflow.config.list_physical_devices", DRIVER_INIT, GUIDE),
    _api("tensorflow.config.experimental.list_physical_devices", DRIVER_INIT, GUIDE),
    _api("tensorflow.config.get_visible_devices", DRIVER_INIT, CONFIG),
    _api("tensorflow.config.experimental.get_visible_devices", DRIVER_INIT, CONFIG),
    _api("tensorflow.python.client.device_lib.list_local_devices", DRIVER_INIT,
         "tensorflow/python/client/device_lib.py"),
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
    # TensorFlow's implementation modules: user code reaches the runtime through the public
    # API; walking TensorFlow's own source must not turn its internals into "inits".
    _api("tensorflow.python.*", INERT, "implementation modules, not the public API"),
    _api("tensorflow.core.*", INERT, "implementation modules, not the public API"),
    _api("tensorflow.compiler.*", INERT, "implementation modules, not the public API"),
    _api("tensorflow.tsl.*", INERT, "implementation modules, not the public API"),
    _api("tensorflow.lite.*", INERT, "TensorFlow Lite runs without the TensorFlow runtime"),
    # Inert: decorators, context managers, type objects, settings that do not build the runtime.
    _api("tensorflow.config.*", INERT, CONFIG),
    _api("tensorflow.device", INERT, "tf.device only records a placement scope"),
    _api("tensorflow.function", INERT, "tf.function traces lazily, on first call"),
    _api("tensorflow.TensorSpec", INERT, "type object"),
    _api("tensorflow.DType", INERT, "type object"),
    _api("tensorflow.get_logger", INERT, "logging only"),
    _api("tensorflow.autograph.*", INERT, "tracing helpers"),
    _api("tensorflow.random.set_seed", INERT, "sets the global seed without creating the context"),
    _api("tensorflow.compat.v1.disable_eager_execution", INERT, "mode switch, before any op"),
    _api("tensorflow.compat.v1.enable_eager_execution", INERT, "mode switch, before any op"),
    _api("tensorflow.debugging.set_log_device_placement", INERT, CONFIG),
    _api("tensorflow.test.is_built_with_cuda", INERT, "build flag only"),
    _api("tensorflow.sysconfig.*", INERT, "build information only"),
    _api("tensorflow.version.*", INERT, "version strings"),
    _api("tensorflow.io.gfile.*", INERT, "file system helpers, no device"),
    _api("tensorflow.keras.Input", INERT, "a symbolic tensor; checked: thread settings still apply after it "
         "(TF 2.21, Keras 3), while a Sequential model with layers initializes the runtime"),
    _api("tensorflow.keras.layers.*", INERT, "layers create weights when built, not when constructed"),
    _api("tensorflow.keras.losses.*", INERT, "loss objects are plain Python until called"),
    _api("tensorflow.keras.callbacks.*", INERT, "callbacks are plain Python"),
    _api("tensorflow.keras.utils.*", INERT, "host-side utilities"),
    _api("tensorflow.keras.mixed_precision.set_global_policy", INERT, "policy setting"),
    _api("keras.Input", INERT, "a symbolic tensor (see tensorflow.keras.Input)"),
    _api("keras.layers.*", INERT, "layers create weights when built, not when constructed"),
    _api("keras.losses.*", INERT, "loss objects are plain Python until called"),
    _api("keras.callbacks.*", INERT, "callbacks are plain Python"),
    _api("keras.utils.*", INERT, "host-side utilities"),
    # Standalone Keras on its default TensorFlow backend builds models in TensorFlow.
    _api("keras.Sequential", GPU_OBJECT, "https://keras.io/api/models/sequential/"),
    _api("keras.Model", GPU_OBJECT, "https://keras.io/api/models/model/"),
    _api("keras.models.*", GPU_OBJECT, "https://keras.io/api/models/"),
    _api("keras.applications.*", GPU_OBJECT, "https://keras.io/api/applications/"),
)

FRAMEWORK = Framework(
    name=FW,
    display="TensorFlow",
    modules=("tensorflow", "keras"),
    table=TABLE,
    consequence="hang, or abort with CUDA_ERROR_NOT_INITIALIZED",
    host_copy="t.numpy()",
    environment=("TF_FORCE_GPU_ALLOW_GROWTH", "TF_GPU_ALLOCATOR"),  # GUIDE
    host_methods=frozenset({"numpy"}),
    # Keras model methods run on the device but hand back NumPy arrays, a History, floats.
    host_result_methods=frozenset({"predict", "predict_on_batch", "fit", "evaluate", "summary", "save",
                                   "save_weights", "load_weights", "get_weights", "count_params", "to_json",
                                   "compile"}),
    reserves="reserves nearly all free GPU memory",  # GUIDE, "Limiting GPU memory growth"
    memory_caps={"TF_FORCE_GPU_ALLOW_GROWTH": frozenset({"true", "1"}),
                 "TF_GPU_ALLOCATOR": frozenset({"cuda_malloc_async"})},
    capping_config=frozenset({"set_memory_growth", "set_logical_device_configuration",
                              "set_virtual_device_configuration", "set_visible_devices"}),
)
