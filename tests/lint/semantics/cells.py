# ruff: noqa: E501 - the templates keep one line of Python per line of source
"""The Python-semantics conformance matrix: constructs of the language against hazard families.

A *family* is a kind of hazard with the rule that reports it: a GPU runtime initialized
before a fork whose children use it (GD101), a GPU object sent to a worker (GD201), a GPU
environment variable written after the runtime that reads it started (GD301), threads
running at a fork (GD102). A *construct* is a way Python code reaches what the hazard
needs: a default argument evaluated when its ``def`` runs, a class given as a process
target, a bound method, a base class's ``__init__``... Each cell (construct x family) is
a small project where the construct carries the hazard (its *positive*), and one where
the same construct does not (its *negative*: the code is there but never runs, or runs
somewhere harmless).

Templates use ``$name`` placeholders (string.Template). A placeholder alone on its line is
replaced by a block indented as the placeholder is. Lines that end with ``# <-TAG`` are
where a finding is expected: each family says which tag it reports at (``start``: the
process start; ``send``: the call that sends an object; ``child``: the child's own
statement; ``env``: the parent's environment write). Tags of other families are ignored.

Two sides:
- *parent* constructs run the family's ``action`` (an expression) in the parent before the
  family's ``tail`` (the fork, the send or the write, in the main block);
- *child* constructs decide what the child runs, or what travels with its target: they
  write their own start, with ``$ctx`` (the family's start method), ``$prelude`` (what the
  parent does first), ``$payload`` (what is handed to the child) and ``$child_action``
  (what the child does).

A cell can be ``unsupported`` with the reason: its test then expects it to fail (a strict
xfail), so the day it holds the test says so and the mark must go.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass, field
from string import Template

# -- families --------------------------------------------------------------------------


@dataclass(frozen=True)
class Family:
    key: str
    title: str
    code: str
    imports: str
    action: str  # parent side: an expression that does the hazard's first half
    defs: str  # module-level definitions the tail uses
    tail: str  # parent side: statements in the main block after the construct ran
    tag: str  # where the parent side's finding is expected
    ctx: str  # child side: the context processes are started from
    prelude: str  # child side: what the parent runs before the start
    payload: str  # child side: what the parent hands to the child
    child_action: str  # child side: an expression the child runs
    child_tag: str  # where the child side's finding is expected


INIT = Family(
    key="init", title="runtime init before fork", code="GD101",
    imports="import multiprocessing as mp\nimport torch",
    action='torch.ones(1, device="cuda")',
    defs='def work(i):\n    return torch.ones(2, device="cuda").sum().item()',
    tail='pool = mp.get_context("fork").Pool(2)  # <-start\npool.map(work, [1])',
    tag="start",
    ctx='mp.get_context("fork")',
    prelude="torch.cuda.is_available()",
    payload="1",
    child_action='torch.ones(2, device="cuda")',
    child_tag="start",
)

OBJECT = Family(
    key="object", title="GPU object to a worker", code="GD201",
    imports="import multiprocessing as mp\nimport cupy as cp",
    action="cp.ones(3)",
    defs="def work(x):\n    return x",
    tail='pool = mp.get_context("spawn").Pool(2)\npool.map(work, [$result])  # <-send',
    tag="send",
    ctx='mp.get_context("spawn")',
    prelude="gpu = cp.ones(3)",
    payload="gpu",
    child_action="None",
    child_tag="send",
)

ENV = Family(
    key="env", title="GPU setting too late", code="GD301",
    imports="import multiprocessing as mp\nimport os\nimport torch",
    action='torch.ones(1, device="cuda")',
    defs="",
    tail='os.environ["CUDA_VISIBLE_DEVICES"] = "1"  # <-env',
    tag="env",
    ctx='mp.get_context("fork")',
    prelude="torch.cuda.is_available()",
    payload="1",
    child_action='os.environ.update(CUDA_VISIBLE_DEVICES="1")',
    child_tag="child",
)

THREAD = Family(
    key="thread", title="threads running at fork", code="GD102",
    imports="import multiprocessing as mp\nimport threading\nimport time\nimport torch",
    action="threading.Thread(target=time.sleep, args=(60,)).start()",
    defs="def work(i):\n    return i",
    tail='pool = mp.get_context("fork").Pool(2)  # <-start\npool.map(work, [1])',
    tag="start",
    ctx="", prelude="", payload="", child_action="", child_tag="",
)

FAMILIES = (INIT, OBJECT, ENV, THREAD)
PARENT_FAMILIES = ("init", "object", "env", "thread")
CHILD_FAMILIES = ("init", "object", "env")


# -- constructs ------------------------------------------------------------------------


@dataclass(frozen=True)
class Variant:
    """One side of a cell: the project's files (templates) and, for parent constructs, the
    expression that gives the value the action made (``$result``)."""

    files: dict[str, str]
    result: str = "None"


@dataclass(frozen=True)
class Construct:
    key: str
    title: str
    group: str
    side: str  # "parent" or "child"
    positive: Variant
    negative: Variant
    families: tuple[str, ...] = ()  # () = every family of its side
    unsupported: dict[str, str] = field(default_factory=dict)  # family key -> why
    condition: str = ""  # a condition the positive's message must name


def _main(body: str) -> str:
    return f"{body}"


# A parent construct's main module: imports, the family's definitions, the construct's
# definitions, then the main block with the construct's trigger and the family's tail.
def parent(defs: str, trigger: str = "", *, extra: dict[str, str] | None = None, result: str = "None",
           head: str = "") -> Variant:
    main = (
        "$imports\n" + (head + "\n" if head else "") + "\n$defs\n\n" + defs.strip("\n") + "\n\n"
        'if __name__ == "__main__":\n'
        + (textwrap.indent(trigger.strip("\n"), "    ") + "\n" if trigger.strip() else "")
        + "    $tail\n"
    )
    return Variant({"main.py": main, **(extra or {})}, result)


def child(text: str, *, extra: dict[str, str] | None = None) -> Variant:
    return Variant({"main.py": "$imports\n\n" + text.strip("\n") + "\n", **(extra or {})})


P, C = "parent", "child"

CONSTRUCTS: list[Construct] = [
    # -- baseline ----------------------------------------------------------------------
    Construct(
        "plain", "straight-line code in the main block", "baseline", P,
        parent("", "value = $action", result="value"),
        parent("def never():\n    return $action"),
    ),
    Construct(
        "helper-call", "a function the main block calls", "calls", P,
        parent("def boot():\n    return $action", "value = boot()", result="value"),
        parent("def boot():\n    return $action\n\ndef other():\n    return None", "value = other()", result="value"),
    ),
    # -- values computed when a def or class runs ----------------------------------------
    Construct(
        "default-argument", "a default argument value (evaluated when the def runs)", "definition time", P,
        parent("def helper(dev=$action):\n    return dev", result="helper()"),
        parent("def helper(dev=None):\n    dev = $action\n    return dev"),
    ),
    Construct(
        "keyword-only-default", "a keyword-only parameter's default", "definition time", P,
        parent("def helper(*, dev=$action):\n    return dev", result="helper()"),
        parent("def helper(*, dev=None):\n    return dev if dev is not None else $action"),
    ),
    Construct(
        "lambda-default", "a lambda's default argument", "definition time", P,
        parent("helper = lambda dev=$action: dev", result="helper()"),
        parent("helper = lambda: $action"),
    ),
    Construct(
        "method-default", "a method's default argument (evaluated when the class body runs)", "definition time", P,
        parent("class Detector:\n    def detect(self, x, shape=$action):\n        return shape",
               result="Detector().detect(1)"),
        parent("class Detector:\n    def detect(self, x, shape=None):\n        return $action"),
    ),
    Construct(
        "decorator-argument", "a decorator's argument (evaluated when the def runs)", "definition time", P,
        parent("def tag(value):\n    def wrap(f):\n        return f\n    return wrap\n\n"
               "@tag($action)\ndef helper():\n    return None"),
        parent("def tag(value):\n    def wrap(f):\n        return f\n    return wrap\n\n"
               "@tag(None)\ndef helper():\n    return $action"),
        families=("init", "env", "thread"),
    ),
    Construct(
        "class-body", "a class attribute (the class body runs when the class statement does)", "definition time", P,
        parent("class Config:\n    device_array = $action", result="Config.device_array"),
        parent("class Config:\n    def device_array(self):\n        return $action"),
    ),
    Construct(
        "class-attribute-instance", "a class attribute read through an instance", "definition time", P,
        parent("class Config:\n    device_array = $action\n\nCFG = Config()", result="CFG.device_array"),
        parent("class Config:\n    device_array = None\n\nCFG = Config()", result="CFG.device_array"),
        families=("object",),
    ),
    Construct(
        "imported-default-argument", "a default argument in an imported module", "definition time", P,
        parent("", head="import helpers", result="helpers.filter_boxes(1)",
               extra={"helpers.py": "$imports\n\n\ndef filter_boxes(x, shape=$action):\n    return shape\n"}),
        parent("", head="import helpers",
               extra={"helpers.py": "$imports\n\n\ndef filter_boxes(x, shape=None):\n    return $action\n"}),
    ),
    Construct(
        "imported-class-body", "a class attribute in an imported module", "definition time", P,
        parent("", head="from settings import Config", result="Config.device_array",
               extra={"settings.py": "$imports\n\n\nclass Config:\n    device_array = $action\n"}),
        parent("", head="from settings import Config",
               extra={"settings.py": "$imports\n\n\nclass Config:\n    device_array = None\n"}),
    ),
    Construct(
        "dataclass-default-factory", "a dataclass field's default_factory (run per instance)", "definition time", P,
        parent("import dataclasses\n\n@dataclasses.dataclass\nclass Config:\n"
               "    device_array: object = dataclasses.field(default_factory=lambda: $action)",
               "cfg = Config()", result="cfg.device_array"),
        parent("import dataclasses\n\n@dataclasses.dataclass\nclass Config:\n"
               "    device_array: object = dataclasses.field(default_factory=lambda: $action)",
               "cfg = None"),
    ),
    # -- classes, instances, methods --------------------------------------------------------
    Construct(
        "init-attribute", "set in __init__, read from the instance", "classes", P,
        parent("class Engine:\n    def __init__(self):\n        self.device_array = $action",
               "engine = Engine()", result="engine.device_array"),
        parent("class Engine:\n    def __init__(self):\n        self.device_array = None\n"
               "    def load(self):\n        self.device_array = $action",
               "engine = Engine()", result="None"),
    ),
    Construct(
        "super-init", "set in a base class __init__ reached by super().__init__()", "classes", P,
        parent("class Base:\n    def __init__(self):\n        self.device_array = $action\n\n"
               "class Engine(Base):\n    def __init__(self):\n        super().__init__()\n        self.name = 'e'",
               "engine = Engine()", result="engine.device_array"),
        parent("class Base:\n    def __init__(self):\n        self.device_array = $action\n\n"
               "class Engine(Base):\n    def __init__(self):\n        self.name = 'e'",
               "engine = Engine()", result="None"),
    ),
    Construct(
        "inherited-init", "a base class __init__ the subclass does not override", "classes", P,
        parent("class Base:\n    def __init__(self):\n        self.device_array = $action\n\n"
               "class Engine(Base):\n    def run(self):\n        return 1",
               "engine = Engine()", result="engine.device_array"),
        parent("class Base:\n    def __init__(self):\n        self.device_array = $action\n\n"
               "class Engine(Base):\n    def run(self):\n        return 1",
               "engine = Engine.run"),
    ),
    Construct(
        "base-class-other-module", "set in the __init__ of a base class in another module", "classes", P,
        parent("class Engine(Base):\n    def __init__(self):\n        super().__init__()",
               "engine = Engine()", head="from base import Base", result="engine.device_array",
               extra={"base.py": "$imports\n\n\nclass Base:\n    def __init__(self):\n"
                                 "        self.device_array = $action\n"}),
        parent("class Engine(Base):\n    def __init__(self):\n        self.ready = True",
               "engine = Engine()", head="from base import Base",
               extra={"base.py": "$imports\n\n\nclass Base:\n    def __init__(self):\n"
                                 "        self.device_array = $action\n"}),
    ),
    Construct(
        "method-call", "a method called on an instance", "classes", P,
        parent("class Engine:\n    def boot(self):\n        return $action", "value = Engine().boot()", result="value"),
        parent("class Engine:\n    def boot(self):\n        return $action\n    def other(self):\n        return None",
               "value = Engine().other()", result="value"),
    ),
    Construct(
        "property", "a property read", "classes", P,
        parent("class Engine:\n    @property\n    def device_array(self):\n        return $action",
               "value = Engine().device_array", result="value"),
        parent("class Engine:\n    @property\n    def device_array(self):\n        return $action",
               "engine = Engine()"),
    ),
    Construct(
        "classmethod", "a classmethod constructor", "classes", P,
        parent("class Engine:\n    @classmethod\n    def create(cls):\n        return $action",
               "value = Engine.create()", result="value"),
        parent("class Engine:\n    @classmethod\n    def create(cls):\n        return $action", "value = None"),
    ),
    Construct(
        "staticmethod", "a staticmethod", "classes", P,
        parent("class Engine:\n    @staticmethod\n    def create():\n        return $action",
               "value = Engine.create()", result="value"),
        parent("class Engine:\n    @staticmethod\n    def create():\n        return $action", "value = None"),
    ),
    Construct(
        "attribute-chain", "state held by one object and used through another (self.a.b)", "classes", P,
        parent("class Model:\n    def __init__(self):\n        self.weights = $action\n\n"
               "class Trainer:\n    def __init__(self):\n        self.model = Model()\n"
               "    def weights(self):\n        return self.model.weights",
               "trainer = Trainer()", result="trainer.weights()"),
        parent("class Model:\n    def __init__(self):\n        self.weights = None\n"
               "    def load(self):\n        self.weights = $action\n\n"
               "class Trainer:\n    def __init__(self):\n        self.model = Model()",
               "trainer = Trainer()"),
    ),
    Construct(
        "context-manager", "a class's __enter__ in a with statement", "classes", P,
        parent("class Session:\n    def __enter__(self):\n        self.device_array = $action\n        return self\n"
               "    def __exit__(self, *exc):\n        return False",
               "with Session() as session:\n    pass", result="session.device_array"),
        parent("class Session:\n    def __enter__(self):\n        return self\n"
               "    def __exit__(self, *exc):\n        return False\n"
               "    def load(self):\n        return $action",
               "with Session() as session:\n    pass"),
    ),
    # -- functions ------------------------------------------------------------------------
    Construct(
        "contextmanager-generator", "a @contextlib.contextmanager generator", "functions", P,
        parent("import contextlib\n\n@contextlib.contextmanager\ndef session():\n    value = $action\n    yield value",
               "with session() as value:\n    pass", result="value"),
        parent("import contextlib\n\n@contextlib.contextmanager\ndef session():\n    yield None\n\n"
               "def load():\n    return $action",
               "with session() as value:\n    pass", result="value"),
    ),
    Construct(
        "generator", "a generator consumed by a for loop", "functions", P,
        parent("def batches():\n    yield $action", "for value in batches():\n    pass", result="value"),
        parent("def batches():\n    yield $action", "gen = batches"),
    ),
    Construct(
        "closure", "a closure returned by a factory and called", "functions", P,
        parent("def factory():\n    def make():\n        return $action\n    return make",
               "value = factory()()", result="value"),
        parent("def factory():\n    def make():\n        return $action\n    return make",
               "maker = factory()"),
    ),
    Construct(
        "lambda", "a lambda called", "functions", P,
        parent("make = lambda: $action", "value = make()", result="value"),
        parent("make = lambda: $action", "maker = make"),
    ),
    Construct(
        "decorated-function", "a function wrapped by a project decorator (functools.wraps)", "functions", P,
        parent("import functools\n\ndef logged(f):\n    @functools.wraps(f)\n    def wrapper(*args, **kwargs):\n"
               "        return f(*args, **kwargs)\n    return wrapper\n\n@logged\ndef boot():\n    return $action",
               "value = boot()", result="value"),
        parent("import functools\n\ndef logged(f):\n    @functools.wraps(f)\n    def wrapper(*args, **kwargs):\n"
               "        return f(*args, **kwargs)\n    return wrapper\n\n@logged\ndef boot():\n    return $action",
               "value = logged"),
    ),
    Construct(
        "partial", "a functools.partial called", "functions", P,
        parent("import functools\n\ndef boot(n):\n    return $action", "value = functools.partial(boot, 1)()",
               result="value"),
        parent("import functools\n\ndef boot(n):\n    return $action", "maker = functools.partial(boot, 1)"),
    ),
    Construct(
        "getattr-constant", "a method called through getattr with a constant name", "functions", P,
        parent("class Engine:\n    def boot(self):\n        return $action", 'value = getattr(Engine(), "boot")()',
               result="value"),
        parent("class Engine:\n    def boot(self):\n        return $action", 'value = getattr(Engine(), "boot")'),
    ),
    Construct(
        "star-args", "a call with *args and **kwargs", "functions", P,
        parent("def boot(*args, **kwargs):\n    return $action", "value = boot(*[1], **{'a': 2})", result="value"),
        parent("def boot(*args, **kwargs):\n    return $action", "value = boot", result="None"),
    ),
    Construct(
        "global-statement", "a module global set by a function through `global`", "functions", P,
        parent("STATE = None\n\ndef boot():\n    global STATE\n    STATE = $action", "boot()", result="STATE"),
        parent("STATE = None\n\ndef boot():\n    global STATE\n    STATE = $action", "loader = boot", result="STATE"),
    ),
    Construct(
        "nonlocal-statement", "a value set through `nonlocal` in a nested function", "functions", P,
        parent("def boot():\n    value = None\n    def load():\n        nonlocal value\n        value = $action\n"
               "    load()\n    return value", "value = boot()", result="value"),
        parent("def boot():\n    value = None\n    def load():\n        nonlocal value\n        value = $action\n"
               "    return value", "value = boot()", result="value"),
        unsupported={"object": "what a nested function writes through `nonlocal` does not reach the enclosing "
                               "function's name (what it does, does)"},
    ),
    Construct(
        "getattr-computed-name", "a method called through getattr with a name known only at run time", "functions", P,
        parent("import sys\n\nclass Engine:\n    def boot(self):\n        return $action",
               "value = getattr(Engine(), sys.argv[1])()", result="value"),
        parent("import sys\n\nclass Engine:\n    def boot(self):\n        return $action",
               "value = getattr(Engine(), sys.argv[1], None)"),
        unsupported={key: "a method named by a value known only at run time (a command, a message) is not "
                          "called: which one runs is not known" for key in ("init", "object", "env", "thread")},
    ),
    Construct(
        "attribute-registry", "a value kept in an object's dict by a computed key, read back through a method", "classes", P,
        parent("import sys\n\nclass Registry:\n    def __init__(self):\n        self._items = {}\n"
               "    def add(self, key, value):\n        self._items[key] = value\n"
               "    def get(self, key):\n        return self._items[key]\n\nREG = Registry()",
               "REG.add(sys.argv[1], $action)", result="REG.get(sys.argv[1])"),
        parent("import sys\n\nclass Registry:\n    def __init__(self):\n        self._items = {}\n"
               "    def add(self, key, value):\n        self._items[key] = value\n"
               "    def get(self, key):\n        return self._items[key]\n\nREG = Registry()",
               "REG.add(sys.argv[1], None)", result="REG.get(sys.argv[1])"),
        families=("object",),
        unsupported={"object": "an item stored by a computed key in a container an attribute holds "
                               "(self._items[key] = value) is not read back through it; a name's container is"},
    ),
    # -- modules --------------------------------------------------------------------------
    Construct(
        "two-hops-other-modules", "started two calls away, in other modules", "modules", P,
        parent("", "value = setup.prepare()", head="import setup", result="value",
               extra={"setup.py": "import runtime\n\n\ndef prepare():\n    return runtime.boot()\n",
                      "runtime.py": "$imports\n\n\ndef boot():\n    return $action\n"}),
        parent("", "value = setup.prepare()", head="import setup", result="value",
               extra={"setup.py": "import runtime\n\n\ndef prepare():\n    return None\n",
                      "runtime.py": "$imports\n\n\ndef boot():\n    return $action\n"}),
    ),
    Construct(
        "re-export", "a function re-exported by a package __init__", "modules", P,
        parent("", "value = boot()", head="from pkg import boot", result="value",
               extra={"pkg/__init__.py": "from pkg.core import boot\n",
                      "pkg/core.py": "$imports\n\n\ndef boot():\n    return $action\n"}),
        parent("", "value = None", head="from pkg import boot", result="value",
               extra={"pkg/__init__.py": "from pkg.core import boot\n",
                      "pkg/core.py": "$imports\n\n\ndef boot():\n    return $action\n"}),
    ),
    Construct(
        "conditional-import", "a function imported in try/except ImportError", "modules", P,
        parent("", "value = boot()", head="try:\n    from fast import boot\nexcept ImportError:\n    from slow import boot",
               result="value",
               extra={"fast.py": "$imports\n\n\ndef boot():\n    return $action\n",
                      "slow.py": "def boot():\n    return None\n"}),
        parent("", "value = None", head="try:\n    from fast import boot\nexcept ImportError:\n    from slow import boot",
               result="value",
               extra={"fast.py": "$imports\n\n\ndef boot():\n    return $action\n",
                      "slow.py": "def boot():\n    return None\n"}),
    ),
    Construct(
        "module-global-import", "a module global set when a module is imported", "modules", P,
        parent("", head="import state", result="state.DEVICE_ARRAY",
               extra={"state.py": "$imports\n\nDEVICE_ARRAY = $action\n"}),
        parent("", head="import state",
               extra={"state.py": "$imports\n\n\ndef load():\n    return $action\n"}),
    ),
    # -- conditions -----------------------------------------------------------------------
    Construct(
        "undecidable-condition", "a branch on a value the linter cannot know", "conditions", P,
        parent("import sys", "if len(sys.argv) > 1:\n    value = $action\nelse:\n    value = None",
               result="value"),
        parent("USE_GPU = False", "if USE_GPU:\n    value = $action\nelse:\n    value = None", result="value"),
        condition="len(sys.argv) > 1",
    ),
    Construct(
        "config-attribute-condition", "a branch on a configuration object's attribute", "conditions", P,
        parent("import argparse",
               "args = argparse.ArgumentParser().parse_args()\n"
               "if args.use_gpu:\n    value = $action\nelse:\n    value = None", result="value"),
        parent("import argparse",
               "args = argparse.ArgumentParser().parse_args()\n"
               "if False and args.use_gpu:\n    value = $action\nelse:\n    value = None", result="value"),
        condition="args.use_gpu",
    ),
    # -- entry points that call the user's function ---------------------------------------
    Construct(
        "absl-app-run", "absl's app.run(main)", "entry points", P,
        Variant({"main.py": "$imports\nfrom absl import app\n\n$defs\n\n\ndef main(argv):\n    value = $action\n"
                            "    $tail\n\n\nif __name__ == \"__main__\":\n    app.run(main)\n"}, "value"),
        Variant({"main.py": "$imports\nfrom absl import app\n\n$defs\n\n\ndef main(argv):\n    value = None\n"
                            "    $tail\n\n\ndef unused():\n    return $action\n\n\n"
                            "if __name__ == \"__main__\":\n    app.run(main)\n"}, "value"),
    ),
    Construct(
        "click-command", "a click command", "entry points", P,
        Variant({"main.py": "$imports\nimport click\n\n$defs\n\n\n@click.command()\n@click.option('--n', default=1)\n"
                            "def main(n):\n    value = $action\n    $tail\n\n\nif __name__ == \"__main__\":\n    main()\n"},
                "value"),
        Variant({"main.py": "$imports\nimport click\n\n$defs\n\n\n@click.command()\n@click.option('--n', default=1)\n"
                            "def main(n):\n    value = None\n    $tail\n\n\ndef unused():\n    return $action\n\n\n"
                            "if __name__ == \"__main__\":\n    main()\n"}, "value"),
    ),
    Construct(
        "fire", "fire.Fire(main)", "entry points", P,
        Variant({"main.py": "$imports\nimport fire\n\n$defs\n\n\ndef main(n=1):\n    value = $action\n    $tail\n\n\n"
                            "if __name__ == \"__main__\":\n    fire.Fire(main)\n"}, "value"),
        Variant({"main.py": "$imports\nimport fire\n\n$defs\n\n\ndef main(n=1):\n    value = None\n    $tail\n\n\n"
                            "def unused():\n    return $action\n\n\nif __name__ == \"__main__\":\n    fire.Fire(main)\n"},
                "value"),
    ),
    Construct(
        "hydra-main", "a @hydra.main function", "entry points", P,
        Variant({"main.py": "$imports\nimport hydra\n\n$defs\n\n\n@hydra.main(config_path=None, version_base=None)\n"
                            "def main(cfg):\n    value = $action\n    $tail\n\n\nif __name__ == \"__main__\":\n    main()\n"},
                "value"),
        Variant({"main.py": "$imports\nimport hydra\n\n$defs\n\n\n@hydra.main(config_path=None, version_base=None)\n"
                            "def main(cfg):\n    value = None\n    $tail\n\n\ndef unused():\n    return $action\n\n\n"
                            "if __name__ == \"__main__\":\n    main()\n"}, "value"),
    ),
    Construct(
        "unittest-method", "a unittest.TestCase test method", "entry points", P,
        Variant({"test_gpu.py": "$imports\nimport unittest\n\n$defs\n\n\nclass TestGpu(unittest.TestCase):\n"
                                "    def setUp(self):\n        self.value = $action\n\n"
                                "    def test_pool(self):\n        value = self.value\n        $tail\n"}, "value"),
        Variant({"test_gpu.py": "$imports\nimport unittest\n\n$defs\n\n\nclass TestGpu(unittest.TestCase):\n"
                                "    def helper(self):\n        return $action\n\n"
                                "    def test_pool(self):\n        value = None\n        $tail\n"}, "value"),
    ),
    Construct(
        "pytest-function", "a pytest test function using a fixture", "entry points", P,
        Variant({"test_gpu.py": "$imports\nimport pytest\n\n$defs\n\n\n@pytest.fixture\ndef value():\n"
                                "    return $action\n\n\ndef test_pool(value):\n    $tail\n"}, "value"),
        Variant({"test_gpu.py": "$imports\nimport pytest\n\n$defs\n\n\n@pytest.fixture\ndef value():\n"
                                "    return None\n\n\ndef helper():\n    return $action\n\n\n"
                                "def test_pool(value):\n    $tail\n"}, "value"),
    ),
    # -- what the child runs, and what travels with it ---------------------------------------
    Construct(
        "function-target", "a module-level function as Process target", "targets", C,
        child("def work(x):\n    return $child_action  # <-child\n\n\n"
              "if __name__ == \"__main__\":\n    $prelude\n"
              "    p = $ctx.Process(target=work, args=($payload,))  # <-send\n    p.start()  # <-start\n"),
        child("def work(x):\n    return None\n\n\ndef other(x):\n    return $child_action\n\n\n"
              "if __name__ == \"__main__\":\n    $prelude\n"
              "    p = $ctx.Process(target=work, args=(1,))\n    p.start()\n"),
    ),
    Construct(
        "class-target", "a class as Process target (its __init__ runs in the child)", "targets", C,
        child("class Runner:\n    def __init__(self, x):\n        self.out = $child_action  # <-child\n\n\n"
              "if __name__ == \"__main__\":\n    $prelude\n"
              "    p = $ctx.Process(target=Runner, args=($payload,))  # <-send\n    p.start()  # <-start\n"),
        child("class Runner:\n    def __init__(self, x):\n        self.out = None\n"
              "    def later(self):\n        return $child_action\n\n\n"
              "if __name__ == \"__main__\":\n    $prelude\n"
              "    p = $ctx.Process(target=Runner, args=(1,))\n    p.start()\n"),
    ),
    Construct(
        "bound-method-target", "a bound method of an attribute as Process target (self.worker.run)", "targets", C,
        child("class Worker:\n    def __init__(self, payload):\n        self.payload = payload\n"
              "    def run(self):\n        return $child_action  # <-child\n\n\n"
              "class App:\n    def __init__(self, payload):\n        self.worker = Worker(payload)\n"
              "    def go(self):\n        p = $ctx.Process(target=self.worker.run)  # <-send\n        p.start()  # <-start\n\n\n"
              "if __name__ == \"__main__\":\n    $prelude\n    App($payload).go()\n"),
        child("class Worker:\n    def __init__(self, payload):\n        self.payload = payload\n"
              "    def run(self):\n        return None\n    def later(self):\n        return $child_action\n\n\n"
              "class App:\n    def __init__(self):\n        self.worker = Worker(1)\n"
              "    def go(self):\n        p = $ctx.Process(target=self.worker.run)\n        p.start()\n\n\n"
              "if __name__ == \"__main__\":\n    $prelude\n    App().go()\n"),
    ),
    Construct(
        "pool-map-bound-method", "Pool.map over a bound method", "targets", C,
        child("class Scorer:\n    def __init__(self, payload):\n        self.payload = payload\n"
              "    def score(self, i):\n        return $child_action  # <-child\n\n\n"
              "if __name__ == \"__main__\":\n    $prelude\n    scorer = Scorer($payload)\n"
              "    pool = $ctx.Pool(2)  # <-start\n    pool.map(scorer.score, [1, 2])  # <-send\n"),
        child("class Scorer:\n    def __init__(self, payload):\n        self.payload = payload\n"
              "    def score(self, i):\n        return i\n    def later(self):\n        return $child_action\n\n\n"
              "if __name__ == \"__main__\":\n    $prelude\n    scorer = Scorer(1)\n"
              "    pool = $ctx.Pool(2)\n    pool.map(scorer.score, [1, 2])\n"),
    ),
    Construct(
        "process-subclass", "a Process subclass whose run() reaches the GPU through calls", "targets", C,
        child("def deep(x):\n    return $child_action  # <-child\n\n\ndef middle(x):\n    return deep(x)\n\n\n"
              "class Actor(mp.Process):\n    def __init__(self, payload):\n        super().__init__()\n"
              "        self.payload = payload\n    def run(self):\n        middle(self.payload)\n\n\n"
              "if __name__ == \"__main__\":\n    mp.set_start_method($method)\n    $prelude\n"
              "    actor = Actor($payload)  # <-send\n    actor.start()  # <-start <-send\n"),
        child("def deep(x):\n    return $child_action\n\n\ndef middle(x):\n    return x\n\n\n"
              "class Actor(mp.Process):\n    def __init__(self, payload):\n        super().__init__()\n"
              "        self.payload = payload\n    def run(self):\n        middle(self.payload)\n\n\n"
              "if __name__ == \"__main__\":\n    mp.set_start_method($method)\n    $prelude\n"
              "    actor = Actor(1)\n    actor.start()\n"),
    ),
    Construct(
        "partial-target", "functools.partial as Pool task", "targets", C,
        child("import functools\n\n\ndef work(payload, i):\n    return $child_action  # <-child\n\n\n"
              "if __name__ == \"__main__\":\n    $prelude\n    pool = $ctx.Pool(2)  # <-start\n"
              "    pool.map(functools.partial(work, $payload), [1, 2])  # <-send\n"),
        child("import functools\n\n\ndef work(payload, i):\n    return i\n\n\ndef later():\n    return $child_action\n\n\n"
              "if __name__ == \"__main__\":\n    $prelude\n    pool = $ctx.Pool(2)\n"
              "    pool.map(functools.partial(work, 1), [1, 2])\n"),
    ),
    Construct(
        "initializer", "a Pool initializer", "targets", C,
        child("def setup(payload):\n    global STATE\n    STATE = $child_action  # <-child\n\n\ndef work(i):\n    return i\n\n\n"
              "if __name__ == \"__main__\":\n    $prelude\n"
              "    pool = $ctx.Pool(2, initializer=setup, initargs=($payload,))  # <-start <-send\n"
              "    pool.map(work, [1, 2])\n"),
        child("def setup(payload):\n    global STATE\n    STATE = payload\n\n\ndef later():\n    return $child_action\n\n\n"
              "def work(i):\n    return i\n\n\n"
              "if __name__ == \"__main__\":\n    $prelude\n"
              "    pool = $ctx.Pool(2, initializer=setup, initargs=(1,))\n    pool.map(work, [1, 2])\n"),
    ),
    Construct(
        "executor-submit-method", "ProcessPoolExecutor.submit of a bound method", "targets", C,
        child("import concurrent.futures as cf\n\n\nclass Scorer:\n    def __init__(self, payload):\n"
              "        self.payload = payload\n    def score(self, i):\n        return $child_action  # <-child\n\n\n"
              "if __name__ == \"__main__\":\n    $prelude\n    scorer = Scorer($payload)\n"
              "    with cf.ProcessPoolExecutor(2, mp_context=$ctx) as ex:  # <-start\n"
              "        ex.submit(scorer.score, 1)  # <-send\n"),
        child("import concurrent.futures as cf\n\n\nclass Scorer:\n    def __init__(self, payload):\n"
              "        self.payload = payload\n    def score(self, i):\n        return i\n"
              "    def later(self):\n        return $child_action\n\n\n"
              "if __name__ == \"__main__\":\n    $prelude\n    scorer = Scorer(1)\n"
              "    with cf.ProcessPoolExecutor(2, mp_context=$ctx) as ex:\n"
              "        ex.submit(scorer.score, 1)\n"),
    ),
    Construct(
        "staticmethod-target", "a staticmethod as Process target", "targets", C,
        child("class Jobs:\n    @staticmethod\n    def run(x):\n        return $child_action  # <-child\n\n\n"
              "if __name__ == \"__main__\":\n    $prelude\n"
              "    p = $ctx.Process(target=Jobs.run, args=($payload,))  # <-send\n    p.start()  # <-start\n"),
        child("class Jobs:\n    @staticmethod\n    def run(x):\n        return x\n"
              "    @staticmethod\n    def later():\n        return $child_action\n\n\n"
              "if __name__ == \"__main__\":\n    $prelude\n"
              "    p = $ctx.Process(target=Jobs.run, args=(1,))\n    p.start()\n"),
    ),
    Construct(
        "decorated-target", "a decorated function as Pool task", "targets", C,
        child("import functools\n\n\ndef logged(f):\n    @functools.wraps(f)\n    def wrapper(*args):\n"
              "        return f(*args)\n    return wrapper\n\n\n@logged\ndef work(payload):\n"
              "    return $child_action  # <-child\n\n\n"
              "if __name__ == \"__main__\":\n    $prelude\n    pool = $ctx.Pool(2)  # <-start\n"
              "    pool.map(work, [$payload])  # <-send\n"),
        child("import functools\n\n\ndef logged(f):\n    @functools.wraps(f)\n    def wrapper(*args):\n"
              "        return f(*args)\n    return wrapper\n\n\n@logged\ndef work(payload):\n    return payload\n\n\n"
              "def later():\n    return $child_action\n\n\n"
              "if __name__ == \"__main__\":\n    $prelude\n    pool = $ctx.Pool(2)\n    pool.map(work, [1])\n"),
    ),
    Construct(
        "cloudpickled-class-target", "a class sent to the child as cloudpickle bytes and built there", "targets", C,
        child("import cloudpickle\n\n\nclass Runner:\n    def __init__(self):\n"
              "        self.out = $child_action  # <-child\n\n\ndef run(blob):\n    cloudpickle.loads(blob)()\n\n\n"
              "if __name__ == \"__main__\":\n    $prelude\n"
              "    p = $ctx.Process(target=run, args=(cloudpickle.dumps(Runner),))  # <-send\n    p.start()  # <-start\n"),
        child("import cloudpickle\n\n\nclass Runner:\n    def __init__(self):\n        self.out = None\n"
              "    def later(self):\n        return $child_action\n\n\ndef run(blob):\n    cloudpickle.loads(blob)()\n\n\n"
              "if __name__ == \"__main__\":\n    $prelude\n"
              "    p = $ctx.Process(target=run, args=(cloudpickle.dumps(Runner),))\n    p.start()\n"),
        families=("init",),
        unsupported={"init": "what a process builds from serialized bytes (cloudpickle.loads, pickle.loads) is not "
                             "known: the bytes are not followed back to the object they were made from"},
    ),
    Construct(
        "global-object-called", "a framework object held in a module global, called in the worker", "targets", C,
        child("MODEL = None\n\n\ndef work(x):\n    return MODEL(x)  # <-child\n\n\n"
              "if __name__ == \"__main__\":\n    MODEL = torch.nn.Linear(2, 2).cuda()\n"
              "    p = $ctx.Process(target=work, args=(1,))\n    p.start()  # <-start\n"),
        child("MODEL = None\n\n\ndef work(x):\n    return x\n\n\n"
              "if __name__ == \"__main__\":\n    MODEL = torch.nn.Linear(2, 2).cuda()\n"
              "    p = $ctx.Process(target=work, args=(1,))\n    p.start()\n"),
        families=("init",),
    ),
    Construct(
        "mp-spawn-function", "torch.multiprocessing.spawn of a function (spawned: no fork)", "targets", C,
        child("import torch.multiprocessing as tmp\n\n\ndef work(rank, payload):\n    return $child_action\n\n\n"
              "if __name__ == \"__main__\":\n    $prelude\n    tmp.spawn(work, args=($payload,), nprocs=2)  # <-send\n"),
        child("import torch.multiprocessing as tmp\n\n\ndef work(rank, payload):\n    return rank\n\n\n"
              "if __name__ == \"__main__\":\n    $prelude\n    tmp.spawn(work, args=(1,), nprocs=2)\n"),
        families=("object",),
    ),
]

# Which constructs, for the parent side, run the family's tail in a test method or
# function (the tail's indentation follows the placeholder).


# -- rendering -------------------------------------------------------------------------


_PLACEHOLDER_LINE = re.compile(r"^([ \t]*)\$(\w+)[ \t]*$", re.M)


def fill(template: str, values: dict[str, str]) -> str:
    """Substitute ``$name``: a placeholder alone on its line becomes a block indented as it is."""

    def block(match: re.Match[str]) -> str:
        indent, name = match.group(1), match.group(2)
        if name not in values:
            return match.group(0)
        return textwrap.indent(values[name], indent, lambda line: True) if values[name] else indent + "pass"

    once = _PLACEHOLDER_LINE.sub(block, template)
    return Template(once).safe_substitute(values)


def render(construct: Construct, family: Family, positive: bool) -> dict[str, str]:
    """The files of one cell's positive or negative project, placeholders filled."""
    variant = construct.positive if positive else construct.negative
    values = {
        "imports": family.imports,
        "defs": family.defs,
        "action": family.action,
        "ctx": family.ctx,
        "prelude": family.prelude,
        "payload": family.payload,
        "child_action": family.child_action,
        "method": repr(family.ctx.split('"')[1]) if '"' in family.ctx else "'fork'",
    }
    values["tail"] = fill(family.tail, {**values, "result": variant.result})
    values["result"] = variant.result
    files = {}
    for name, text in variant.files.items():
        # Filled twice: a block placeholder may bring in another ($result in the tail).
        files[name] = fill(fill(text, values), values)
    return files


def expected_lines(files: dict[str, str], tag: str) -> set[tuple[str, int]]:
    """The (file, line) pairs marked ``# <-tag`` (a line may carry several tags)."""
    out: set[tuple[str, int]] = set()
    for name, text in files.items():
        for row, line in enumerate(text.splitlines(), 1):
            marks = line.split("# <-", 1)[1].split() if "# <-" in line else []
            if tag in [m.lstrip("<-") for m in marks]:
                out.add((name, row))
    return out


@dataclass(frozen=True)
class Cell:
    construct: Construct
    family: Family

    @property
    def id(self) -> str:
        return f"{self.construct.key}-{self.family.key}"

    @property
    def tag(self) -> str:
        return self.family.tag if self.construct.side == P else self.family.child_tag

    @property
    def unsupported(self) -> str:
        return self.construct.unsupported.get(self.family.key, "")


def cells() -> list[Cell]:
    out = []
    by_key = {f.key: f for f in FAMILIES}
    for construct in CONSTRUCTS:
        keys = construct.families or (PARENT_FAMILIES if construct.side == P else CHILD_FAMILIES)
        out.extend(Cell(construct, by_key[key]) for key in keys)
    return out
