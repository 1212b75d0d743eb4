"""Fuzzing the readers of what a project hands gpudoctor: notebooks and pyproject.toml.

Whatever the bytes, a notebook is read, or it is a GD000 finding (``NotANotebook``, a
``ParseFailure`` for the linter); a pyproject.toml gives settings, or one clear line naming
the file (``GpudoctorError``, exit 2). Never another exception: a ValueError, RecursionError
or IndexError from the reader would be a traceback, and in a run of many files it would
take the others down with it. The inputs are built to reach the readers' edges: valid
JSON and TOML of every shape (numbers of thousands of digits, nesting thousands deep,
keys gpudoctor knows with values of the wrong type), then cut, spliced and garbled.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpudoctor.errors import GpudoctorError
from gpudoctor.lint import notebook
from gpudoctor.lint.config import KNOWN_KEYS
from gpudoctor.lint.frontend.reading import ParseFailure, decode
from gpudoctor.lint.inputs import build_settings
from gpudoctor.lint.settings import Settings

FUZZ = settings(max_examples=150, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                       HealthCheck.data_too_large])

# Text that the readers meet at their edges: digits past the int conversion limit (4300),
# nesting deeper than the recursion limit, quotes and brackets left open.
_EDGES = st.sampled_from([
    "9" * 5001, "-" + "1" * 4301, "1" * 4300, "1e99999", "[" * 3000, "{" * 3000, "]" * 50, "}", '"',
    '"\\ud800"', "\\u0000", "\x00", "\ufeff", "NaN", "Infinity", "-0", "0" * 5001, "1_000", "0x" + "f" * 5000,
])


# -- notebooks ---------------------------------------------------------------------------------

_JSON_LEAVES = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True, allow_infinity=True),
                         st.text(max_size=30))
_JSON = st.recursive(_JSON_LEAVES, lambda inner: st.lists(inner, max_size=4)
                     | st.dictionaries(st.text(max_size=10), inner, max_size=4), max_leaves=15)
_SOURCES = st.one_of(
    st.text(max_size=80),
    st.lists(st.sampled_from(["import multiprocessing as mp\n", "import cupy as cp\n", "cp.ones(1)\n",
                              "%time x = 1\n", "!pip install x\n", "%%bash\n", "with mp.Pool(2) as p:\n",
                              "    p.map(str, [1])\n", "def f(:\n", "x = (\n", "\t\x0c\n"]), max_size=6),
    _JSON,
)
_CELLS = st.lists(st.fixed_dictionaries(
    {"cell_type": st.sampled_from(["code", "markdown", "raw", 3, None]), "source": _SOURCES},
    optional={"metadata": _JSON, "outputs": _JSON, "execution_count": _JSON}), max_size=4)
_NOTEBOOKS = st.one_of(
    st.fixed_dictionaries({"nbformat": st.sampled_from([4, 4, 4, 3, "4", None, 10 ** 30]), "cells": _CELLS},
                          optional={"metadata": st.one_of(_JSON, st.just({"language_info": {"name": "python"}})),
                                    "nbformat_minor": _JSON}),
    _JSON,
)


@st.composite
def _notebook_bytes(draw: st.DrawFn) -> bytes:
    """A notebook's JSON, perhaps with an edge spliced in, cut short, or its bytes garbled."""
    text = json.dumps(draw(_NOTEBOOKS), allow_nan=True)
    how = draw(st.sampled_from(["as-is", "splice", "replace-a-number", "cut", "garble"]))
    if how == "splice":
        at = draw(st.integers(0, len(text)))
        text = text[:at] + draw(_EDGES) + text[at:]
    elif how == "replace-a-number":  # still valid JSON, with a number Python cannot convert
        text = text.replace("4", draw(st.sampled_from(["9" * 5001, "4", "[" * 2000 + "4" + "]" * 2000])), 1)
    elif how == "cut":
        text = text[:draw(st.integers(0, len(text)))]
    data = text.encode("utf-8", "surrogatepass")
    if how == "garble":
        data += draw(st.binary(max_size=8))
        data = draw(st.binary(max_size=4)) + data
    return data


@FUZZ
@given(raw=_notebook_bytes())
def test_any_notebook_bytes_are_read_or_a_gd000(raw: bytes) -> None:
    try:
        found = notebook.read(raw)
    except notebook.NotANotebook as exc:
        assert exc.message and "\n" not in exc.message and exc.row >= 1
        return
    assert isinstance(found.program, str)
    for row in range(1, found.program.count("\n") + 2):
        found.locate(row)


