"""Gitignore patterns that make a backtracking matcher search without end.

Anyone can commit a .gitignore line, so a pattern must never stall a run. The compiled form
(see gpudoctor/lint/patterns.py) matches what pathspec matches, as git reads it, without the
search: the Hypothesis test holds it to pathspec's own answers on small patterns and paths,
the structural tests check that no two unbounded wildcards of a bomb can share text, and the
lint runs check the whole path (.gitignore, ``exclude``, ``--extend-exclude``). How long
matching takes as patterns grow is measured in benchmarks/scaling.py, not here.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pathspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpudoctor.cli import main
from gpudoctor.lint.patterns import compile_lines
from tests.lint.test_cli import BAD

BOMBS = [
    "*" * 5000 + "a",
    "*a" * 40 + "b",
    "*?" * 40 + "b",
    "a" + "*" * 100 + "b" + "*" * 100 + "c",
    "**/" + "a/**/" * 30 + "b",
    "/" + "***/" * 20 + "x",
]
ATOMIC = sys.version_info >= (3, 11)


def _free_wildcards(regex: str) -> int:
    """How many unbounded repeats of the regex are outside an atomic group."""
    depth, free, i = 0, 0, 0
    stack: list[bool] = []
    while i < len(regex):
        if regex.startswith("\\", i):
            i += 2
            continue
        if regex.startswith("(?>", i):
            stack.append(True)
            depth += 1
        elif regex[i] == "(":
            stack.append(False)
        elif regex[i] == ")":
            depth -= stack.pop()
        elif regex[i] in "*+" and depth == 0 and not regex.startswith("*?", i - 1):
            free += 1
        i += 1
    return free


@pytest.mark.parametrize("pattern", BOMBS, ids=lambda p: p[:12])
def test_a_bomb_compiles_to_a_bounded_search(pattern: str) -> None:
    (compiled,) = compile_lines([pattern]).patterns
    assert isinstance(compiled.regex, re.Pattern)
    text = compiled.regex.pattern
    assert len(text) < 5000, "a run of stars is one wildcard"
    if ATOMIC:
        # A leading "(?:.+/)?", one wildcard of the last segment and the last "**": each
        # tried once per start, so a match costs a few passes over the path.
        assert _free_wildcards(text) <= 3, text


MATCHES = [  # a bomb, a name it matches, one it does not
    ("*" * 5000 + "a", "src/data", "src/" + "b" * 60),
    ("*a" * 40 + "b", "x/" + "a" * 40 + "b", "x/" + "a" * 80),
    ("*?" * 40 + "b", "b" * 41, "b" * 40),
    ("a" + "*" * 100 + "b" + "*" * 100 + "c", "a" * 30 + "b" * 30 + "c", "a" * 30 + "b" * 30),
    ("**/" + "a/**/" * 30 + "b", "a/" * 30 + "b", "a/" * 29 + "b"),
    ("/" + "***/" * 20 + "x", "x", "y/" * 60),
]


@pytest.mark.timeout(120)  # a guard against a hang; the time itself lives in benchmarks/scaling.py
@pytest.mark.parametrize(("pattern", "matched", "missed"), MATCHES, ids=lambda p: p[:12])
def test_a_bomb_matches_what_it_should(pattern: str, matched: str, missed: str) -> None:
    spec = compile_lines([pattern])
    assert spec.match_file(matched)
    assert not spec.match_file(missed)


def test_a_segment_of_stars_is_a_globstar_as_git_reads_it() -> None:
    spec = compile_lines(["/docs/***/gen.py"])
    assert spec.match_file("docs/gen.py")
    assert spec.match_file("docs/a/b/gen.py")
    assert not spec.match_file("src/gen.py")


@pytest.mark.timeout(300)
@pytest.mark.parametrize("where", ["gitignore", "exclude", "extend-exclude"])
def test_lint_is_not_stalled_by_a_pattern_bomb(
    where: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    bomb = "*" * 5000 + "a"
    config = '[project]\nname = "x"\nrequires-python = ">=3.10"\n'
    if where == "exclude":
        config += f'[tool.gpudoctor]\nexclude = ["{bomb}"]\n'
    (tmp_path / "pyproject.toml").write_text(config)
    if where == "gitignore":
        (tmp_path / ".gitignore").write_text(bomb + "\n")
    folder = tmp_path / ("b" * 40)
    folder.mkdir()
    for i in range(30):
        (folder / f"{'c' * 40}{i}.py").write_text(BAD)
    (tmp_path / "data").write_text("a")  # what the bomb does match
    monkeypatch.chdir(tmp_path)
    extra = ["--extend-exclude", bomb] if where == "extend-exclude" else []
    code = main(["lint", "--no-cache", "--output-format", "concise", *extra, "."])
    out, err = capsys.readouterr()
    assert code == 1, err
    assert out.count(" GD101 ") == 30
    assert "Traceback" not in out + err


# -- the same answers as pathspec, where pathspec finishes ------------------------------

_GLOB_CHARS = st.sampled_from(["a", "b", "*", "?", "/", "**/", "/**", "[ab]", "[!a]", "\\*", "!"])
_PATH_PARTS = st.lists(st.sampled_from(["a", "b", "ab", "ba", "aab", "*", ""]), min_size=1, max_size=5)


@settings(max_examples=400, deadline=None)
@given(st.lists(_GLOB_CHARS, min_size=1, max_size=7).map("".join), _PATH_PARTS.map("/".join))
def test_the_bounded_form_answers_as_pathspec_does(pattern: str, path: str) -> None:
    if re.search(r"(^|/)\*\*\*+(/|$)", pattern):
        return  # a segment of three stars: git's "**", which pathspec reads as "*"
    try:
        theirs = pathspec.GitIgnoreSpec.from_lines([pattern])
    except (ValueError, re.error):
        return
    ours = compile_lines([pattern])
    assert ours.match_file(path) == theirs.match_file(path), (pattern, path)
