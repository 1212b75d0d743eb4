"""Time ``gpudoctor server`` as an editor meets it, on the keras source: the first
diagnostics after opening a file, the diagnostics after each edit (median), and the
server's memory after 10 and after 500 edits.

The client is pygls's own, speaking to ``python -m gpudoctor server`` over pipes as an
editor does. An edit is a code edit (a statement added at the end, then the next one),
sent as the whole text, unsaved; the time is from sending it to the diagnostics of that
version arriving.

    python benchmarks/server.py                  # keras from PyPI, in a scratch venv
    python benchmarks/server.py --corpus DIR     # a folder holding keras/ already
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from lsprotocol import types as T
from pygls.lsp.client import LanguageClient

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare import _keras_source, _tools_venv  # noqa: E402

# The file compare.py edits (a test that saves and loads models), and two that a GPU
# hazard analysis reads more of: one that starts worker processes, one with many users.
FILES = ("keras/src/saving/saving_lib_test.py", "keras/src/utils/dataset_utils.py",
         "keras/src/trainers/data_adapters/py_dataset_adapter.py")


class Client(LanguageClient):
    def __init__(self) -> None:
        super().__init__("gpudoctor-benchmark", "1")
        self.arrived: dict[tuple[str, int | None], float] = {}
        self.event = asyncio.Event()

        @self.feature(T.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        def published(params: T.PublishDiagnosticsParams) -> None:
            self.arrived[(params.uri, params.version)] = time.perf_counter()
            self.event.set()

    async def until(self, uri: str, version: int) -> float:
        while (uri, version) not in self.arrived:
            self.event.clear()
            await asyncio.wait_for(self.event.wait(), 600)
        return self.arrived[(uri, version)]


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def _session(corpus: Path, files: list[str], edits: int, memory_edits: int) -> dict[str, object]:
    client = Client()
    await client.start_io(sys.executable, "-m", "gpudoctor", "server", cwd=str(corpus))
    assert client._server is not None
    pid = client._server.pid
    await client.initialize_async(T.InitializeParams(capabilities=T.ClientCapabilities(),
                                                     root_uri=corpus.as_uri()))
    client.initialized(T.InitializedParams())
    out: dict[str, object] = {}
    for name in files:
        path = corpus / name
        uri = path.as_uri()
        text = path.read_text()
        sent = time.perf_counter()
        client.text_document_did_open(T.DidOpenTextDocumentParams(T.TextDocumentItem(uri, "python", 1, text)))
        opened = await client.until(uri, 1) - sent
        latencies = []
        for version in range(2, edits + 2):
            edited = text + f"\nedited_{version} = {version}\n"
            sent = time.perf_counter()
            client.text_document_did_change(T.DidChangeTextDocumentParams(
                T.VersionedTextDocumentIdentifier(version, uri), [T.TextDocumentContentChangeWholeDocument(edited)]))
            latencies.append(await client.until(uri, version) - sent)
        client.text_document_did_close(T.DidCloseTextDocumentParams(T.TextDocumentIdentifier(uri)))
        out[name] = (opened, statistics.median(latencies), max(latencies))
    if memory_edits:
        path = corpus / files[0]
        uri = path.as_uri()
        text = path.read_text()
        client.text_document_did_open(T.DidOpenTextDocumentParams(T.TextDocumentItem(uri, "python", 1, text)))
        await client.until(uri, 1)
        for version in range(2, memory_edits + 2):
            client.text_document_did_change(T.DidChangeTextDocumentParams(
                T.VersionedTextDocumentIdentifier(version, uri),
                [T.TextDocumentContentChangeWholeDocument(text + f"\nedited_{version} = {version}\n")]))
            await client.until(uri, version)
            if version - 1 == 10:
                out["rss after 10 edits"] = _rss_mib(pid)
        out[f"rss after {memory_edits} edits"] = _rss_mib(pid)
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, help="a folder holding keras/ (default: keras from PyPI)")
    parser.add_argument("--edits", type=int, default=20, help="edits timed per file")
    parser.add_argument("--memory-edits", type=int, default=500, help="edits before the memory is read (0: none)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        corpus = args.corpus
        if corpus is None:
            corpus = _keras_source(_tools_venv(Path(scratch) / "venv", False), Path(scratch) / "corpus")
        shutil.rmtree(corpus / ".gpudoctor_cache", ignore_errors=True)
        # keras's repository has one at its root: the project is then the whole of keras, as
        # in an editor opened on a clone (other files' uses of an edited one are analysed).
        if not (corpus / "pyproject.toml").exists():
            (corpus / "pyproject.toml").write_text("[project]\nname = \"keras\"\nrequires-python = \">=3.10\"\n")
        files = [f for f in FILES if (corpus / f).is_file()]
        print(f"keras at {corpus}; {args.edits} edits per file")
        for label in ("no cache yet", "cache of the first session"):
            found = asyncio.run(_session(corpus, files, args.edits, args.memory_edits if label != "no cache yet"
                                         else 0))
            print(f"== server started with {label}")
            for name in files:
                opened, median, worst = found[name]  # type: ignore[misc]
                print(f"  {name}: first diagnostics {opened:.2f} s after opening; after an edit "
                      f"median {median * 1000:.0f} ms (worst {worst * 1000:.0f} ms)")
            for key, value in found.items():
                if key.startswith("rss"):
                    print(f"  {key}: {value:.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
