"""Whether another process can load a function it is sent.

multiprocessing sends a function (a task, a ``Process`` target under spawn, a Dataset's
class) with ``pickle``, which writes only its module and qualified name; the receiving
process imports that module and looks the name up. So a function crosses only if that
lookup finds it there:

- a lambda or a function defined inside another function has no name to look up
  (``Can't pickle local object 'outer.<locals>.inner'``, raised in the sender);
- a function defined in a Jupyter notebook lives in the kernel's ``__main__``, which is not
  a file: a spawned worker's ``__main__`` does not have it (``Can't get attribute 'work' on
  <module '__main__' (built-in)>``, raised in every worker);
- a function defined in the script's ``if __name__ == "__main__":`` block exists only when
  the script runs as the main program: a spawned worker imports the script as
  ``__mp_main__``, without running that block (``Can't get attribute 'work' on <module
  '__mp_main__' ...>``).

A forked child inherits the parent's memory, so only what is pickled even under fork (the
tasks of a pool or executor) needs a name that resolves anywhere; the last two reasons
matter only to spawned and forkserver children.
"""

from __future__ import annotations

from gpudoctor.lint.analysis.values import LOCAL_SCOPE, MAIN_BLOCK_SCOPE, FuncRef
from gpudoctor.lint.notebook import is_notebook

LAMBDA = "lambda"
LOCAL = "local"
NOTEBOOK = "notebook"
MAIN_BLOCK = "main-block"
# The reasons that hold whatever the start method (the sender cannot pickle the function).
UNPICKLABLE = frozenset({LAMBDA, LOCAL})


def unloadable(func: FuncRef) -> str | None:
    """Why a spawned worker cannot load ``func`` by name (one of the reasons above), or
    None when it can. A method counts as its class: pickling the bound object sends the
    class by name."""
    if type(func.node).__name__ == "Lambda":  # (no libcst import: rules load this module)
        return LAMBDA
    if func.scope == LOCAL_SCOPE:
        return LOCAL
    if is_notebook(func.module):
        return NOTEBOOK
    if func.scope == MAIN_BLOCK_SCOPE:
        return MAIN_BLOCK
    return None


def shown_name(func: FuncRef) -> str:
    """What to move: the function, or for a method its class."""
    return func.qualname.split(".")[0]
