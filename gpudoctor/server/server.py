"""``gpudoctor server``: a Language Server Protocol server over stdio (pygls).

What it does, as ruff's server does for ruff: the findings of every open Python file and
notebook as diagnostics, computed from the editor's text on open, on every change and on
save, with their related places (where the GPU was initialized, the child's use); quick
fixes (the rule's fix, ``# noqa: CODE`` on the line, the rule's documentation); the
rule's documentation on hover.

Never blocking the editor: a notification only notes what changed and wakes one linting
task; the lint runs in a thread of its own while requests (hover, code actions) are
answered from what was published last. Edits made while a lint runs are linted together
once it ends (at most one run in flight and one waiting, whatever the rate of edits), and
a result for a text the editor no longer holds is dropped, never shown.

Nothing of the user's runs: the lint reads the files as text, as ``gpudoctor lint`` does.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsprotocol import types as lsp
from pygls.lsp.server import LanguageServer
from pygls.uris import from_fs_path, to_fs_path

from gpudoctor import __version__
from gpudoctor.errors import GpudoctorError
from gpudoctor.lint.engine import Cancelled
from gpudoctor.server import diagnostics as D
from gpudoctor.server.session import Session

if TYPE_CHECKING:
    from collections.abc import Sequence

    from gpudoctor.lint.findings import Finding

__all__ = ["GpudoctorServer", "serve"]

log = logging.getLogger("gpudoctor.server")

NOTEBOOK_SUFFIX = ".ipynb"
# Seconds without an edit before the full run starts after a quick one (its result would be
# dropped if the next keystroke came while it ran).
QUIET_BEFORE_FULL = 0.3


@dataclass(frozen=True)
class Shown:
    """A diagnostic published, with the finding it shows."""

    diagnostic: lsp.Diagnostic
    finding: Finding


@dataclass(frozen=True)
class Linted:
    """A document as it was sent to be linted: where its diagnostics go (a notebook's go to
    its cells), the file it is linted as, its version and text."""

    uri: str
    path: Path
    version: int | None
    text: bytes


class GpudoctorServer(LanguageServer):
    """The server: the editor's documents, the lint session, what was published."""

    def __init__(self, cache: bool = True) -> None:
        super().__init__("gpudoctor", __version__)
        self.session = Session(cache=cache)
        self.shown: dict[str, list[Shown]] = {}  # uri -> what was published there last
        self.shown_version: dict[str, int | None] = {}  # uri -> the version it was for
        self._wanted: asyncio.Event | None = None
        self._idle: asyncio.Event | None = None  # set while no lint is in flight or wanted
        self._task: asyncio.Task[None] | None = None
        # One thread lints (the analysis holds the GIL; two would only take turns).
        self._linter = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gpudoctor-lint")
        self._pages: Path | None = None
        self._said: str | None = None  # the error shown last (shown again only when it changes)
        self.runs = 0  # lint runs made (tests and the benchmark read it)

    # -- scheduling --------------------------------------------------------------------------
    def want_lint(self) -> None:
        """Lint the open documents as soon as the run in flight (if any) ends."""
        if self._wanted is None or self._idle is None:
            self._wanted, self._idle = asyncio.Event(), asyncio.Event()
            self._task = asyncio.get_running_loop().create_task(self._lint_forever())
        self._idle.clear()
        self._wanted.set()

    def say_once(self, message: str) -> None:
        """Show an error the user must act on (a pop-up, as editors show them), once until
        it changes or goes away, and clear the diagnostics it leaves stale."""
        if message == self._said:
            return
        self._said = message
        self.window_show_message(lsp.ShowMessageParams(lsp.MessageType.Error, message))
        self.window_log_message(lsp.LogMessageParams(lsp.MessageType.Error, message))
        for uri in list(self.shown):
            self.clear(uri)

    def warm_up(self) -> None:
        """Load what linting needs (libcst, the analysis, the rules) in the linting thread
        now, so that the first document opened does not wait for it."""
        self._linter.submit(_load_the_linter)

    async def settled(self) -> None:
        """Return once every edit so far is linted and its diagnostics published."""
        if self._idle is not None:
            await self._idle.wait()

    async def _lint_forever(self) -> None:
        assert self._wanted is not None and self._idle is not None
        loop = asyncio.get_running_loop()
        while True:
            if not self._wanted.is_set():
                self._idle.set()
            await self._wanted.wait()
            self._wanted.clear()
            documents = self._snapshot()
            paths = list(dict.fromkeys(d.path for d in documents))
            texts = {d.path: d.text for d in documents}
            # A quick run first (the edited documents only), then the full run once the
            # editor has been quiet a moment; it stops as soon as another edit arrives:
            # that one's quick run comes first.
            shown_quick = False
            for quick in (True, False):
                wanted = self._wanted
                if not quick and shown_quick and await _arrives(wanted, QUIET_BEFORE_FULL):
                    break
                run = functools.partial(self.session.lint, paths, texts, quick=quick, cancelled=wanted.is_set)
                try:
                    result = await loop.run_in_executor(self._linter, run)
                except Cancelled:
                    break
                except GpudoctorError as exc:  # a bad pyproject.toml: the user's to fix, said once
                    self.say_once(f"gpudoctor: {exc} (nothing is linted until it is fixed)")
                    break
                except Exception as exc:  # noqa: BLE001 - the server lives on; the editor is told
                    log.exception("lint failed")
                    self.window_log_message(lsp.LogMessageParams(lsp.MessageType.Error,
                                                                 f"gpudoctor: lint failed: {exc!r}"))
                    break
                self._said = None  # (a problem said before is gone)
                self.runs += 1
                for line in [*result.warnings, *result.errors]:
                    self.window_log_message(lsp.LogMessageParams(lsp.MessageType.Warning, f"gpudoctor: {line}"))
                self._publish([d for d in documents if d.path in result.findings], result.findings)
                # (a quick run with nothing to reuse, for a document just opened, shows
                # nothing: the full run follows at once)
                shown_quick = quick and bool(result.findings)
                if wanted.is_set():
                    break

    def _snapshot(self) -> list[Linted]:
        """Every open document the linter can read: Python files, and notebooks as the
        ``.ipynb`` text their cells make (a cell is not linted alone)."""
        found = []
        in_notebooks: set[str] = set()
        for notebook in list(self.workspace.notebook_documents.values()):
            in_notebooks.update(cell.document for cell in notebook.cells)
            path = _path(notebook.uri)
            if path is None:
                continue
            found.append(Linted(notebook.uri, path, notebook.version, self._notebook_text(notebook)))
        for uri, document in list(self.workspace.text_documents.items()):
            if uri in in_notebooks:
                continue
            path = _path(uri)
            if path is None or not (path.suffix == ".py" or path.suffix == ".pyi" or
                                    document.language_id == "python"):
                continue
            found.append(Linted(uri, path, document.version, document.source.encode("utf-8", "surrogateescape")))
        return found

    def _notebook_text(self, notebook: lsp.NotebookDocument) -> bytes:
        """The notebook as nbformat 4 JSON, every cell in order (gpudoctor numbers cells
        counting markdown ones too)."""
        cells = []
        for cell in notebook.cells:
            source = self.workspace.get_text_document(cell.document).source
            kind = "code" if cell.kind == lsp.NotebookCellKind.Code else "markdown"
            entry: dict[str, Any] = {"cell_type": kind, "metadata": {}, "source": source}
            if kind == "code":
                entry.update(outputs=[], execution_count=None)
            cells.append(entry)
        document = {"nbformat": 4, "nbformat_minor": 5, "cells": cells,
                    "metadata": {"language_info": {"name": "python"}}}
        return json.dumps(document).encode()

    # -- publishing --------------------------------------------------------------------------
    def _publish(self, documents: list[Linted], findings: dict[Path, list[Finding]]) -> None:
        """Publish what the run found in each document it linted, unless the editor's text
        changed meanwhile (the next run publishes for that one)."""
        for document in documents:
            if self._version_now(document.uri) != document.version:
                continue
            places = D.Places(self._find_place, self.workspace.position_codec)
            per_uri: dict[str, list[Shown]] = {}
            if document.path.suffix == NOTEBOOK_SUFFIX:
                notebook = self.workspace.get_notebook_document(notebook_uri=document.uri)
                for cell in notebook.cells if notebook is not None else ():
                    per_uri[cell.document] = []
            else:
                per_uri[document.uri] = []
            for finding in findings.get(document.path, ()):
                place = places.place(finding.site)
                shown = D.diagnostic(finding, places, self.rule_link)
                if place is None or shown is None or place.uri not in per_uri:
                    continue
                per_uri[place.uri].append(Shown(shown, finding))
            for uri, entries in per_uri.items():
                version = self._version_now(uri)
                if self.shown.get(uri) == entries and self.shown_version.get(uri) == version:
                    continue
                self.shown[uri] = entries
                self.shown_version[uri] = version
                self.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(
                    uri, [e.diagnostic for e in entries], version=version))

    def clear(self, uri: str) -> None:
        """Take back what was shown in a document the editor closed."""
        self.shown.pop(uri, None)
        self.shown_version.pop(uri, None)
        self.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri, []))

    def _version_now(self, uri: str) -> int | None:
        notebook = self.workspace.get_notebook_document(notebook_uri=uri)
        if notebook is not None:
            return notebook.version
        document = self.workspace.text_documents.get(uri)
        return None if document is None else document.version

    def _find_place(self, path: Path, cell: int | None) -> D.Place | None:
        """The editor's text of ``path`` (of its cell ``cell``, in a notebook), else the
        file on disk."""
        uri = from_fs_path(str(path))
        if uri is None:
            return None
        if cell is not None:
            notebook = self.workspace.get_notebook_document(notebook_uri=uri)
            if notebook is None or not 0 < cell <= len(notebook.cells):
                return None
            document = self.workspace.get_text_document(notebook.cells[cell - 1].document)
            return D.Place(document.uri, list(document.lines), document.version)
        held = self.workspace.text_documents.get(uri)
        if held is not None:
            return D.Place(uri, list(held.lines), held.version)
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None
        return D.Place(uri, text.splitlines(keepends=True))

    # -- rules' pages -------------------------------------------------------------------------
    def rule_page(self, code: str) -> str | None:
        """A file URI of the rule's documentation (written once, in a private folder that
        lives as long as the server), for the diagnostic's link and "show the rule"."""
        try:
            if self._pages is None:
                self._pages = Path(tempfile.mkdtemp(prefix="gpudoctor-rules-"))
            page = self._pages / f"{code}.md"
            if not page.exists():
                page.write_text(D.rule_text(code), encoding="utf-8")
        except OSError:
            return None
        found: str | None = from_fs_path(str(page))
        return found

    def remove_pages(self) -> None:
        if self._pages is not None:
            import shutil

            shutil.rmtree(self._pages, ignore_errors=True)
            self._pages = None

    def stop_linting(self) -> None:
        if self._task is not None:
            self._task.cancel()
        self._linter.shutdown(wait=False, cancel_futures=True)
        self.remove_pages()

    # -- requests ------------------------------------------------------------------------------
    def shown_at(self, uri: str, where: lsp.Range, named: Sequence[lsp.Diagnostic] = ()) -> list[Shown]:
        """What was shown in ``uri`` in the range ``where``, or among the diagnostics the
        client names (some send the line's diagnostics for a cursor beside them)."""
        keys = {(d.code, d.message, d.range.start.line, d.range.start.character) for d in named}
        return [s for s in self.shown.get(uri, []) if D.overlaps(s.diagnostic.range, where) or
                (s.diagnostic.code, s.diagnostic.message, s.diagnostic.range.start.line,
                 s.diagnostic.range.start.character) in keys]

    def is_current(self, uri: str) -> bool:
        """Were the diagnostics shown in ``uri`` made from the editor's text now?"""
        return uri in self.shown_version and self.shown_version[uri] == self._version_now(uri)

    def code_actions(self, params: lsp.CodeActionParams) -> list[lsp.CodeAction]:
        uri = params.text_document.uri
        if not self.is_current(uri):
            return []  # the text changed since: fixes made for the old one would be wrong
        wanted = params.context.only
        places = D.Places(self._find_place, self.workspace.position_codec)
        actions: list[lsp.CodeAction] = []
        for shown in self.shown_at(uri, params.range, params.context.diagnostics):
            made = [D.fix_action(shown.finding, shown.diagnostic, places),
                    D.noqa_action(shown.finding, shown.diagnostic, places),
                    D.rule_action(shown.finding.code, shown.diagnostic)]
            actions.extend(a for a in made if a is not None)
        if wanted:
            actions = [a for a in actions if any(str(a.kind).startswith(str(k)) for k in wanted)]
        return actions

    def hover(self, params: lsp.HoverParams) -> lsp.Hover | None:
        """The findings under the pointer (else those of its line), made from the text the
        editor holds now."""
        uri = params.text_document.uri
        if not self.is_current(uri):
            return None
        shown = self.shown.get(uri, [])
        under = [s for s in shown if D.contains(s.diagnostic.range, params.position)] or \
            [s for s in shown if s.diagnostic.range.start.line == params.position.line]
        if not under:
            return None
        text = "\n\n---\n\n".join(D.hover_text(s.finding) for s in under)
        return lsp.Hover(lsp.MarkupContent(lsp.MarkupKind.Markdown, text), range=under[0].diagnostic.range)

    async def debug_information(self) -> str:
        """What the server is and holds, once the lint in progress is done (ruff's
        ``printDebugInformation``): the version, the interpreter, each open document with
        the project and settings it is linted with, the runs made."""
        await self.settled()
        lines = [f"gpudoctor {__version__} server (pygls), Python {sys.version.split()[0]} at {sys.executable}",
                 f"lint runs: {self.runs}"]
        for document in self._snapshot():
            shown = sum(len(v) for uri, v in self.shown.items() if uri == document.uri or
                        uri in _cells(self, document.uri))
            try:
                settings = self.session.settings(document.path)
            except GpudoctorError as exc:
                lines.append(f"{document.uri} (version {document.version}): not linted: {exc}")
                continue
            lines.append(f"{document.uri} (version {document.version}): {shown} diagnostics; project "
                         f"{settings.project_root}, configuration {settings.config_file or 'none'}, target "
                         f"py3{settings.target_minor} on {settings.platform}")
        return "\n".join(lines)

    def show_rule(self, code: object) -> None:
        """Open the rule's page where the client can show a document, else show its text as
        a message."""
        window = self.client_capabilities.window
        support = window.show_document if window is not None else None
        page = self.rule_page(str(code)) if support is not None and support.support else None
        if page is None:
            self.window_show_message(lsp.ShowMessageParams(lsp.MessageType.Info, D.rule_text(str(code))))
            return
        self.window_show_document(lsp.ShowDocumentParams(page, take_focus=True), lambda _: None)

    def rule_link(self, code: str) -> str | None:
        """The rule page's URI for a diagnostic's code, for clients that show the link."""
        document = self.client_capabilities.text_document
        publish = document.publish_diagnostics if document is not None else None
        return self.rule_page(code) if publish is not None and publish.code_description_support else None


