"""``gpudoctor server`` end to end, driven by a real LSP client (pytest-lsp): what an editor
sees on open, edit and save, across files, its code actions applied and checked again,
notebooks, settings from pyproject.toml, and bad input."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from lsprotocol import types as T
from pytest_lsp import LanguageClient

from tests.server.conftest import apply_edits, change_file, diagnostics_for, open_file, settled

ROOT = Path(__file__).resolve().parents[2]
PROJECTS = ROOT / "fixtures" / "projects"

pytestmark = pytest.mark.asyncio

FORKS_AFTER_INIT = textwrap.dedent("""\
    import multiprocessing as mp

    import cupy

    def work(i):
        return float(cupy.arange(i).sum())

    def main():
        cupy.cuda.Device(0).use()
        with mp.Pool(2) as pool:
            return pool.map(work, range(4))

    if __name__ == "__main__":
        main()
    """)


def _project(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "pyproject.toml").write_text("[project]\nname = 'p'\nrequires-python = '>=3.11'\n")
    for name, text in files.items():
        (root / name).write_text(text)
    return root


# `gpudoctor lint --output-format json --no-cache FOLDER` for each folder named, in one
# interpreter (the command line's own entry, one run after the other), a report a line.
_EACH = ("import sys, contextlib, io\nfrom gpudoctor.cli import main\n"
         "for folder in sys.argv[1:]:\n    out = io.StringIO()\n"
         "    with contextlib.redirect_stdout(out):\n"
         "        assert main(['lint', '--output-format', 'json', '--exit-zero', '--no-cache', folder]) == 0\n"
         "    print(out.getvalue().replace('\\n', ' '))\n")


def _cli_json(folders: list[Path]) -> list[list[dict[str, object]]]:
    run = subprocess.run([sys.executable, "-c", _EACH, *map(str, folders)], capture_output=True, text=True,
                         cwd=folders[0].parent)
    assert run.returncode == 0, run.stderr
    found = [json.loads(line) for line in run.stdout.splitlines()]
    assert len(found) == len(folders)
    return found


def _as_json(uri: str, diagnostic: T.Diagnostic) -> tuple[object, ...]:
    """A diagnostic in the JSON report's terms (1-based columns; the fixtures are ASCII)."""
    def where(location_range: T.Range) -> tuple[int, int, int, int]:
        return (location_range.start.line + 1, location_range.start.character + 1,
                location_range.end.line + 1, location_range.end.character + 1)

    related = tuple((Path(T.Location(r.location.uri, r.location.range).uri.removeprefix("file://")).name,
                     *where(r.location.range), r.message) for r in diagnostic.related_information or ())
    return (Path(uri.removeprefix("file://")).name, diagnostic.code, diagnostic.message,
            "error" if diagnostic.severity == T.DiagnosticSeverity.Error else "warning", *where(diagnostic.range),
            related)


def _json_key(entry: dict[str, object]) -> tuple[object, ...]:
    def where(item: dict[str, object]) -> tuple[int, int, int, int]:
        start, end = item["location"], item["end_location"]
        assert isinstance(start, dict) and isinstance(end, dict)
        return (start["row"], start["column"], end["row"], end["column"])

    related = entry["related"]
    assert isinstance(related, list)
    return (Path(str(entry["filename"])).name, entry["code"], entry["message"], entry["severity"], *where(entry),
            tuple((Path(str(r["filename"])).name, *where(r), r["message"]) for r in related))


