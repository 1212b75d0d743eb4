"""first_inits: where a program first initializes each GPU framework, cells included."""

from __future__ import annotations

import json
from pathlib import Path

from gpudoctor.lint.initializations import first_inits
from gpudoctor.lint.rules._registry import all_rules
from gpudoctor.lint.selection import build_selection
from gpudoctor.lint.settings import Settings


def _settings(root: Path) -> Settings:
    codes = [r.code for r in all_rules()]
    return Settings(build_selection(codes, codes), 12, "linux", root)


def test_the_first_init_of_each_framework_in_program_order(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("import torch\nimport cupy as cp\n\nx = cp.arange(3)\n"
                      "if torch.cuda.is_available():\n    y = cp.zeros(2)\n")
    found = first_inits(script, _settings(tmp_path))
    assert [(f.framework, f.display, f.api, f.site.row, f.site.cell) for f in found][:2] == [
        ("cupy", "CuPy", "cupy.arange", 4, None), ("torch", "PyTorch", "torch.cuda.is_available", 5, None)]


def test_a_notebook_init_is_located_in_its_cell(tmp_path: Path) -> None:
    notebook = tmp_path / "nb.ipynb"
    cells = [{"cell_type": "markdown", "metadata": {}, "source": "# title"},
             {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
              "source": "%matplotlib inline\nimport tensorflow as tf"},
             {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
              "source": "\nx = tf.ones((2, 2))"}]
    data = json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}).encode()
    (found,) = first_inits(notebook, _settings(tmp_path), {notebook: data})
    assert (found.framework, found.level, found.site.cell, found.site.row) == ("tensorflow", "runtime", 3, 2)


def test_a_program_that_cannot_be_parsed_initializes_nothing_that_can_be_seen(tmp_path: Path) -> None:
    script = tmp_path / "broken.py"
    script.write_text("import cupy as cp\nx = cp.arange(3\n")
    assert first_inits(script, _settings(tmp_path)) == ()