def _load_the_linter() -> None:
    import libcst

    from gpudoctor.lint import file_analysis  # noqa: F401 - loaded for its imports
    from gpudoctor.lint.rules._registry import all_rules

    all_rules()
    libcst.parse_module("import multiprocessing\n")


async def _arrives(event: asyncio.Event, seconds: float) -> bool:
    """Is ``event`` set within ``seconds``?"""
    try:
        await asyncio.wait_for(event.wait(), seconds)
    except asyncio.TimeoutError:
        return False
    return True


def _cells(server: GpudoctorServer, uri: str) -> set[str]:
    notebook = server.workspace.get_notebook_document(notebook_uri=uri)
    return set() if notebook is None else {cell.document for cell in notebook.cells}


def _path(uri: str) -> Path | None:
    """The file an editor's document is (None for documents of no file: untitled ones,
    remote ones)."""
    if not uri.startswith("file:"):
        return None
    found = to_fs_path(uri)
    return None if found is None else Path(found).absolute()


def build(cache: bool = True) -> GpudoctorServer:
    """The server with its features registered."""
    server = GpudoctorServer(cache=cache)
    python_cells = lsp.NotebookDocumentSyncOptions(
        notebook_selector=[lsp.NotebookDocumentFilterWithCells(cells=[lsp.NotebookCellLanguage("python")])],
        save=True)

    @server.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: GpudoctorServer, params: lsp.DidOpenTextDocumentParams) -> None:
        ls.want_lint()

    @server.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: GpudoctorServer, params: lsp.DidChangeTextDocumentParams) -> None:
        ls.want_lint()

    @server.feature(lsp.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: GpudoctorServer, params: lsp.DidSaveTextDocumentParams) -> None:
        ls.want_lint()

    @server.feature(lsp.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: GpudoctorServer, params: lsp.DidCloseTextDocumentParams) -> None:
        ls.clear(params.text_document.uri)
        ls.want_lint()  # the others now see the file's text on disk

    @server.feature(lsp.NOTEBOOK_DOCUMENT_DID_OPEN, python_cells)
    def notebook_open(ls: GpudoctorServer, params: lsp.DidOpenNotebookDocumentParams) -> None:
        ls.want_lint()

    @server.feature(lsp.NOTEBOOK_DOCUMENT_DID_CHANGE)
    def notebook_change(ls: GpudoctorServer, params: lsp.DidChangeNotebookDocumentParams) -> None:
        ls.want_lint()

    @server.feature(lsp.NOTEBOOK_DOCUMENT_DID_SAVE)
    def notebook_save(ls: GpudoctorServer, params: lsp.DidSaveNotebookDocumentParams) -> None:
        ls.want_lint()

    @server.feature(lsp.NOTEBOOK_DOCUMENT_DID_CLOSE)
    def notebook_close(ls: GpudoctorServer, params: lsp.DidCloseNotebookDocumentParams) -> None:
        for cell in params.cell_text_documents:
            ls.clear(cell.uri)
        ls.want_lint()

    @server.feature(lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    def files_changed(ls: GpudoctorServer, params: lsp.DidChangeWatchedFilesParams) -> None:
        ls.want_lint()  # a module the open ones import, or pyproject.toml

    @server.feature(lsp.INITIALIZED)
    async def initialized(ls: GpudoctorServer, params: lsp.InitializedParams) -> None:
        ls.warm_up()
        watching = ls.client_capabilities.workspace
        changes = watching.did_change_watched_files if watching is not None else None
        if changes is None or not changes.dynamic_registration:
            return
        watchers = [lsp.FileSystemWatcher(glob) for glob in ("**/*.py", "**/*.ipynb", "**/pyproject.toml",
                                                              "**/.gitignore")]
        with contextlib.suppress(Exception):  # a client that refuses: edits of closed files go unseen
            await ls.client_register_capability_async(lsp.RegistrationParams([lsp.Registration(
                "gpudoctor-watch", lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES,
                lsp.DidChangeWatchedFilesRegistrationOptions(watchers))]))

    @server.feature(lsp.TEXT_DOCUMENT_CODE_ACTION,
                    lsp.CodeActionOptions(code_action_kinds=[lsp.CodeActionKind.QuickFix]))
    def code_action(ls: GpudoctorServer, params: lsp.CodeActionParams) -> list[lsp.CodeAction]:
        return ls.code_actions(params)

    @server.feature(lsp.TEXT_DOCUMENT_HOVER)
    def hover(ls: GpudoctorServer, params: lsp.HoverParams) -> lsp.Hover | None:
        return ls.hover(params)

    @server.command(D.SHOW_RULE)
    def show_rule(ls: GpudoctorServer, *arguments: Any) -> None:
        ls.show_rule(arguments[0] if arguments else "")

    @server.command(D.DEBUG_INFORMATION)
    async def debug_information(ls: GpudoctorServer, *arguments: Any) -> str:
        text = await ls.debug_information()
        ls.window_log_message(lsp.LogMessageParams(lsp.MessageType.Info, text))
        return text

    @server.feature(lsp.SHUTDOWN)
    def shutdown(ls: GpudoctorServer, params: None) -> None:
        ls.stop_linting()

    return server


def serve(cache: bool = True) -> int:
    """Run the server on stdin and stdout until the client says exit (or goes away)."""
    from gpudoctor.lint import gc_pause

    gc_pause.process_outlives_runs()
    # The protocol owns standard output: anything else printed there would corrupt it.
    out = sys.stdout.buffer
    sys.stdout = sys.stderr
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="gpudoctor server: %(message)s")
    server = build(cache=cache)

    def stop(signum: int, _frame: object) -> None:  # an editor that stops its server: SIGTERM
        raise SystemExit(0)

    import signal

    signal.signal(signal.SIGTERM, stop)
    try:
        server.start_io(sys.stdin.buffer, out)
    finally:
        server.stop_linting()
    return 0