async def test_diagnostics_equal_the_json_report_on_every_fixture_project(client: LanguageClient,
                                                                          tmp_path: Path) -> None:
    compared = 0
    roots = []
    for fixture in sorted(p for p in PROJECTS.iterdir() if p.is_dir()):
        roots.append(tmp_path / fixture.name)
        shutil.copytree(fixture, roots[-1])
        (roots[-1] / "pyproject.toml").write_text("")  # the project is the fixture's folder, for both
    for root, report in zip(roots, _cli_json(roots), strict=True):
        files = sorted(root.rglob("*.py"))
        expected = sorted(_json_key(e) for e in report)
        uris = [open_file(client, path) for path in files]
        await settled(client)
        shown = []
        for uri in uris:
            shown += [_as_json(uri, d) for d in await diagnostics_for(client, uri, 1)]
        shown.sort()
        assert shown == expected, root.name
        compared += len(expected)
        for uri in uris:
            client.text_document_did_close(T.DidCloseTextDocumentParams(T.TextDocumentIdentifier(uri)))
    assert compared >= 20  # (the fixtures hold findings to compare)


async def test_an_unsaved_edit_is_linted_and_its_fix_applied_and_checked(client: LanguageClient,
                                                                        tmp_path: Path) -> None:
    root = _project(tmp_path, {"train.py": "import multiprocessing as mp\n"})
    uri = open_file(client, root / "train.py")
    assert await diagnostics_for(client, uri, 1) == []
    change_file(client, uri, FORKS_AFTER_INIT, 2)  # typed, not saved
    [shown] = await diagnostics_for(client, uri, 2)
    assert shown.code == "GD101" and shown.severity == T.DiagnosticSeverity.Error
    assert shown.range.start.line == 9  # the Pool's line
    assert shown.code_description is not None and shown.code_description.href.endswith("GD101.md")
    related = [r.message for r in shown.related_information or ()]
    assert related[0] == "CuPy initialized here (cupy.cuda.Device.use)" and related[-1] == "the child uses CuPy here"
    actions = await client.text_document_code_action_async(T.CodeActionParams(
        T.TextDocumentIdentifier(uri), shown.range, T.CodeActionContext([shown])))
    assert actions is not None
    titles = [a.title for a in actions]  # (pygls's client reads the last as a Command: the same to a test)
    assert titles == ['Use the spawn start method: multiprocessing.get_context("spawn") (GD101; unsafe: may change '
                      'behaviour)', "Disable GD101 for this line", "Show the documentation of GD101"]
    fix = actions[0]
    assert isinstance(fix, T.CodeAction) and fix.edit is not None and fix.edit.document_changes
    [change] = fix.edit.document_changes
    assert isinstance(change, T.TextDocumentEdit) and change.text_document.version == 2
    fixed = apply_edits(FORKS_AFTER_INIT, list(change.edits))  # type: ignore[arg-type]
    assert 'mp.get_context("spawn").Pool(2)' in fixed
    change_file(client, uri, fixed, 3)
    # With spawn, each worker reserves the GPU for itself: the warning the fix's help named.
    assert [d.code for d in await diagnostics_for(client, uri, 3)] in ([], ["GD401"])


async def test_the_noqa_action_silences_the_line(client: LanguageClient, tmp_path: Path) -> None:
    root = _project(tmp_path, {"train.py": FORKS_AFTER_INIT})
    uri = open_file(client, root / "train.py")
    [shown] = await diagnostics_for(client, uri, 1)
    actions = await client.text_document_code_action_async(T.CodeActionParams(
        T.TextDocumentIdentifier(uri), shown.range, T.CodeActionContext([shown])))
    [noqa] = [a for a in actions or () if isinstance(a, T.CodeAction) and a.title.startswith("Disable")]
    assert noqa.edit is not None and noqa.edit.document_changes
    [change] = noqa.edit.document_changes
    assert isinstance(change, T.TextDocumentEdit)
    text = apply_edits(FORKS_AFTER_INIT, list(change.edits))  # type: ignore[arg-type]
    assert "    with mp.Pool(2) as pool:  # noqa: GD101\n" in text
    change_file(client, uri, text, 2)
    assert await diagnostics_for(client, uri, 2) == []


