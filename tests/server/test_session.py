"""The server's lint session without the protocol: a quick run after an edit shows what the
full run then shows, wherever the edit leaves the context's findings as they were."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from gpudoctor.lint.engine import Cancelled
from gpudoctor.server.session import Session

PROJECTS = Path(__file__).resolve().parents[2] / "fixtures" / "projects"


def _copy(tmp_path: Path, name: str) -> Path:
    root = tmp_path / name
    shutil.copytree(PROJECTS / name, root)
    (root / "pyproject.toml").write_text("")
    return root


def _shown(findings: dict[Path, list[object]]) -> dict[Path, list[tuple[object, ...]]]:
    return {path: [(f.code, f.site.row, f.site.col, f.message,  # type: ignore[attr-defined]
                    tuple((r.site.path, r.site.row) for r in f.related))  # type: ignore[attr-defined]
                   for f in found] for path, found in findings.items()}


def test_a_finding_the_context_makes_moves_with_an_edit_above_it(tmp_path: Path) -> None:
    # helpers.py's GD101 comes from main.py's analysis (main initializes CuPy, then calls
    # the helper that forks): the quick run, which does not analyse main.py again, keeps it
    # at its new line.
    root = _copy(tmp_path, "cupy_pool_in_helper")
    helpers = root / "helpers.py"
    session = Session(cache=False)
    text = helpers.read_bytes()
    first = session.lint([helpers], {helpers: text})
    [finding] = first.findings[helpers]
    assert finding.code == "GD101"
    edited = b"# a comment\n# and another\n" + text
    quick = session.lint([helpers], {helpers: edited}, quick=True)
    full = session.lint([helpers], {helpers: edited})
    assert _shown(quick.findings) == _shown(full.findings)
    assert quick.findings[helpers][0].site.row == finding.site.row + 2


def test_an_edit_of_the_finding_s_line_is_left_to_the_full_run(tmp_path: Path) -> None:
    root = _copy(tmp_path, "cupy_pool_in_helper")
    helpers = root / "helpers.py"
    session = Session(cache=False)
    text = helpers.read_bytes()
    session.lint([helpers], {helpers: text})
    edited = text.replace(b"multiprocessing.Pool(processes) as pool", b"multiprocessing.Pool(processes=2) as pool")
    quick = session.lint([helpers], {helpers: edited}, quick=True)
    assert quick.findings[helpers] == []  # the context's finding was on the edited line
    full = session.lint([helpers], {helpers: edited})
    assert [f.code for f in full.findings[helpers]] == ["GD101"]


@pytest.mark.parametrize("name", sorted(p.name for p in PROJECTS.iterdir() if p.is_dir()))
def test_quick_runs_agree_with_full_runs_after_an_edit_at_the_end(tmp_path: Path, name: str) -> None:
    root = _copy(tmp_path, name)
    files = sorted(root.rglob("*.py"))
    session = Session(cache=False)
    texts = {path: path.read_bytes() for path in files}
    session.lint(files, texts)
    edited = {path: text + b"\n\nedited_here = 1\n" for path, text in texts.items()}
    quick = session.lint(files, edited, quick=True)
    full = session.lint(files, edited)
    assert _shown(quick.findings) == _shown(full.findings)


def test_a_quick_run_without_a_full_one_before_lints_nothing(tmp_path: Path) -> None:
    root = _copy(tmp_path, "cupy_pool_in_helper")
    helpers = root / "helpers.py"
    assert Session(cache=False).lint([helpers], {helpers: helpers.read_bytes()}, quick=True).findings == {}


def test_a_cancelled_run_stops(tmp_path: Path) -> None:
    root = _copy(tmp_path, "cupy_pool_in_helper")
    helpers = root / "helpers.py"
    with pytest.raises(Cancelled):
        Session(cache=False).lint([helpers], {helpers: helpers.read_bytes()}, cancelled=lambda: True)


def test_rows_of_an_old_text_are_found_in_the_new_one() -> None:
    from gpudoctor.server.session import _Rows

    moved = _Rows(b"a\nb\nc\nd\ne\n", b"a\nX\nb\nc\nD\ne\nf\n")
    assert [moved.get(row) for row in range(1, 6)] == [1, 3, 4, None, 6]
    assert [_Rows(b"x\na\nb\n", b"a\nb\n").get(row) for row in (1, 2, 3)] == [None, 1, 2]
    assert [_Rows(b"a\nb\n", b"a\nb\nc\n").get(row) for row in (1, 2)] == [1, 2]