@FUZZ
@given(raw=_notebook_bytes())
def test_the_linter_reads_any_notebook_as_a_program_or_a_parse_failure(raw: bytes) -> None:
    text = decode(Path("fuzz.ipynb"), raw)
    assert isinstance(text, (str, ParseFailure))


# -- pyproject.toml ------------------------------------------------------------------------------

_BARE_KEYS = st.from_regex(r"[A-Za-z0-9_-]{1,12}", fullmatch=True)
_KEYS = st.one_of(st.sampled_from([*KNOWN_KEYS, "requires-python", "name"]), _BARE_KEYS)
_TOML_LEAVES = st.one_of(
    st.integers().map(str), st.floats(allow_nan=False).map(repr),
    st.sampled_from(["true", "false", "nan", "+inf", "1979-05-27", "07:32:00", "1979-05-27T07:32:00Z",
                     "1979-02-30", "0o777", "0b101", "0xdead_beef", "9" * 5001, "-" + "9" * 4400]),
    st.text(max_size=20).map(lambda s: json.dumps(s, ensure_ascii=False)),  # a JSON string is a TOML basic string
    st.sampled_from(['"GD1"', '"GD101"', '"ALL"', '"py312"', '"py27"', '"linux"', '"*.py"', '"!"', '"\\\\"',
                     '">=3.11"', '">=3.' + "1" * 5000 + '"', '"py3' + "1" * 5000 + '"']),
)
_TOML_VALUES = st.recursive(_TOML_LEAVES, lambda inner: st.one_of(
    st.lists(inner, max_size=4).map(lambda items: "[" + ", ".join(items) + "]"),
    st.lists(st.tuples(_BARE_KEYS, inner), max_size=3, unique_by=lambda kv: kv[0]).map(
        lambda pairs: "{" + ", ".join(f"{k} = {v}" for k, v in pairs) + "}"),
), max_leaves=12)
_DEEP = st.integers(1, 6000).flatmap(lambda depth: st.sampled_from(
    ["[" * depth + "]" * depth, "{a = " * depth + "}" * depth, "[" * depth]))
_TABLES = st.sampled_from(["tool.gpudoctor", "project", "tool.other", "tool.gpudoctor.per-file-ignores", "tool",
                           "[tool.gpudoctor]", "tool.gpudoctor.select"])


@st.composite
def _pyproject_text(draw: st.DrawFn) -> str:
    """Tables of keys and values, the [tool.gpudoctor] keys among them, then perhaps cut,
    spliced with an edge, or garbled."""
    lines: list[str] = []
    for table in draw(st.lists(_TABLES, max_size=4, unique=True)):
        lines.append(f"[{table}]")
        for key, value in draw(st.lists(st.tuples(_KEYS, st.one_of(_TOML_VALUES, _DEEP)), max_size=5,
                                        unique_by=lambda kv: kv[0])):
            lines.append(f'"{key}" = {value}' if "-" in key else f"{key} = {value}")
    text = "\n".join(lines) + "\n"
    how = draw(st.sampled_from(["as-is", "as-is", "splice", "cut", "garble"]))
    if how == "splice":
        at = draw(st.integers(0, len(text)))
        text = text[:at] + draw(_EDGES) + text[at:]
    elif how == "cut":
        text = text[:draw(st.integers(0, len(text)))]
    elif how == "garble":
        text += draw(st.text(max_size=20))
    return text


def _args() -> argparse.Namespace:
    return argparse.Namespace(target_version=None, platform=None, select=None, extend_select=None, ignore=None,
                              extend_exclude=None)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz-pyproject")


@FUZZ
@given(text=_pyproject_text(), encoded=st.sampled_from(["utf-8", "utf-8-sig", "latin-1"]))
def test_any_pyproject_gives_settings_or_one_line_naming_it(folder: Path, text: str, encoded: str) -> None:
    """The configuration's whole reading: the nearest pyproject.toml read, its
    [tool.gpudoctor] table checked, requires-python and target-version turned into a target."""
    path = folder / "pyproject.toml"
    path.write_bytes(text.encode(encoded, "replace"))
    try:
        found = build_settings(_args(), [str(folder / "x.py")])
    except GpudoctorError as exc:
        message = str(exc)
        assert str(path) in message and "\n" not in message, message
        return
    assert isinstance(found, Settings) and found.target_minor in range(10, 15)
