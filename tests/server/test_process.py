"""``gpudoctor server`` as a process: it ends with its client, and says what it is for when
started by hand."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys


def _message(body: dict[str, object]) -> bytes:
    data = json.dumps(body).encode()
    return b"Content-Length: %d\r\n\r\n%s" % (len(data), data)


def test_the_server_ends_when_its_client_goes_away_and_says_nothing_on_the_way() -> None:
    server = subprocess.Popen([sys.executable, "-m", "gpudoctor", "server"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    # The editor is gone after the first message, without shutdown or exit (its end of the
    # pipe closes).
    out, err = server.communicate(_message({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "processId": None, "rootUri": None, "capabilities": {}}}), timeout=120)
    assert b'"id": 1' in out or b'"id":1' in out  # it answered before
    assert b"Traceback" not in err, err.decode()


def test_shutdown_and_exit_end_the_server_with_status_0() -> None:
    server = subprocess.Popen([sys.executable, "-m", "gpudoctor", "server"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    messages = [{"jsonrpc": "2.0", "id": 1, "method": "initialize",
                 "params": {"processId": None, "rootUri": None, "capabilities": {}}},
                {"jsonrpc": "2.0", "method": "initialized", "params": {}},
                {"jsonrpc": "2.0", "id": 2, "method": "shutdown", "params": None},
                {"jsonrpc": "2.0", "method": "exit", "params": None}]
    out, err = server.communicate(b"".join(_message(m) for m in messages), timeout=120)
    assert server.returncode == 0, err.decode()
    assert b"Traceback" not in err, err.decode()


def test_started_from_a_terminal_it_says_what_it_is_for() -> None:
    leader, follower = pty.openpty()
    try:
        done = subprocess.run([sys.executable, "-m", "gpudoctor", "server"], stdin=follower, capture_output=True,
                              text=True, timeout=120)
    finally:
        os.close(leader)
        os.close(follower)
    assert done.returncode == 2
    assert "start it from your editor's LSP client" in done.stderr and "Traceback" not in done.stderr
