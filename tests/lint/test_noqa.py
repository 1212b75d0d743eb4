"""Suppressions: ``# noqa``, ``# noqa: CODE``, ``# gpudoctor: noqa``, and unused ones (GD001)."""

from __future__ import annotations

from tests.conftest import codes_at

BASE = """\
import multiprocessing as mp
import cupy as cp

x = cp.arange(4)

def work(i):
    return float(cp.sum(cp.arange(i)))

if __name__ == "__main__":
    with mp.Pool(2) as pool:{comment}
        pool.map(work, range(3))
"""


def test_noqa_with_code(lint_source) -> None:  # type: ignore[no-untyped-def]
    assert codes_at(lint_source(BASE.format(comment="  # noqa: GD101"))) == set()


def test_bare_noqa(lint_source) -> None:  # type: ignore[no-untyped-def]
    assert codes_at(lint_source(BASE.format(comment="  # noqa"))) == set()


def test_noqa_for_another_code_does_not_suppress(lint_source) -> None:  # type: ignore[no-untyped-def]
    found = codes_at(lint_source(BASE.format(comment="  # noqa: GD201")))
    assert ("GD101", 10) in found and ("GD001", 10) in found


def test_other_tools_codes_are_not_reported_unused(lint_source) -> None:  # type: ignore[no-untyped-def]
    found = codes_at(lint_source(BASE.format(comment="  # noqa: GD101, E501")))
    assert found == set()


def test_file_level_noqa(lint_source) -> None:  # type: ignore[no-untyped-def]
    assert lint_source("# gpudoctor: noqa\n" + BASE.format(comment="")) == []


def test_noqa_inside_a_string_does_not_count(lint_source) -> None:  # type: ignore[no-untyped-def]
    source = BASE.format(comment="").replace("with mp.Pool(2) as pool:", 'with mp.Pool(2) as pool: s = "# noqa"')
    source = source.replace('s = "# noqa"\n        pool.map', 's = "# noqa"; pool.map')
    assert ("GD101", 10) in codes_at(lint_source(source))


def test_unused_noqa_is_reported_at_the_comment(lint_source) -> None:  # type: ignore[no-untyped-def]
    source = "import multiprocessing as mp\nmp.get_context('spawn')  # noqa: GD101\n"
    (finding,) = lint_source(source)
    assert (finding.code, finding.site.row, finding.site.col) == ("GD001", 2, 25)
    assert "GD101" in finding.message


def test_unused_noqa_can_be_ignored(lint_source) -> None:  # type: ignore[no-untyped-def]
    source = "import multiprocessing as mp\nmp.get_context('spawn')  # noqa: GD101\n"
    assert lint_source(source, select=["GD1"]) == []


def test_noqa_in_any_case(lint_source) -> None:  # type: ignore[no-untyped-def]
    """ruff and flake8 read ``# NOQA: GD101`` and ``# NoQA:gd101`` too."""
    for comment in ("  # NOQA: GD101", "  # NoQA:gd101", "  # NOQA"):
        assert codes_at(lint_source(BASE.format(comment=comment))) == set(), comment


def test_an_uppercase_noqa_is_found_in_a_file_that_otherwise_does_nothing(lint_source) -> None:  # type: ignore[no-untyped-def]
    (finding,) = lint_source("import os\nprint(os.getpid())  # NOQA: GD101\n")
    assert (finding.code, finding.site.row) == ("GD001", 2)


def test_an_unknown_code_is_called_unknown_not_unused(lint_source) -> None:  # type: ignore[no-untyped-def]
    (finding,) = lint_source(BASE.format(comment="  # noqa: GD101, GD999"))
    assert finding.code == "GD001"
    assert "unknown rule code GD999" in finding.message and "unused" not in finding.message


def test_no_unused_noqa_in_a_file_that_cannot_be_parsed(lint_source) -> None:  # type: ignore[no-untyped-def]
    """Nothing in it was analysed, so nothing was there for the directive to suppress."""
    source = BASE.format(comment="  # noqa: GD101") + "\ndef broken(:\n"
    assert [f.code for f in lint_source(source)] == ["GD000"]


def test_unused_codes_are_fixed_away(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Only the stale codes go, the comment's rest stays; an unsafe fix (see GD001)."""
    from gpudoctor.cli import main

    source = ("import multiprocessing as mp\n"
              "mp.get_context('spawn')  # noqa: GD101\n"
              "mp.get_context('spawn')  # noqa: GD101, E501\n"
              "x = 1  # NOQA: GD102 kept for a reason\n"
              "y = 2  # noqa: GD999\n"
              "    # noqa: GD101\n"
              "z = 3  # noqa: GD102 # see the ticket\n")
    (tmp_path / "a.py").write_text(source)
    monkeypatch.chdir(tmp_path)
    assert main(["lint", "--no-cache", "--fix", "a.py"]) == 1  # unsafe: not applied by --fix alone
    assert (tmp_path / "a.py").read_text() == source
    assert main(["lint", "--no-cache", "--fix", "--unsafe-fixes", "a.py"]) == 0
    assert (tmp_path / "a.py").read_text() == (
        "import multiprocessing as mp\n"
        "mp.get_context('spawn')\n"
        "mp.get_context('spawn')  # noqa: E501\n"
        "x = 1  # kept for a reason\n"
        "y = 2\n"
        "z = 3  # see the ticket\n")


def test_a_cr_only_file_has_its_noqa_where_python_has_it(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Lines break at a lone CR too: a directive read on the wrong row was called unused,
    and its fix once deleted the lines before it."""
    from gpudoctor.cli import main

    source = BASE.format(comment="  # noqa: GD101").replace("\n", "\r")
    (tmp_path / "cr.py").write_bytes(source.encode())
    monkeypatch.chdir(tmp_path)
    assert main(["lint", "--no-cache", "--fix", "--unsafe-fixes", "cr.py"]) == 0
    assert (tmp_path / "cr.py").read_bytes() == source.encode()


def test_a_gpudoctor_code_after_another_tools_code_is_read(lint_source) -> None:  # type: ignore[no-untyped-def]
    (finding,) = lint_source("import os\nprint(os.getpid())  # noqa: E501, GD101\n")
    assert (finding.code, finding.site.row) == ("GD001", 2)


def test_importing_a_broken_module_does_not_silence_unused_noqa(tmp_path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    """Only main.py is linted (pre-commit named it): the broken module's GD000 is shown at
    the import, and main.py's own directives are still judged."""
    from gpudoctor.cli import main

    (tmp_path / "main.py").write_text("import os\nimport broken\nprint(os.getpid())  # noqa: GD101\n")
    (tmp_path / "broken.py").write_text("import cupy\ndef oops(:\n")  # followed: it names a GPU framework
    monkeypatch.chdir(tmp_path)
    assert main(["lint", "--no-cache", "main.py"]) == 1
    out = capsys.readouterr().out
    assert "main.py:2:1: GD000 broken.py cannot be parsed" in out and "main.py:3:21: GD001" in out
