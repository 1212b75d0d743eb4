"""GD303: a TensorFlow device-configuration error is caught and ignored."""

from __future__ import annotations

from collections.abc import Iterator

from gpudoctor.lint.analysis.events import TfConfig
from gpudoctor.lint.findings import WARNING, Finding
from gpudoctor.lint.rules._base import CheckContext, Rule


class SwallowedDeviceConfigError(Rule):
    """## What it does
    Flags TensorFlow device configuration (`set_memory_growth`,
    `set_logical_device_configuration`, `set_visible_devices`, the parallelism setters)
    inside a `try` whose `except RuntimeError` (or `except Exception`, or a bare
    `except`) handler only prints, logs or passes.

    ## Why is this bad?
    These calls raise `RuntimeError` exactly when they come too late. Catching and
    printing the error lets the program continue with TensorFlow's defaults — every
    process grabbing nearly all GPU memory — which is the failure the configuration was
    meant to prevent. The TensorFlow guide's example does this; copying it hides the bug.

    ## Example
    ```python
    | try:
    |     tf.config.experimental.set_memory_growth(gpu, True)
    | except RuntimeError as e:
    |     print(e)
    ```

    Use instead:
    ```python
    | tf.config.experimental.set_memory_growth(gpu, True)  # fails loudly if too late
    ```

    ## References
    - [TensorFlow: limiting GPU memory growth](https://www.tensorflow.org/guide/gpu#limiting_gpu_memory_growth)
    """

    code = "GD303"
    name = "swallowed-device-config-error"
    severity = WARNING
    summary = "TensorFlow device-configuration error caught and ignored"
    fix_title = "Let the RuntimeError propagate, or re-raise it"
    shown_at_callers = False  # the try and its handler say it all, whoever runs them
    INVALID = (
        """\
        | import tensorflow as tf
        |
        | gpus = tf.config.list_physical_devices("GPU")
        | try:
        |     # ruleid: GD303
        |     tf.config.experimental.set_memory_growth(gpus[0], True)
        | except RuntimeError as e:
        |     print(e)
        """,
        """\
        | import logging
        | import tensorflow as tf
        |
        | def setup():
        |     try:
        |         # ruleid: GD303
        |         tf.config.set_visible_devices([], "GPU")
        |     except Exception:
        |         logging.warning("could not hide GPUs")
        """,
        """\
        | import tensorflow as tf
        |
        | for gpu in tf.config.list_physical_devices("GPU"):
        |     try:
        |         # ruleid: GD303
        |         tf.config.experimental.set_memory_growth(gpu, True)
        |     except:
        |         pass
        """,
        """\
        | import tensorflow as tf
        |
        | gpus = tf.config.list_physical_devices("GPU")
        | try:
        |     # ruleid: GD303
        |     tf.config.set_logical_device_configuration(
        |         gpus[0], [tf.config.LogicalDeviceConfiguration(memory_limit=512)])
        | except (ValueError, RuntimeError) as e:
        |     print("could not limit memory:", e)
        """,
        """\
        | import logging
        | import tensorflow as tf
        |
        | log = logging.getLogger(__name__)
        |
        | def setup(threads):
        |     try:
        |         # ruleid: GD303
        |         tf.config.threading.set_intra_op_parallelism_threads(threads)
        |     except RuntimeError as err:
        |         log.warning("too late: %s", err)
        """,
        """\
        | import warnings
        | import tensorflow as tf
        |
        | try:
        |     # ruleid: GD303
        |     tf.config.set_visible_devices([], "GPU")
        | except BaseException:
        |     warnings.warn("GPUs stay visible")
        """,
    )
    VALID = (
        """\
        | import tensorflow as tf
        |
        | gpus = tf.config.list_physical_devices("GPU")
        | try:
        |     tf.config.experimental.set_memory_growth(gpus[0], True)
        | except RuntimeError:
        |     raise SystemExit("configure TensorFlow before using it")
        """,
        """\
        | import tensorflow as tf
        |
        | try:
        |     tf.config.experimental.set_memory_growth(tf.config.list_physical_devices("GPU")[0], True)
        | except IndexError:
        |     pass
        """,
        """\
        | import tensorflow as tf
        |
        | gpus = tf.config.list_physical_devices("GPU")
        | try:
        |     tf.config.experimental.set_memory_growth(gpus[0], True)
        | except RuntimeError as e:
        |     raise RuntimeError("configure TensorFlow before its first op") from e
        """,
        """\
        | import tensorflow as tf
        |
        | gpus = tf.config.list_physical_devices("GPU")
        | for gpu in gpus:
        |     tf.config.experimental.set_memory_growth(gpu, True)
        """,
        """\
        | import sys
        | import tensorflow as tf
        |
        | try:
        |     tf.config.set_visible_devices([], "GPU")
        | except RuntimeError as e:
        |     print(e)
        |     sys.exit(1)
        """,
        """\
        | import tensorflow as tf
        |
        | try:
        |     tf.constant(1.0)
        | except RuntimeError as e:
        |     print(e)
        """,
    )

    def check(self, ctx: CheckContext) -> Iterator[Finding]:
        for _flow, _, event, _state in ctx.points():
            effect = event.effect
            call = effect.api.rsplit(".", 1)[-1] if isinstance(effect, TfConfig) else ""
            if isinstance(effect, TfConfig) and effect.swallowed and call in _KEPT:
                yield self.finding(
                    effect.site,
                    f"{call}() is wrapped in a try whose handler only reports the RuntimeError; "
                    f"when it comes too late the program silently keeps {_KEPT.get(call, _DEVICES)}",
                )


# What the program goes on with when each setting is refused.
_DEVICES = "TensorFlow's default devices and its allocate-all memory"
_KEPT = {
    "set_memory_growth": "TensorFlow's allocate-all default",
    "set_logical_device_configuration": "TensorFlow's allocate-all default",
    "set_virtual_device_configuration": "TensorFlow's allocate-all default",
    "set_visible_devices": "every GPU visible (each process initializes all of them)",
    "set_intra_op_parallelism_threads": "TensorFlow's default thread pool sizes (one thread per core)",
    "set_inter_op_parallelism_threads": "TensorFlow's default thread pool sizes (one thread per core)",
}
