"""Code that calls the user's function for them: command-line runners and test harnesses.

What such a runner calls runs in the process that called the runner, at that point, and
after what that process did before (a module's top level before ``app.run(main)``).

Sources:
- absl: ``absl/app.py`` ``run(main, argv=None, ...)`` parses flags, then calls
  ``main(argv)`` (absl-py 2.x); TensorFlow's ``tf.compat.v1.app.run(main=None, argv=None)``
  calls ``absl.app.run`` with ``main`` (or ``__main__.main``).
- Python Fire: ``fire.Fire(component=None, ...)`` calls a function component with the
  command line's arguments (``fire/core.py``); a class component is instantiated and one
  of its methods chosen on the command line (not followed: which one is not known).
- Typer: ``typer.run(function)`` builds a one-command app and calls it (``typer/main.py``).
- unittest: for each ``test*`` method of a ``TestCase`` subclass the runner calls
  ``setUpClass`` once, then ``setUp``, the test, ``tearDown`` (``unittest/case.py``);
  ``unittest.main()`` (absl's ``absltest.main()``, ``tf.test.main()``) runs those of the
  ``__main__`` module when it is called.
- PyTorch Lightning: the Trainer calls a ``Callback``'s hooks (``on_train_start``,
  ``on_validation_end``, ...) with ``pl_module``, the LightningModule, after it moved that
  module to its accelerator (``lightning/pytorch/trainer/trainer.py`` ``_run`` ->
  ``strategy.model_to_device()`` before the fit loop and its hooks, Lightning 2.x): in a
  GPU run the hook runs in a process that initialized CUDA, with a module on the GPU.
- pytest: a ``test*`` function's parameters are fixtures, resolved by name among the
  functions decorated with ``@pytest.fixture`` (its module's and its ``conftest.py``'s);
  each fixture runs before the test, a generator fixture up to its ``yield``, whose value
  the test receives (https://docs.pytest.org/en/stable/how-to/fixtures.html).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Runner:
    """A call that calls a function it is given: at argument ``index`` (or keyword
    ``keyword``), with ``arguments`` positional arguments whose values are unknown."""

    index: int
    keyword: str
    arguments: int


RUNNERS: dict[str, Runner] = {
    "absl.app.run": Runner(0, "main", 1),
    "tensorflow.compat.v1.app.run": Runner(0, "main", 1),
    "tensorflow.app.run": Runner(0, "main", 1),
    "fire.Fire": Runner(0, "component", 0),
    "typer.run": Runner(0, "function", 0),
}

# Calls that run the test methods of the module's TestCase classes, there and then: a test
# module's ``if __name__ == "__main__": unittest.main()`` (after what its main block did
# before, a set_start_method among others).
TEST_MAINS = frozenset({"unittest.main", "absl.testing.absltest.main", "tensorflow.test.main"})

TEST_CASE_BASES = frozenset({"unittest.TestCase", "unittest.case.TestCase", "unittest.IsolatedAsyncioTestCase",
                             "absl.testing.absltest.TestCase", "absl.testing.parameterized.TestCase",
                             "tensorflow.test.TestCase"})
# Run before each test method of such a class, in this order (class-level first).
SETUP_METHODS = ("setUpClass", "setUp")
TEST_PREFIX = "test"

FIXTURE_DECORATORS = frozenset({"pytest.fixture", "pytest_asyncio.fixture"})


# Framework base classes whose methods the framework calls with a GPU-resident argument,
# after it initialized the GPU in that process: base -> (method prefix, the parameter that
# holds the device object, its framework).
HOOK_BASES: dict[str, tuple[str, str, str]] = {
    base: ("on_", "pl_module", "torch")
    for base in ("lightning.pytorch.Callback", "lightning.pytorch.callbacks.Callback",
                 "lightning.Callback", "pytorch_lightning.Callback", "pytorch_lightning.callbacks.Callback",
                 "pytorch_lightning.callbacks.base.Callback")
}
HOOK_CALLER = "the Trainer moved pl_module to the GPU before calling this hook"