async def test_a_finding_appears_in_file_b_when_file_a_changes(client: LanguageClient, tmp_path: Path) -> None:
    root = _project(tmp_path, {
        "setup_gpu.py": "def prepare():\n    return None\n",
        "main.py": textwrap.dedent("""\
            import multiprocessing as mp

            import cupy

            import setup_gpu

            def work(i):
                return float(cupy.arange(i).sum())

            def main():
                setup_gpu.prepare()
                with mp.Pool(2) as pool:
                    return pool.map(work, range(4))

            if __name__ == "__main__":
                main()
            """)})
    main = open_file(client, root / "main.py")
    helper = open_file(client, root / "setup_gpu.py")
    # A fork Pool whose workers use CuPy: a warning while nothing initializes CUDA first.
    assert [d.code for d in await diagnostics_for(client, main, 1)] == ["GD103"]
    # The helper now initializes CUDA (typed, not saved): the Pool in main.py forks after it.
    change_file(client, helper, "import cupy\n\ndef prepare():\n    cupy.cuda.Device(0).use()\n", 2)
    await settled(client)
    [shown] = await diagnostics_for(client, main, 1)
    assert shown.code == "GD101" and shown.range.start.line == 11
    init = (shown.related_information or ())[0]
    assert init.location.uri == helper and init.location.range.start.line == 3
    # Taken back: the warning again.
    change_file(client, helper, "def prepare():\n    return None\n", 3)
    await settled(client)
    assert [d.code for d in await diagnostics_for(client, main, 1)] == ["GD103"]


async def test_rapid_edits_are_linted_together_and_only_the_last_text_is_shown(client: LanguageClient,
                                                                               tmp_path: Path) -> None:
    root = _project(tmp_path, {"train.py": FORKS_AFTER_INIT})
    uri = open_file(client, root / "train.py")
    await diagnostics_for(client, uri, 1)
    before = len(client.published.seen)  # type: ignore[attr-defined]
    for version in range(2, 62):  # sixty keystrokes, the last one a clean text
        text = FORKS_AFTER_INIT + f"# {version}\n" if version < 61 else "import multiprocessing as mp\n"
        change_file(client, uri, text, version)
    assert await diagnostics_for(client, uri, 61) == []
    info = await settled(client)
    after = [p for p in client.published.seen[before:] if p.uri == uri]  # type: ignore[attr-defined]
    assert len(after) < 30, info  # coalesced: far fewer runs than edits
    assert after[-1].version == 61 and list(after[-1].diagnostics) == []
    versions = [p.version for p in after]
    assert versions == sorted(versions)  # never an older text's result after a newer one


async def test_hover_shows_the_finding_and_the_rule(client: LanguageClient, tmp_path: Path) -> None:
    root = _project(tmp_path, {"train.py": FORKS_AFTER_INIT})
    uri = open_file(client, root / "train.py")
    [shown] = await diagnostics_for(client, uri, 1)
    hover = await client.text_document_hover_async(T.HoverParams(T.TextDocumentIdentifier(uri),
                                                                 shown.range.start))
    assert hover is not None and isinstance(hover.contents, T.MarkupContent)
    assert hover.contents.value.startswith("**GD101** `fork-after-gpu-init` (error)")
    assert "# GD101 fork-after-gpu-init" in hover.contents.value
    nothing = await client.text_document_hover_async(T.HoverParams(T.TextDocumentIdentifier(uri), T.Position(0, 0)))
    assert nothing is None
    await client.workspace_execute_command_async(T.ExecuteCommandParams("gpudoctor.showRule", ["GD101"]))
    [page] = client.shown_documents  # type: ignore[attr-defined]
    assert Path(page.removeprefix("file://")).read_text().startswith("# GD101 fork-after-gpu-init")


async def test_settings_come_from_pyproject_and_its_edit_counts(client: LanguageClient, tmp_path: Path) -> None:
    root = _project(tmp_path, {"train.py": FORKS_AFTER_INIT})
    (root / "pyproject.toml").write_text("[tool.gpudoctor]\nignore = ['GD101']\n")
    uri = open_file(client, root / "train.py")
    assert await diagnostics_for(client, uri, 1) == []
    (root / "pyproject.toml").write_text("[tool.gpudoctor]\n")
    client.workspace_did_change_watched_files(T.DidChangeWatchedFilesParams(
        [T.FileEvent((root / "pyproject.toml").as_uri(), T.FileChangeType.Changed)]))
    await settled(client)
    assert [d.code for d in await diagnostics_for(client, uri, 1)] == ["GD101"]
    info = await settled(client)
    assert f"project {root}, configuration {root / 'pyproject.toml'}, target py3" in info


