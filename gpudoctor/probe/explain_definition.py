"""Find where the function a spawned worker could not get is defined, and why the worker
does not have it.

A spawn (or forkserver) worker unpickles the function it runs by name: it imports the
main script as ``__mp_main__`` and looks the name up there, and CPython's error names
both ("Can't get attribute 'score' on <module '__mp_main__' from '/x/prog.py'>"). A name
defined under ``if __name__ == "__main__":`` (code pasted from a notebook cell ends up
there) or inside a function is not there at import. The file is read with ``ast``,
never imported.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

_GET_ATTRIBUTE = re.compile(r"Can't get attribute '([^']+)' on <module '([^']+)' from '([^']+)'>")
_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _find(body: list[ast.stmt], name: str, enclosing: tuple[ast.stmt, ...]
          ) -> tuple[ast.stmt, tuple[ast.stmt, ...]] | None:
    for node in body:
        if isinstance(node, _DEFINITIONS) and node.name == name:
            return node, enclosing
        for field in ("body", "orelse", "finalbody", "handlers"):
            inner = getattr(node, field, None)
            if isinstance(inner, list):
                found = _find([n for n in inner if isinstance(n, ast.stmt)] +
                              [s for h in inner if isinstance(h, ast.ExceptHandler) for s in h.body],
                              name, (*enclosing, node))
                if found is not None:
                    return found
    return None


def _main_guard(node: ast.stmt) -> bool:
    return isinstance(node, ast.If) and "__name__" in ast.unparse(node.test)


def definition(line: str) -> str | None:
    """Say where the name of a "Can't get attribute" error is defined and why a worker
    that imports the module does not have it; None when the line or the file does not say."""
    match = _GET_ATTRIBUTE.search(line)
    if match is None:
        return None
    name, module, path = match.groups()
    try:
        tree = ast.parse(Path(path).read_text(errors="replace"))
    except (OSError, SyntaxError, ValueError):
        return None
    found = _find(tree.body, name, ())
    if found is None:
        return None
    node, enclosing = found
    where = f"`{name}` is defined at {path}:{node.lineno}"
    guard = next((n for n in enclosing if _main_guard(n)), None)
    if guard is not None:
        return (f"{where}, inside `if __name__ == \"__main__\":` (line {guard.lineno}): a worker imports the script "
                f"as `{module}`, where that block does not run, so it has no `{name}`.")
    if enclosing:
        outer = enclosing[-1]
        kind = f"function `{outer.name}`" if isinstance(outer, _DEFINITIONS) else "a block"
        return (f"{where}, inside {kind} (line {outer.lineno}), not at the top level of the module: a worker that "
                f"imports it as `{module}` does not have it.")
    return None


_LOCAL_OBJECT = re.compile(r"Can't (?:pickle|get) local object '([^']+)'")


def local_definition(message: str, script: Path | None) -> str | None:
    """Say where the local object of a "Can't pickle local object 'train.<locals>.<lambda>'"
    error is defined in ``script``: the function it is local to, then the lambda (the
    lines of each, when there are several) or the nested function or class of that name.
    None when the message or the file does not say."""
    match = _LOCAL_OBJECT.search(message)
    if match is None or script is None:
        return None
    try:
        tree = ast.parse(script.read_text(errors="replace"))
    except (OSError, SyntaxError, ValueError):
        return None
    parts = match[1].split(".<locals>.")
    scope: list[ast.stmt] = tree.body
    outer: ast.stmt | None = None
    for part in parts[:-1]:
        name = part.rsplit(".", 1)[-1]  # (a method: ``Trainer.fit``)
        found = next((n for n in ast.walk(ast.Module(body=scope, type_ignores=[]))
                      if isinstance(n, _DEFINITIONS) and n.name == name), None)
        if found is None:
            return None
        outer, scope = found, found.body
    if outer is None:
        return None
    last = parts[-1]
    inside = f"inside `{parts[-2].rsplit('.', 1)[-1]}` (line {outer.lineno})"
    nodes = ast.walk(ast.Module(body=scope, type_ignores=[]))
    if last == "<lambda>":
        lines = sorted({n.lineno for n in nodes if isinstance(n, ast.Lambda)})
        if not lines:
            return None
        where = ", ".join(f"{script}:{line}" for line in lines[:3])
        return (f"The lambda is defined at {where}, {inside}: a lambda has no name a worker could import it by; "
                "define the function at the top level of the module.")
    node = next((n for n in nodes if isinstance(n, _DEFINITIONS) and n.name == last), None)
    if node is None:
        return None
    return (f"`{last}` is defined at {script}:{node.lineno}, {inside}, not at the top level of the module: "
            "a worker cannot import it by its name.")
