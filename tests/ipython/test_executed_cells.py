"""The executed cells as a notebook the linter reads: cell N is In[N]."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from gpudoctor.ipython import executed_cells


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return executed_cells.virtual_path()


def test_cell_n_of_the_notebook_is_the_execution_count_n() -> None:
    document = json.loads(executed_cells.as_notebook(["a = 1", "", "%time b = 2"]))
    assert [(c["execution_count"], c["source"]) for c in document["cells"]] == [
        (1, "a = 1"), (2, ""), (3, "%time b = 2")]


def test_the_notebook_is_named_in_the_working_directory_and_never_written(here: Path) -> None:
    assert here.parent == Path.cwd() and not here.exists()


def test_the_cell_that_ran_an_initialization_is_found_where_a_later_cell_calls_it(here: Path) -> None:
    cells = ["import tensorflow as tf", "def build():\n    return tf.ones((2, 2))",
             *[f"step_{n} = {n}" for n in range(3, 9)], "model = build()", "again = build()", "print(model)"]
    found = executed_cells.initializing_cells(cells, executed_cells.settings(here), here)
    assert set(found) == {"tensorflow"}
    assert (found["tensorflow"].cell, found["tensorflow"].init.site.cell) == (9, 2)
    assert not here.exists()


def test_the_target_is_the_running_interpreter_not_the_projects_requires_python(here: Path) -> None:
    (here.parent / "pyproject.toml").write_text('[project]\nname = "x"\nrequires-python = ">=3.10"\n')
    config = executed_cells.settings(here)
    assert (config.target_minor, config.platform) == (sys.version_info.minor, sys.platform)