async def test_a_notebook_gets_diagnostics_in_its_cells(client: LanguageClient, tmp_path: Path) -> None:
    root = _project(tmp_path, {})
    path = root / "explore.ipynb"
    path.write_text("{}")
    sources = ["import multiprocessing as mp\nimport cupy\n", "# Setup", "cupy.cuda.Device(0).use()\n",
               "def work(i):\n    return float(cupy.arange(i).sum())\n\nwith mp.Pool(2) as pool:\n"
               "    pool.map(work, range(4))\n"]
    cells = [T.TextDocumentItem(f"vscode-notebook-cell:{path}#C{i}", "python" if i != 1 else "markdown", 1, source)
             for i, source in enumerate(sources)]
    client.notebook_document_did_open(T.DidOpenNotebookDocumentParams(
        T.NotebookDocument(path.as_uri(), "jupyter-notebook", 1, [
            T.NotebookCell(T.NotebookCellKind.Code if i != 1 else T.NotebookCellKind.Markup, cell.uri)
            for i, cell in enumerate(cells)]), cells))
    await settled(client)
    # (and GD108's warning: on Python 3.14 the pool's default is a forkserver, whose workers
    # cannot import a function of a cell)
    shown, later = sorted(await diagnostics_for(client, cells[3].uri), key=lambda d: str(d.code))
    assert shown.code == "GD101" and shown.range.start.line == 3 and later.code == "GD108"
    init = (shown.related_information or ())[0]
    assert init.location.uri == cells[2].uri and init.location.range.start.line == 0


async def test_bad_input_is_a_diagnostic_or_nothing_and_the_server_lives_on(client: LanguageClient,
                                                                            tmp_path: Path) -> None:
    root = _project(tmp_path, {"train.py": FORKS_AFTER_INIT})
    uri = open_file(client, root / "train.py")
    await diagnostics_for(client, uri, 1)
    half = FORKS_AFTER_INIT.replace("    with mp.Pool(2) as pool:", "    with mp.Pool(2 as")
    change_file(client, uri, half, 2)
    assert [d.code for d in await diagnostics_for(client, uri, 2)] in ([], ["GD000"])
    change_file(client, uri, "\udcff\x00" * 3 + "import cupy\n", 3)  # not even text
    assert [d.code for d in await diagnostics_for(client, uri, 3)] in ([], ["GD000"])
    # Malformed requests (parameters of the wrong shape, a body that is not JSON) are
    # answered with an error or dropped; what comes next is handled.
    for body in (json.dumps({"jsonrpc": "2.0", "id": "bad-1", "method": "textDocument/hover",
                             "params": {"textDocument": {"uri": uri}}}).encode(),
                 json.dumps({"jsonrpc": "2.0", "id": "bad-2", "method": "textDocument/codeAction",
                             "params": [1, 2]}).encode(),
                 b'{"jsonrpc": "2.0", "id": 3, "method": '):
        client.protocol.writer.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    change_file(client, uri, FORKS_AFTER_INIT, 4)
    assert [d.code for d in await diagnostics_for(client, uri, 4)] == ["GD101"]
    # A document of no file (an untitled buffer) is not linted; nothing fails.
    client.text_document_did_open(T.DidOpenTextDocumentParams(T.TextDocumentItem("untitled:Untitled-1", "python", 1,
                                                                                 FORKS_AFTER_INIT)))
    assert "untitled:" not in await settled(client)


