"""GD302: device configuration after the runtime it configures was initialized (TensorFlow, JAX)."""

from __future__ import annotations

from collections.abc import Iterator

from gpudoctor.knowledge.distributed import STARTUP_STRATEGIES
from gpudoctor.knowledge.registry import BY_NAME, CONFIG_FRAMEWORK
from gpudoctor.knowledge.table import InitLevel
from gpudoctor.lint.analysis.events import Init, TfConfig
from gpudoctor.lint.findings import ERROR, Finding
from gpudoctor.lint.rules._base import (
    CheckContext,
    Rule,
    condition_sites,
    conditions_of,
    display,
    first_met,
    line_of,
    related_site,
    what_runs,
    when_text,
)


class TfDeviceConfigAfterInit(Rule):
    """## What it does
    Flags `tf.config.experimental.set_memory_growth`, `set_logical_device_configuration`
    (`set_virtual_device_configuration`), `set_visible_devices` and
    `tf.config.threading.set_intra_op_parallelism_threads` /
    `set_inter_op_parallelism_threads` called after the TensorFlow runtime was
    initialized in this process: after a TensorFlow op, tensor, variable or model, or
    `list_logical_devices()`. Listing *physical* devices first is fine.

    The same holds for JAX configuration that must precede its backend:
    `jax.distributed.initialize()` and `jax.config.update(...)` of `jax_platforms`,
    `jax_num_cpu_devices`, `jax_cuda_visible_devices` (and the CPU topology timeouts)
    after a device query or an array op.

    A call made again by the same line (a pool worker runs its task once per item) is
    reported once, where it first runs: TensorFlow returns at once when the setting
    already has the value asked for.

    ## Why is this bad?
    The runtime fixes its devices and thread pools when it starts. Afterwards these
    calls raise `RuntimeError: Physical devices cannot be modified after being
    initialized` (or the virtual/visible-device and parallelism variants), and when that
    error is caught, TensorFlow keeps the default of allocating almost all GPU memory.

    ## Example
    ```python
    | x = tf.constant([1.0])
    | for gpu in tf.config.list_physical_devices("GPU"):
    |     tf.config.experimental.set_memory_growth(gpu, True)
    ```

    Use instead:
    ```python
    | for gpu in tf.config.list_physical_devices("GPU"):
    |     tf.config.experimental.set_memory_growth(gpu, True)
    | x = tf.constant([1.0])
    ```

    JAX (checked on jax 0.10.2 and in jax 0.11's `xla_bridge.py` and `distributed.py`):
    `distributed.initialize()` and `jax_num_cpu_devices` raise `RuntimeError`;
    `jax_platforms` is silently ignored — the program keeps the platform it started on.

    ## References
    - [TensorFlow: limiting GPU memory growth](https://www.tensorflow.org/guide/gpu#limiting_gpu_memory_growth)
    - [tf.config.experimental.set_memory_growth](https://www.tensorflow.org/api_docs/python/tf/config/experimental/set_memory_growth)
    """

    code = "GD302"
    name = "tf-device-config-after-init"
    severity = ERROR
    summary = "TensorFlow device configuration after the runtime was initialized"
    fix_title = "Configure TensorFlow devices before the first TensorFlow op"
    INVALID = (
        """\
        | import tensorflow as tf
        |
        | model = tf.keras.Sequential([tf.keras.Input((3,)), tf.keras.layers.Dense(1)])
        | for gpu in tf.config.list_physical_devices("GPU"):
        |     # ruleid: GD302
        |     tf.config.experimental.set_memory_growth(gpu, True)
        """,
        """\
        | import tensorflow as tf
        |
        | def configure():
        |     tf.config.list_logical_devices("GPU")
        |     # ruleid: GD302
        |     tf.config.threading.set_intra_op_parallelism_threads(2)
        """,
        """\
        | import tensorflow as tf
        |
        | x = tf.constant([1.0, 2.0])
        | gpus = tf.config.list_physical_devices("GPU")
        | # ruleid: GD302
        | tf.config.set_logical_device_configuration(gpus[0], [tf.config.LogicalDeviceConfiguration(memory_limit=1024)])
        """,
        """\
        | import tensorflow as tf
        |
        | def build():
        |     return tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(1)])
        |
        | model = build()
        | # ruleid: GD302
        | tf.config.set_visible_devices([], "GPU")
        """,
        """\
        | import tensorflow as tf
        |
        | def train():
        |     tf.random.uniform((2, 2))
        |     # ruleid: GD302
        |     tf.config.threading.set_inter_op_parallelism_threads(1)
        """,
        """\
        | import tensorflow as tf
        |
        | strategy = tf.distribute.MirroredStrategy()
        | for gpu in tf.config.list_physical_devices("GPU"):
        |     # ruleid: GD302
        |     tf.config.experimental.set_virtual_device_configuration(gpu, [])
        """,
    )
    VALID = (
        """\
        | import tensorflow as tf
        |
        | for gpu in tf.config.list_physical_devices("GPU"):
        |     tf.config.experimental.set_memory_growth(gpu, True)
        | x = tf.constant(1.0)
        """,
        """\
        | import cupy as cp
        | import tensorflow as tf
        |
        | cp.ones(3)
        | tf.config.set_visible_devices([], "GPU")
        """,
        """\
        | import tensorflow as tf
        |
        | tf.config.threading.set_intra_op_parallelism_threads(2)
        | tf.config.set_visible_devices([], "GPU")
        | model = tf.keras.Sequential([tf.keras.Input((3,)), tf.keras.layers.Dense(1)])
        """,
        """\
        | import tensorflow as tf
        |
        | layer = tf.keras.layers.Dense(4)
        | for gpu in tf.config.list_physical_devices("GPU"):
        |     tf.config.experimental.set_memory_growth(gpu, True)
        """,
        """\
        | import tensorflow as tf
        |
        | @tf.function
        | def step(x):
        |     return x * 2
        |
        | tf.config.set_visible_devices([], "GPU")
        | step(tf.constant(1.0))
        """,
        """\
        | import tensorflow as tf
        |
        | def configure():
        |     for gpu in tf.config.list_physical_devices("GPU"):
        |         tf.config.experimental.set_memory_growth(gpu, True)
        |
        | configure()
        | tf.constant(1.0)
        """,
    )

    def check(self, ctx: CheckContext) -> Iterator[Finding]:
        for flow, index, event, state in ctx.points():
            effect = event.effect
            if not isinstance(effect, TfConfig) or effect.api in STARTUP_STRATEGIES:
                continue  # (a strategy configuring collective ops: GD503)
            framework = effect.framework or CONFIG_FRAMEWORK
            init_event = first_met(state.inits_of(framework, InitLevel.RUNTIME), event)
            if init_event is None:
                continue
            if any(isinstance(e.effect, TfConfig) and e.effect.site == effect.site for e in flow.events[:index]):
                # The same call again (a pool worker's next task): TensorFlow returns at once
                # when the setting already has that value, and the first call is the one
                # reported if it came too late.
                continue
            if init_event is None:
                continue
            init = init_event.effect
            assert isinstance(init, Init)
            # Where to move the call: before the init, or before the call that led to it
            # when the init happened inside a function called from here.
            via = init_event.ctx.via
            name = display(framework)
            related = [related_site(init.site, f"{name} runtime initialized here")]
            # Only when the init ran inside a call or import the configuration did not: in
            # the same function, moving the call above the init is the fix.
            if via is not None and via != event.ctx.via and \
                    (via.path, via.row) != (init.site.path, init.site.row):
                how = what_runs(via)
                reached = f", reached through the {how} at {line_of(via, effect.site)}"
                target = via
                related.append(related_site(via, f"through this {how}"))
            else:
                reached, target = "", init.site
            parts = effect.api.split(".")
            what = parts[-1] if "_" in parts[-1] or len(parts) < 2 else ".".join(parts[-2:])
            when = conditions_of(init_event.ctx.conditions, event.ctx.conditions)
            related.extend(condition_sites(when))
            yield self.finding(
                effect.site,
                f"{what}() runs after the {name} runtime was "
                f"initialized ({init.api}, {line_of(init.site, effect.site)}{reached}"
                f"{when_text(when, effect.site)}); it "
                f"{BY_NAME[framework].config_too_late if framework in BY_NAME else 'raises RuntimeError'} "
                f"— call it before {line_of(target, effect.site)}",
                tuple(related),
            )
