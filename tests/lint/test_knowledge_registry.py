"""The framework records are the one source of framework knowledge: the gate, the analysis
and the rules read what they know from the registry, never from copies of their own."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpudoctor.knowledge.framework import Framework
from gpudoctor.knowledge.registry import GPU_WORDS, READERS, RECORDS
from gpudoctor.lint.engine import lint_paths
from gpudoctor.lint.frontend.text_facts import USES_GPU, mentioned_words, mentions_starts
from gpudoctor.lint.rules._registry import all_rules
from gpudoctor.lint.selection import build_selection
from gpudoctor.lint.settings import Settings

LINT = Path(__file__).resolve().parents[2] / "gpudoctor" / "lint"


def _names(record: Framework) -> Iterator[str]:
    """Every name a record mentions: its modules and the names of its APIs."""
    yield from record.modules
    yield from (api.pattern for api in record.table)
    yield from (api.pattern for api in record.initializing_imports)
    yield from record.device_contexts
    yield from record.kernel_decorators
    if record.device_type:
        yield record.device_type


@pytest.mark.parametrize("root", sorted({name.split(".", 1)[0] for r in RECORDS for name in _names(r)}))
def test_every_root_a_record_names_counts_as_using_the_gpu(root: str) -> None:
    assert USES_GPU.search(f"import {root}\n") is not None
    assert USES_GPU.search(f"x = {root}.anything()\n") is not None


@pytest.mark.parametrize("var", sorted({var for r in RECORDS for var in r.environment} | set(READERS)))
def test_every_variable_a_runtime_reads_makes_an_imported_module_matter(var: str) -> None:
    for text in (f'os.environ["{var}"] = "0"\n', f'os.environ.setdefault("{var}", "0")\n'):
        assert mentions_starts(mentioned_words(text)), text


def test_every_variable_of_a_record_has_its_reader() -> None:
    for record in RECORDS:
        for var in record.environment:
            assert READERS[var] == record.name


# Framework names as string literals; ``tf`` is the conventional alias of tensorflow. The
# bare word ``cuda`` is a device name ("cuda", ``.cuda()``), not the ``cuda.core`` package.
_FRAMEWORK_LITERAL = re.compile(rf"^(?:(?:{'|'.join(map(re.escape, (*GPU_WORDS, 'tf')))})\.|"
                                rf"(?:{'|'.join(re.escape(w) for w in (*GPU_WORDS, 'tf') if w != 'cuda')})$)")
_EXAMPLES = {"VALID", "INVALID", "EXAMPLES", "VALID_EXAMPLES", "INVALID_EXAMPLES"}


def _framework_literals(path: Path) -> Iterator[tuple[int, str]]:
    """String constants of ``path`` that name a framework, docstrings and the rules'
    example snippets left out."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                skip.add(id(first.value))
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] \
            if isinstance(node, ast.AnnAssign) else []
        if any(isinstance(t, ast.Name) and t.id in _EXAMPLES for t in targets):
            skip.update(id(sub) for sub in ast.walk(node))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip \
                and _FRAMEWORK_LITERAL.match(node.value.strip()):
            yield node.lineno, node.value


def test_no_rule_or_analysis_module_names_a_framework() -> None:
    found = [f"{path.relative_to(LINT)}:{line}: {text!r}"
             for folder in ("analysis", "rules") for path in sorted((LINT / folder).rglob("*.py"))
             for line, text in _framework_literals(path)]
    assert found == []


def test_the_scan_sees_a_framework_literal(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text('"""About torch."""\nVALID = "torch.cuda"\nif name == "torch.device":\n    pass\n')
    assert list(_framework_literals(module)) == [(3, "torch.device")]


def test_the_registry_imports_no_libcst() -> None:
    code = "import sys, gpudoctor.knowledge.registry; print(any(m.startswith('libcst') for m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


MAIN = """\
import jax

import helper

print(jax.devices())
helper.configure()
"""
HELPER = """\
import os


def configure():
    os.environ["{var}"] = "{value}"
"""


AFTER_INIT = "{var} is set after JAX initialized {what} (jax.devices, main.py:5); the new value is ignored"
AFTER_IMPORT = ("{var} is set after jax was imported (main.py:1); jax reads it when it is imported, "
                "so the new value is ignored")


@pytest.mark.parametrize(("var", "value", "what", "message"), [
    ("CUDA_VISIBLE_DEVICES", "0", "CUDA", AFTER_INIT),  # read by the driver: found before the records were the source
    ("XLA_PYTHON_CLIENT_PREALLOCATE", "false", "its runtime", AFTER_INIT),  # read when the backend is created
    # read by JAX as it is imported (jax 0.11 jax/_src/config.py): the gate did not know it
    ("JAX_PLATFORMS", "cpu", "", AFTER_IMPORT),
])
def test_a_variable_set_in_a_helper_after_jax_initialized(tmp_path: Path, var: str, value: str, what: str,
                                                           message: str) -> None:
    (tmp_path / "main.py").write_text(MAIN)
    (tmp_path / "helper.py").write_text(textwrap.dedent(HELPER.format(var=var, value=value)))
    codes = [r.code for r in all_rules()]
    files = [tmp_path / "helper.py", tmp_path / "main.py"]  # what ``gpudoctor lint .`` checks
    result = lint_paths(files, Settings(build_selection(codes, codes), 12, "linux", tmp_path))
    assert [(Path(f.site.path).name, f.site.row, f.code, f.message) for f in result.findings] == [
        ("helper.py", 5, "GD301", message.format(var=var, what=what)),
    ]
