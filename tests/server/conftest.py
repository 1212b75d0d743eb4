"""A real LSP client (pytest-lsp) driving ``gpudoctor server`` in a process of its own, and
helpers to wait for what the server publishes."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest_lsp
from lsprotocol import types as T
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

# Each wait is for an event the server is sure to send; the bound only turns a broken
# server into a failure instead of a test that never ends.
PATIENCE = 120.0


@dataclass
class Published:
    """Every publishDiagnostics the client received, in order, and an event set at each."""

    seen: list[T.PublishDiagnosticsParams] = field(default_factory=list)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)

    def last(self, uri: str) -> T.PublishDiagnosticsParams | None:
        return next((p for p in reversed(self.seen) if p.uri == uri), None)


@pytest_lsp.fixture(config=ClientServerConfig(server_command=[sys.executable, "-m", "gpudoctor", "server"]))
async def client(lsp_client: LanguageClient) -> AsyncIterator[LanguageClient]:
    published = Published()
    lsp_client.published = published  # type: ignore[attr-defined]
    lsp_client.shown_documents = []  # type: ignore[attr-defined]

    # pytest-lsp's own handler keeps the last list per document only: this one replaces it.
    # (Not a coroutine: handled in the order the messages arrive, before a later response.)
    for method in (T.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS, T.WINDOW_SHOW_DOCUMENT, T.CLIENT_REGISTER_CAPABILITY):
        lsp_client.protocol.fm._features.pop(method, None)
    @lsp_client.feature(T.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def on_publish(params: T.PublishDiagnosticsParams) -> None:
        lsp_client.diagnostics[params.uri] = params.diagnostics
        published.seen.append(params)
        published.arrived.set()

    @lsp_client.feature(T.CLIENT_REGISTER_CAPABILITY)
    def on_register(params: T.RegistrationParams) -> None:
        return None

    @lsp_client.feature(T.WINDOW_SHOW_DOCUMENT)
    def on_show(params: T.ShowDocumentParams) -> T.ShowDocumentResult:
        lsp_client.shown_documents.append(params.uri)  # type: ignore[attr-defined]
        return T.ShowDocumentResult(success=True)

    await lsp_client.initialize_session(T.InitializeParams(capabilities=client_capabilities("visual-studio-code")))
    yield lsp_client
    await lsp_client.shutdown_session()


async def diagnostics_for(client: LanguageClient, uri: str, version: int | None = None) -> list[T.Diagnostic]:
    """The diagnostics published for ``uri`` (for ``version`` of its text, when given),
    once they are."""
    published: Published = client.published  # type: ignore[attr-defined]

    def ready() -> bool:
        last = published.last(uri)
        return last is not None and (version is None or last.version == version)

    while not ready():
        published.arrived.clear()
        await asyncio.wait_for(published.arrived.wait(), PATIENCE)
    found = published.last(uri)
    assert found is not None
    return list(found.diagnostics)


async def settled(client: LanguageClient) -> str:
    """Once every edit sent so far is linted and published: the server's debug text."""
    text = await asyncio.wait_for(client.workspace_execute_command_async(
        T.ExecuteCommandParams("gpudoctor.printDebugInformation")), PATIENCE)
    assert isinstance(text, str)
    return text


def open_file(client: LanguageClient, path: Path, text: str | None = None, version: int = 1) -> str:
    uri = path.as_uri()
    client.text_document_did_open(T.DidOpenTextDocumentParams(
        T.TextDocumentItem(uri, "python", version, path.read_text() if text is None else text)))
    return uri


def change_file(client: LanguageClient, uri: str, text: str, version: int) -> None:
    client.text_document_did_change(T.DidChangeTextDocumentParams(
        T.VersionedTextDocumentIdentifier(version, uri), [T.TextDocumentContentChangeWholeDocument(text)]))


def apply_edits(text: str, edits: list[T.TextEdit]) -> str:
    """``text`` with LSP edits made (positions in UTF-16 units: the tests' texts are ASCII)."""
    lines = text.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def offset(position: T.Position) -> int:
        return starts[min(position.line, len(lines))] + position.character

    for edit in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True):
        text = text[:offset(edit.range.start)] + edit.new_text + text[offset(edit.range.end):]
    return text
