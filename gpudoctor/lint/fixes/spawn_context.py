"""Make a process start use the spawn start method (GD101, GD103).

The fix is unsafe, as in ruff's sense: spawn re-imports the main module in every worker
and pickles the task functions and arguments. It is refused where it would break the
program for sure: a start that runs while the module is being imported (spawn would
then start processes recursively, GD104) and a function a spawned worker cannot load (a
lambda, a nested function, one defined in a notebook cell or in the ``__main__`` block:
GD108).
"""

from __future__ import annotations

import libcst as cst

from gpudoctor.lint.analysis.events import Event, Start
from gpudoctor.lint.analysis.flows import Flow
from gpudoctor.lint.analysis.module_state import ModuleState
from gpudoctor.lint.analysis.pickling import unloadable
from gpudoctor.lint.analysis.values import ModRef
from gpudoctor.lint.findings import Edit, Fix
from gpudoctor.lint.frontend.parsed import LazySite, ParsedModule
from gpudoctor.lint.knowledge import processes as P

# multiprocessing and its drop-in replacements (``torch.multiprocessing``, ``multiprocess``).
MP_MODULES = frozenset({"multiprocessing", *(prefix.rstrip(".") for prefix, _ in P.ALIASES)})
TITLE = 'Use the spawn start method: multiprocessing.get_context("spawn")'


def _loadable(flow: Flow | None) -> bool:
    """Can spawned workers load every function the child runs (see analysis.pickling)?"""
    return flow is None or all(unloadable(spec.func) is None for spec in flow.specs)


def _is_mp_module(expr: cst.BaseExpression, state: ModuleState) -> bool:
    dotted = cst.helpers.get_full_name_for_node(expr)
    if not dotted:
        return False
    head, _, rest = dotted.partition(".")
    for atom in state.env.get(head, frozenset()):
        if isinstance(atom, ModRef) and (atom.qualname + ("." + rest if rest else "")) in MP_MODULES:
            return True
    return False


def _spawn_ctx(module_expr: cst.BaseExpression) -> cst.Call:
    return cst.Call(
        func=cst.Attribute(value=module_expr, attr=cst.Name("get_context")),
        args=[cst.Arg(cst.SimpleString('"spawn"'))],
    )


def _import_edit(parsed: ParsedModule, state: ModuleState) -> tuple[Edit, ...]:
    if any(isinstance(a, ModRef) and a.qualname == "multiprocessing" for a in state.env.get("multiprocessing", ())):
        return ()
    body = parsed.module.body
    anchor = 1
    for statement in body:
        first = statement.body[0] if isinstance(statement, cst.SimpleStatementLine) and statement.body else None
        if isinstance(first, cst.ImportFrom) and isinstance(first.module, cst.Name) \
                and first.module.value == "__future__":
            anchor = parsed.resolve(statement).end_row + 1
            continue
        if isinstance(first, cst.Expr) and isinstance(first.value, cst.SimpleString) and statement is body[0]:
            anchor = parsed.resolve(statement).end_row + 1
            continue
        anchor = parsed.resolve(statement).row
        break
    return (Edit("import multiprocessing\n", (anchor, 0), (anchor, 0)),)


def _rewrite(call: cst.Call, start: Start, state: ModuleState,
             parsed: ParsedModule) -> tuple[cst.Call, tuple[Edit, ...]] | None:
    func = call.func
    if start.kind == P.EXECUTOR:
        if any(arg.keyword is not None and arg.keyword.value == "mp_context" for arg in call.args):
            return None
        mp_name = cst.Name("multiprocessing")
        tight = cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""),
                                whitespace_after=cst.SimpleWhitespace(""))
        extra = cst.Arg(_spawn_ctx(mp_name), keyword=cst.Name("mp_context"), equal=tight)
        return call.with_changes(args=[*call.args, extra]), _import_edit(parsed, state)
    if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Call):
        inner = func.value  # get_context("fork").Pool(...)
        if isinstance(inner.func, cst.Attribute) and inner.func.attr.value == "get_context" \
                and inner.args and isinstance(inner.args[0].value, cst.SimpleString):
            new_inner = inner.with_changes(args=[inner.args[0].with_changes(value=cst.SimpleString('"spawn"'))])
            return call.with_changes(func=func.with_changes(value=new_inner)), ()
        return None
    if isinstance(func, cst.Attribute) and _is_mp_module(func.value, state):
        return call.with_changes(func=func.with_changes(value=_spawn_ctx(func.value))), ()
    if isinstance(func, cst.Name):
        new_func = cst.Attribute(value=_spawn_ctx(cst.Name("multiprocessing")), attr=func)
        return call.with_changes(func=new_func), _import_edit(parsed, state)
    return None


def spawn_fix(event: Event, child: Flow | None, state_of: dict[str, ModuleState],
              import_time_sites: set[object], made: dict[int, Fix | None] | None = None) -> Fix | None:
    """Return the fix that makes this start use spawn, or None where it must not be offered.

    ``made``: the fixes already made for starts of the same analysis, by start (a start
    reached by many paths is checked once per path; its rewrite is the same)."""
    start = event.effect
    assert isinstance(start, Start)
    if made is not None:
        if not _loadable(child):
            return None
        if id(start) not in made:
            made[id(start)] = spawn_fix(event, None, state_of, import_time_sites)
        return made[id(start)]
    target = start.site if start.kind in (P.POOL, P.EXECUTOR) else start.started
    if not isinstance(target, LazySite) or start.site in import_time_sites:
        return None
    state = state_of.get(target.path)
    node = target.node  # the fix rewrites exactly the node that was analysed
    if state is None or not isinstance(node, cst.Call) or not _loadable(child):
        return None
    rewritten = _rewrite(node, start, state, state.parsed)  # the import goes at the top of the module
    if rewritten is None:
        return None
    new_call, imports = rewritten
    site = target.concrete()
    code = target.tree.module.code_for_node(new_call)
    main = Edit(code, (site.row, site.col), (site.end_row, site.end_col))
    return Fix(TITLE, "unsafe", (*imports, main))
