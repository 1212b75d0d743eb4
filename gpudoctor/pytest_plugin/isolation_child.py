"""Run one pickled call in a fresh interpreter, for the ``isolated`` fixture.

``python -m gpudoctor.pytest_plugin.isolation_child PAYLOAD RESULT``: PAYLOAD holds
two pickles, the test process's ``sys.path`` (so the callable's module can be
imported) and then ``(callable, args, kwargs)``. RESULT receives ``("ok", value)``
or ``("error", exception, traceback text)``. A failure also prints its traceback,
so the probe's diagnosis can match the framework's error strings in it.
"""

from __future__ import annotations

import pickle
import sys
import traceback
from typing import Any


def _dump(path: str, outcome: tuple[Any, ...]) -> None:
    try:
        data = pickle.dumps(outcome)
    except Exception as error:  # an unpicklable value or exception: keep its text
        text = outcome[2] if outcome[0] == "error" else ""
        data = pickle.dumps((outcome[0], None, f"{text}(not picklable: {error}; repr: {outcome[1]!r:.2000})"))
    with open(path, "wb") as f:
        f.write(data)


def main(argv: list[str]) -> int:
    payload, result = argv[1], argv[2]
    try:
        with open(payload, "rb") as f:
            sys.path[:0] = [p for p in pickle.load(f) if p not in sys.path]
            function, args, kwargs = pickle.load(f)  # imports the callable's module
        value = function(*args, **kwargs)
    except BaseException as error:  # SystemExit too: the caller wants to know
        text = traceback.format_exc()
        sys.stderr.write(text)
        _dump(result, ("error", error, text))
        return 1
    _dump(result, ("ok", value))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
