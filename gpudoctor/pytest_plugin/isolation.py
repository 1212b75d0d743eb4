"""The ``isolated`` fixture: run a callable in a sandboxed fresh interpreter, get an outcome.

The callable runs under ``gpudoctor probe`` in its own process (never forked from
the test process: a fork would inherit whatever GPU runtime the test initialized),
with a deadline and hang detection. The probe runs in a process of its own too,
since it makes itself a child subreaper, which the test process must not become.
"""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from gpudoctor.probe.diagnosis import Diagnosis, ProcessVerdict
from gpudoctor.probe.verdicts import Verdict

_MARGIN = 60.0  # on top of the deadline: the probe's stack dumps and killing the tree


@dataclass(frozen=True)
class Outcome:
    """How the isolated call ended, explained by the probe's diagnosis.

    ``verdict`` is ``ok``, ``hung``, ``crashed``, ``oom``, ``killed`` (deadline) or
    ``failed`` (the callable raised): a ``Verdict``, equal to those strings. ``result``
    is its return value; ``exception`` what it raised, when that could be pickled back
    (``traceback`` has its text). ``processes`` are the probe's judged processes.
    """

    verdict: Verdict
    explanation: str
    result: Any = None
    exception: BaseException | None = None
    traceback: str | None = None
    output: str = ""  # the child's stdout and stderr, as the probe echoed them
    processes: tuple[ProcessVerdict, ...] = field(default=())

    @property
    def ok(self) -> bool:
        return self.verdict == Verdict.OK


def _check_picklable(function: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> bytes:
    try:
        return pickle.dumps((function, args, kwargs))
    except Exception as error:
        pytest.fail(f"isolated() runs the callable in a fresh interpreter, so it and its arguments "
                    f"must be picklable (a function defined at module level): {error}", pytrace=False)


class Isolated:
    """Call ``isolated(function, *args, timeout=60, hang_after=10, **kwargs)``."""

    def __init__(self, directory: Path) -> None:
        self._directory = directory
        self._count = 0

    def __call__(self, function: Callable[..., Any], *args: Any, timeout: float = 60.0,
                 hang_after: float = 10.0, **kwargs: Any) -> Outcome:
        """Run ``function(*args, **kwargs)`` in a fresh interpreter and return its outcome."""
        self._count += 1
        payload = self._directory / f"isolated-{self._count}.call"
        result = self._directory / f"isolated-{self._count}.result"
        call = _check_picklable(function, args, kwargs)
        payload.write_bytes(pickle.dumps(list(sys.path)) + call)
        command = [sys.executable, "-m", "gpudoctor", "probe", "--json", "--timeout", str(timeout),
                   "--hang-after", str(hang_after), "--grace", "2", "--",
                   sys.executable, "-m", "gpudoctor.pytest_plugin.isolation_child", str(payload), str(result)]
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout + _MARGIN)
        try:
            document = json.loads(done.stdout)
        except ValueError:
            pytest.fail(f"gpudoctor probe could not run the callable (exit {done.returncode}):\n"
                        f"{done.stderr[-4000:]}", pytrace=False)
        return _outcome(document, result, done.stderr)


def _outcome(document: dict[str, Any], result: Path, output: str) -> Outcome:
    value: Any = None
    exception: BaseException | None = None
    text: str | None = None
    try:
        kind, *rest = pickle.loads(result.read_bytes())
    except (OSError, EOFError, pickle.UnpicklingError, AttributeError, ImportError):
        kind, rest = "none", []
    if kind == "ok":
        value = rest[0]
    elif kind == "error":
        exception, text = rest[0], rest[1]
    diagnosis = Diagnosis.from_json(document)
    return Outcome(
        verdict=diagnosis.verdict,
        explanation=diagnosis.explanation,
        result=value,
        exception=exception,
        traceback=text,
        output=output,
        processes=diagnosis.processes,
    )
