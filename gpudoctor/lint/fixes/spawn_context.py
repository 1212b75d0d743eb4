"""Make a process start use the spawn start method (GD101, GD103).

The fix is unsafe, as in ruff's sense: spawn re-imports the main module in every worker
and pickles the task functions and arguments. It is refused where it would break the
program for sure: a start that runs while the module is being imported (spawn would
then start processes recursively, GD104) and a function a spawned worker cannot load (a
lambda, a nested function, one defined in a notebook cell or in the ``__main__`` block:
GD108).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import libcst as cst
from libcst.metadata import Assignment, CodeRange, MetadataWrapper, ParentNodeProvider, PositionProvider, ScopeProvider

from gpudoctor.knowledge import processes as P
from gpudoctor.lint.analysis.events import Event, Start
from gpudoctor.lint.analysis.flows import Flow
from gpudoctor.lint.analysis.module_state import ModuleState
from gpudoctor.lint.analysis.pickling import LAMBDA, LOCAL, MAIN_BLOCK, NOTEBOOK, shown_name, unloadable
from gpudoctor.lint.analysis.values import ModRef
from gpudoctor.lint.findings import Edit, Fix, NoFix, Site
from gpudoctor.lint.frontend.parsed import LazySite, ParsedModule, StoredSite
from gpudoctor.lint.notebook import is_notebook

# multiprocessing and its drop-in replacements (``torch.multiprocessing``, ``multiprocess``).
MP_MODULES = frozenset({"multiprocessing", *(prefix.rstrip(".") for prefix, _ in P.ALIASES)})
TITLE = 'Use the spawn start method: multiprocessing.get_context("spawn")'


def unloadable_child(flow: Flow | None) -> str | None:
    """Why spawned workers cannot load a function the child runs (see analysis.pickling),
    or None when they can load every one."""
    for spec in () if flow is None else flow.specs:
        why = unloadable(spec.func)
        if why is not None:
            if why == LAMBDA:
                return "its child runs a lambda, which spawned workers cannot load (GD108)"
            where = {LOCAL: "inside a function", NOTEBOOK: "in a notebook cell",
                     MAIN_BLOCK: 'in the `if __name__ == "__main__":` block'}.get(why, "where workers cannot find it")
            return (f"its child runs `{shown_name(spec.func)}`, defined {where}, which spawned workers cannot "
                    "load (GD108)")
    return None


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


IMPORT_TIME = ('the start runs while the module is imported: under spawn every child would run it again '
               '(GD104); move it under `if __name__ == "__main__":` first')
# What a context creates that works the same under spawn (its objects are made for the
# context's start method, so they must all switch with it).
CONTEXT_OBJECTS = frozenset({
    "Queue", "SimpleQueue", "JoinableQueue", "Pipe", "Lock", "RLock", "Semaphore", "BoundedSemaphore",
    "Condition", "Event", "Barrier", "Value", "Array", "RawValue", "RawArray", "Manager", "cpu_count",
})
CONTEXT_STARTS = frozenset({"Pool", "Process"})
# Whether a start at (row, column) of the file can switch to spawn: None, or why not.
StartCheck = Callable[[int, int], "str | None"]


def _short(code: str) -> str:
    code = " ".join(code.split())
    return code if len(code) <= 60 else code[:57] + "..."


def _rewrite(call: cst.Call, start: Start, state: ModuleState, tree: ParsedModule, site: Site,
             check: StartCheck | None) -> tuple[Edit, ...] | str:
    """The edits that make ``call`` (the start's node, in ``tree``, at ``site``) use spawn,
    or why there are none. An import goes at the top of the module."""
    func = call.func
    parsed = state.parsed

    def replaced(new_call: cst.Call, *imports: Edit) -> tuple[Edit, ...] | str:
        code = _indented(tree.module.code_for_node(call), tree.module.code_for_node(new_call), parsed.text, site)
        if code is not None:
            return (*imports, Edit(code, (site.row, site.col), (site.end_row, site.end_col)))
        old_func = tree.module.code_for_node(call.func)
        if new_call.args is call.args and not call.lpar and "\n" not in old_func:
            # Only what is called changes: that alone is rewritten, the arguments are left as written.
            return (*imports, Edit(tree.module.code_for_node(new_call.func), (site.row, site.col),
                                   (site.row, site.col + len(old_func))))
        return "the call's lines are not laid out in a way the fix can keep"

    if start.kind == P.EXECUTOR:
        given = next((arg for arg in call.args if arg.keyword is not None and arg.keyword.value == "mp_context"), None)
        if given is not None:
            if isinstance(given.value, cst.Name):
                return _through_variable(given.value.value, site, state, check)
            return f"it already passes `mp_context={_short(tree.module.code_for_node(given.value))}`"
        mp_name = cst.Name("multiprocessing")
        tight = cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""),
                                whitespace_after=cst.SimpleWhitespace(""))
        extra = cst.Arg(_spawn_ctx(mp_name), keyword=cst.Name("mp_context"), equal=tight)
        args = [*call.args, extra]
        last = call.args[-1] if call.args else None
        if last is not None and isinstance(last.comma, cst.Comma) and \
                "\n" in tree.module.code_for_node(last.comma):
            # One argument a line, with a trailing comma: the new one on a line of its own,
            # laid out as the last one.
            before = call.args[-2].comma if len(call.args) > 1 else None
            space = before.whitespace_after if isinstance(before, cst.Comma) else call.whitespace_before_args
            args = [*call.args[:-1], last.with_changes(comma=cst.Comma(whitespace_after=space)),
                    extra.with_changes(comma=last.comma)]
        return replaced(call.with_changes(args=args), *_import_edit(parsed, state))
    if start.kind == P.OS_FORK:
        return "os.fork() has no start method to switch: start the child with a spawn context instead"
    if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Call):
        inner = func.value  # get_context("fork").Pool(...)
        if isinstance(inner.func, cst.Attribute) and inner.func.attr.value == "get_context" \
                and inner.args and isinstance(inner.args[0].value, cst.SimpleString):
            new_inner = inner.with_changes(args=[inner.args[0].with_changes(value=cst.SimpleString('"spawn"'))])
            return replaced(call.with_changes(func=func.with_changes(value=new_inner)))
        return f"its context comes from `{_short(tree.module.code_for_node(inner))}`, which the fix does not rewrite"
    if isinstance(func, cst.Attribute) and _is_mp_module(func.value, state):
        return replaced(call.with_changes(func=func.with_changes(value=_spawn_ctx(func.value))))
    if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name):
        return _through_variable(func.value.value, site, state, check)
    if isinstance(func, cst.Name):
        new_func = cst.Attribute(value=_spawn_ctx(cst.Name("multiprocessing")), attr=func)
        return replaced(call.with_changes(func=new_func), *_import_edit(parsed, state))
    return f"the fix does not know how to switch `{_short(tree.module.code_for_node(func))}` to spawn"


def _indented(old: str, new: str, text: str, site: Site) -> str | None:
    """``new``, the code libcst wrote for the rewritten call at ``site``, with the lines
    after its first indented as the call's are in ``text``: libcst writes a node's lines
    without the indentation of the block it is in. None when the call's own lines are not
    libcst's lines with that indentation (a string spanning lines, say): rewriting them
    could change what they hold."""
    if "\n" not in old:
        return new
    lines = text.splitlines()
    if not 0 < site.row <= site.end_row <= len(lines):
        return None
    written = [lines[site.row - 1][site.col:], *lines[site.row:site.end_row - 1], lines[site.end_row - 1]]
    written[-1] = written[-1][:site.end_col] if site.end_row > site.row else written[-1]
    line = lines[site.row - 1]
    indent = line[:len(line) - len(line.lstrip())]
    made = old.split("\n")

    def indented(code: list[str]) -> list[str]:
        return [code[0], *(indent + part if part else part for part in code[1:])]

    if indented(made) != written:
        return None
    return "\n".join(indented(new.split("\n")))


def _is_get_context(func: cst.BaseExpression, state: ModuleState) -> bool:
    """``multiprocessing.get_context`` (or a drop-in's), as an attribute or an imported name."""
    if isinstance(func, cst.Attribute):
        return func.attr.value == "get_context" and _is_mp_module(func.value, state)
    if isinstance(func, cst.Name):
        return any(isinstance(atom, ModRef) and atom.qualname.rpartition(".")[0] in MP_MODULES
                   and atom.qualname.endswith(".get_context") for atom in state.env.get(func.value, ()))
    return False


def _method_set(call: cst.Call) -> cst.Call | str:
    """``call`` (a ``get_context(...)``) choosing spawn, or why it cannot be rewritten."""
    spawn = cst.SimpleString('"spawn"')
    if not call.args:
        return call.with_changes(args=[cst.Arg(spawn)])
    first = call.args[0]
    if len(call.args) == 1 and first.star == "" and (first.keyword is None or first.keyword.value == "method") \
            and isinstance(first.value, cst.SimpleString):
        return call.with_changes(args=[first.with_changes(value=spawn)])
    return "its start method is not a plain string"


def _through_variable(name: str, site: Site, state: ModuleState, check: StartCheck | None) -> tuple[Edit, ...] | str:
    """Switch the context ``name`` holds (``ctx = multiprocessing.get_context("fork")``)
    to spawn, where every use of ``ctx`` in the file is an object or a start that works
    the same under spawn. The file is parsed whole again, with libcst's scope analysis:
    this runs only for a finding with such a context, not for every file."""
    if check is None or is_notebook(state.parsed.path):
        return f"`{name}` holds a context set elsewhere"
    module = cst.parse_module(state.parsed.text)
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    scopes = wrapper.resolve(ScopeProvider)
    where = wrapper.resolve(PositionProvider)
    parents = wrapper.resolve(ParentNodeProvider)
    used = next((node for node, span in where.items() if isinstance(node, cst.Name) and node.value == name
                 and (span.start.line, span.start.column) >= (site.row, site.col)
                 and (span.end.line, span.end.column) <= (site.end_row, site.end_col)), None)
    scope = scopes.get(used) if used is not None else None
    if used is None or scope is None:
        return f"`{name}` could not be found again in the file"
    referents = {a for access in scope.accesses[used] for a in access.referents}
    if len(referents) != 1:
        return f"`{name}` is set in more than one place"
    (binding,) = referents
    target = parents.get(binding.node) if isinstance(binding, Assignment) else None  # the AssignTarget
    assign = parents.get(target) if target is not None else None
    if not isinstance(binding, Assignment) or not isinstance(assign, cst.Assign) or len(assign.targets) != 1 \
            or assign.targets[0].target is not binding.node \
            or not isinstance(assign.value, cst.Call) or not _is_get_context(assign.value.func, state):
        return f"`{name}` is not set by `multiprocessing.get_context(...)` in this file"
    if len(binding.scope[name]) != 1:
        return f"`{name}` is set in more than one place"
    new_call = _method_set(assign.value)
    if isinstance(new_call, str):
        return f"`{name}` is chosen with a start method that is not a plain string"
    for access in sorted(binding.references, key=lambda a: (where[a.node].start.line, where[a.node].start.column)):
        row = where[access.node].start.line
        why = _use_refused(access.node, parents, where, module, check)
        if why is not None:
            return f"`{name}` is also used at line {row} ({why})"
    span = where[assign.value]
    return (Edit(module.code_for_node(new_call), (span.start.line, span.start.column),
                 (span.end.line, span.end.column)),)


def _use_refused(node: cst.CSTNode, parents: Mapping[cst.CSTNode, cst.CSTNode],
                 where: Mapping[cst.CSTNode, CodeRange], module: cst.Module, check: StartCheck) -> str | None:
    """Does this use of the context still work once the context is spawn? None, or why not."""
    parent = parents.get(node)
    call: cst.CSTNode | None = None
    if isinstance(parent, cst.Attribute) and parent.value is node:
        call = parents.get(parent)
        if not isinstance(call, cst.Call) or call.func is not parent:
            return f"`{_short(module.code_for_node(parent))}`, which the fix cannot judge"
        if parent.attr.value in CONTEXT_OBJECTS:
            return None
        if parent.attr.value not in CONTEXT_STARTS:
            return f"`{_short(module.code_for_node(call))}`, which the fix cannot judge"
    elif isinstance(parent, cst.Arg) and parent.keyword is not None and parent.keyword.value == "mp_context":
        call = parents.get(parent)
    if not isinstance(call, cst.Call):
        return f"`{_short(module.code_for_node(parent or node))}`, which the fix cannot judge"
    span = where[call]
    why = check(span.start.line, span.start.column)
    return None if why is None else f"a start that cannot switch to spawn: {why}"


# Rewrites of starts by (node, module walk, kind), shared by the analyses of one project.
Rewrites = dict[tuple[int, int, str], tuple[object, object, object]]


def spawn_fix(event: Event, child: Flow | None, state_of: dict[str, ModuleState],
              import_time_sites: set[object], made: dict[int, Fix | NoFix] | None = None,
              check: StartCheck | None = None, rewrites: Rewrites | None = None) -> Fix | NoFix:
    """The fix that makes this start use spawn, or why it must not be offered.

    ``made``: the fixes already made for starts of the same analysis, by start (a start
    reached by many paths is checked once per path; its rewrite is the same). ``check``:
    whether another start of the file, at a row and column, may switch too (for a context
    held in a variable, which every start through it shares). ``rewrites``: the rewrites
    other analyses made of the same node in the same walk of its module."""
    start = event.effect
    assert isinstance(start, Start)
    if made is not None:
        why = unloadable_child(child)
        if why is not None:
            return NoFix(why)
        if id(start) not in made:
            made[id(start)] = spawn_fix(event, None, state_of, import_time_sites, check=check, rewrites=rewrites)
        return made[id(start)]
    target = start.site if start.kind in (P.POOL, P.EXECUTOR) else start.started
    if start.kind == P.OS_FORK:
        return NoFix("os.fork() has no start method to switch: start the child with a spawn context instead")
    if start.kind == P.LIBRARY_POOL:
        return NoFix(f"{P.LIBRARY_POOL_SHOWN} builds its pool itself: {P.LIBRARY_POOL_CHOOSE}")
    if start.method and start.method.startswith(P.OWN_DEFAULT) and start.started is None:
        namespace = start.method[len(P.OWN_DEFAULT):]
        return NoFix(f"it starts an instance of a {namespace}.Process subclass, which uses {namespace}'s default "
                     f'start method: choose spawn once, `{namespace}.set_start_method("spawn")` under the main guard')
    if start.site in import_time_sites:
        return NoFix(IMPORT_TIME)
    if start.kind == P.PROCESS and start.started is None:  # ``.start()`` of a Process subclass's instance
        names = sorted({shown_name(c.func) for c in start.children})
        which = f"`{names[0]}`, a Process subclass," if len(names) == 1 else "a Process subclass"
        return NoFix(f"it starts an instance of {which} which uses the default start method: choose spawn once, "
                     '`multiprocessing.set_start_method("spawn")` under the main guard')
    if not isinstance(target, LazySite) or isinstance(target, StoredSite):
        return NoFix("the start's code is not in a file this run parsed")
    state = state_of.get(target.path)
    node = target.node  # the fix rewrites exactly the node that was analysed
    if state is None or not isinstance(node, cst.Call):
        return NoFix("the start's code is not a call the fix can rewrite")
    why = unloadable_child(child)
    if why is not None:
        return NoFix(why)
    edits = _shared_rewrite(node, start, state, target.tree, target.concrete(), check, rewrites)
    return NoFix(edits) if isinstance(edits, str) else Fix(TITLE, "unsafe", edits)


def _shared_rewrite(call: cst.Call, start: Start, state: ModuleState, tree: ParsedModule, site: Site,
                    check: StartCheck | None, rewrites: Rewrites | None) -> tuple[Edit, ...] | str:
    """``_rewrite``, made once for a node in one walk of its module: what it reads is
    the node, the walk's names and the text, the same in every analysis that shares the
    walk, unless it asked ``check`` about the other starts of the file (a context held
    in a variable), which is the analysis's own answer: that one is never shared. The
    entry holds the node and the walk themselves, so that their ids stay theirs."""
    if rewrites is None:
        return _rewrite(call, start, state, tree, site, check)
    key = (id(call), id(state), start.kind)
    kept = rewrites.get(key)
    if kept is not None and kept[0] is call and kept[1] is state:
        return kept[2]  # type: ignore[return-value]
    asked = False

    def asking(row: int, col: int) -> str | None:
        nonlocal asked
        asked = True
        return check(row, col) if check is not None else None

    edits = _rewrite(call, start, state, tree, site, asking if check is not None else None)
    if not asked:
        rewrites[key] = (call, state, edits)
    return edits
