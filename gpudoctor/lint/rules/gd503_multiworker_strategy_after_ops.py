"""GD503: a multi-worker strategy created after the runtime it configures started."""

from __future__ import annotations

from collections.abc import Iterator

from gpudoctor.knowledge.distributed import STARTUP_STRATEGIES, STARTUP_TOO_LATE
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
    when_text,
)


class MultiWorkerStrategyAfterOps(Rule):
    """## What it does
    Flags `tf.distribute.MultiWorkerMirroredStrategy()` (also its `experimental` name)
    created after the TensorFlow runtime started in this process: after a TensorFlow op,
    tensor, variable or model, or a logical-device query.

    ## Why is this bad?
    The strategy configures TensorFlow's collective ops, which can only be configured
    before the runtime exists. In a multi-worker job (`TF_CONFIG` names a cluster) its
    constructor raises `RuntimeError: Collective ops must be configured at program
    startup` on every worker; run alone, it only logs "Collective ops is not configured
    at program startup" and goes on without some of its optimisations — so the code
    passes a one-machine test and fails on the cluster.

    ## Example
    ```python
    | import tensorflow as tf
    |
    | dataset = tf.data.Dataset.range(8)
    | strategy = tf.distribute.MultiWorkerMirroredStrategy()
    ```

    Use instead:
    ```python
    | import tensorflow as tf
    |
    | strategy = tf.distribute.MultiWorkerMirroredStrategy()  # first, at program start
    | dataset = tf.data.Dataset.range(8)
    ```

    ## References
    - [TensorFlow: multi-worker training with Keras](https://www.tensorflow.org/tutorials/distribute/multi_worker_with_keras)
    - [tf.distribute.MultiWorkerMirroredStrategy](https://www.tensorflow.org/api_docs/python/tf/distribute/MultiWorkerMirroredStrategy)
    """

    code = "GD503"
    name = "multiworker-strategy-after-ops"
    severity = ERROR
    summary = "A multi-worker strategy created after the TensorFlow runtime started"
    fix_title = "Create the strategy at program start, before any TensorFlow op"
    INVALID = (
        """\
        | import tensorflow as tf
        |
        | x = tf.constant([1.0])
        | # ruleid: GD503
        | strategy = tf.distribute.MultiWorkerMirroredStrategy()
        """,
        """\
        | import tensorflow as tf
        |
        | def build():
        |     return tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(1)])
        |
        | def main():
        |     model = build()
        |     # ruleid: GD503
        |     strategy = tf.distribute.experimental.MultiWorkerMirroredStrategy()
        |     return model, strategy
        """,
    )
    VALID = (
        """\
        | import tensorflow as tf
        |
        | strategy = tf.distribute.MultiWorkerMirroredStrategy()
        | with strategy.scope():
        |     model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(1)])
        """,
        """\
        | import tensorflow as tf
        |
        | gpus = tf.config.list_physical_devices("GPU")
        | strategy = tf.distribute.MultiWorkerMirroredStrategy()
        """,
        """\
        | import tensorflow as tf
        |
        | x = tf.constant([1.0])
        | strategy = tf.distribute.MirroredStrategy()
        """,
    )

    def check(self, ctx: CheckContext) -> Iterator[Finding]:
        reported: set[object] = set()
        for _flow, _index, event, state in ctx.points():
            effect = event.effect
            if not isinstance(effect, TfConfig) or effect.api not in STARTUP_STRATEGIES or effect.site in reported:
                continue
            init_event = first_met(state.inits_of(effect.framework, InitLevel.RUNTIME), event)
            if init_event is None:
                continue
            reported.add(effect.site)
            init = init_event.effect
            assert isinstance(init, Init)
            when = conditions_of(init_event.ctx.conditions, event.ctx.conditions)
            name = effect.api.rsplit(".", 1)[-1]
            yield self.finding(
                effect.site,
                f"{name}() is created after the {display(effect.framework)} runtime started ({init.api}, "
                f"{line_of(init.site, effect.site)}{when_text(when, effect.site)}); it {STARTUP_TOO_LATE} "
                f"— create it before {line_of(init.site, effect.site)}",
                (related_site(init.site, f"{display(effect.framework)} runtime started here"), *condition_sites(when)),
            )