async def test_saving_lints_the_saved_text_and_an_unused_noqa_has_its_fix(client: LanguageClient,
                                                                         tmp_path: Path) -> None:
    root = _project(tmp_path, {"train.py": "import multiprocessing as mp\n"})
    uri = open_file(client, root / "train.py")
    assert await diagnostics_for(client, uri, 1) == []
    text = "import multiprocessing as mp  # noqa: GD101\n"
    change_file(client, uri, text, 2)
    [unused] = await diagnostics_for(client, uri, 2)
    assert unused.code == "GD001"
    (root / "train.py").write_text(text)
    client.text_document_did_save(T.DidSaveTextDocumentParams(T.TextDocumentIdentifier(uri)))
    await settled(client)
    assert [d.code for d in await diagnostics_for(client, uri, 2)] == ["GD001"]
    actions = await client.text_document_code_action_async(T.CodeActionParams(
        T.TextDocumentIdentifier(uri), unused.range, T.CodeActionContext([unused])))
    fixes = [a for a in actions or () if isinstance(a, T.CodeAction) and a.edit is not None
             and not a.title.startswith("Disable")]
    assert [f.title for f in fixes] == ["Remove the unused code from the noqa comment (GD001; unsafe: may change "
                                       "behaviour)"]
    [change] = fixes[0].edit.document_changes or ()  # type: ignore[union-attr]
    assert isinstance(change, T.TextDocumentEdit)
    cleaned = apply_edits(text, list(change.edits))  # type: ignore[arg-type]
    assert cleaned == "import multiprocessing as mp\n"
    change_file(client, uri, cleaned, 3)
    assert await diagnostics_for(client, uri, 3) == []


async def test_a_bad_configuration_is_said_once_and_clears_what_it_leaves_stale(client: LanguageClient,
                                                                               tmp_path: Path) -> None:
    root = _project(tmp_path, {"train.py": FORKS_AFTER_INIT})
    uri = open_file(client, root / "train.py")
    assert [d.code for d in await diagnostics_for(client, uri, 1)] == ["GD101"]
    (root / "pyproject.toml").write_text("[tool.gpudoctor]\nignore = 'GD101'\n")
    for version in (2, 3):  # two edits: one message
        change_file(client, uri, FORKS_AFTER_INIT + f"# {version}\n", version)
        await settled(client)
    said = [m.message for m in client.messages if m.type == T.MessageType.Error]
    assert len(said) == 1 and "ignore" in said[0] and "pyproject.toml" in said[0], said
    assert "nothing is linted until it is fixed" in said[0]
    assert client.diagnostics[uri] == ()  # nothing stale left on screen
    (root / "pyproject.toml").write_text("[tool.gpudoctor]\n")
    change_file(client, uri, FORKS_AFTER_INIT, 4)
    assert [d.code for d in await diagnostics_for(client, uri, 4)] == ["GD101"]


async def test_hover_and_actions_answer_for_the_line_and_never_for_an_older_text(client: LanguageClient,
                                                                                tmp_path: Path) -> None:
    root = _project(tmp_path, {"train.py": FORKS_AFTER_INIT})
    uri = open_file(client, root / "train.py")
    [shown] = await diagnostics_for(client, uri, 1)
    line_start = T.Position(shown.range.start.line, 0)  # on `with`, beside the finding's columns
    hover = await client.text_document_hover_async(T.HoverParams(T.TextDocumentIdentifier(uri), line_start))
    assert hover is not None
    actions = await client.text_document_code_action_async(T.CodeActionParams(
        T.TextDocumentIdentifier(uri), T.Range(line_start, line_start), T.CodeActionContext([shown])))
    assert actions
    # An edit the server has not linted yet: no answer made from the text before it.
    change_file(client, uri, "\n" + FORKS_AFTER_INIT, 2)
    hover = await client.text_document_hover_async(T.HoverParams(T.TextDocumentIdentifier(uri), shown.range.start))
    assert hover is None  # (linted or not yet, line 9 holds no finding of the text it now has)
    [moved] = await diagnostics_for(client, uri, 2)
    assert moved.range.start.line == shown.range.start.line + 1
