"""Where a long piece of evidence goes: a file the failure names, and the report only with -v.

A hung test's full report holds every process's stack; in a CI log of many failures
it buries the lines that explain them. So the failure shows its brief and the path
of a file holding the full report, written under ``--gpudoctor-report-dir`` or
``gpudoctor/`` in pytest's cache folder; ``-v`` (or no folder to write to: the cache
plugin off and no folder given) puts the full report in the failure too.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
from pathlib import Path

import pytest

from gpudoctor.pytest_plugin.checks import Failure
from gpudoctor.pytest_plugin.suite_options import SUITE, SuiteOptions

_NAME_LENGTH = 100


def _folder(config: pytest.Config) -> Path | None:
    suite = config.stash.get(SUITE, None) or SuiteOptions()
    if suite.report_dir is not None:
        return suite.report_dir
    cache = getattr(config, "cache", None)  # absent with -p no:cacheprovider
    return None if cache is None else Path(cache.mkdir("gpudoctor"))


def file_name(nodeid: str) -> str:
    """A file name for a test: readable, unique (a test ID's hash), safe on every file system."""
    readable = re.sub(r"[^A-Za-z0-9._-]+", "_", nodeid).strip("_")[:_NAME_LENGTH]
    return f"{readable}-{hashlib.sha256(nodeid.encode()).hexdigest()[:8]}.txt"


def _shown(path: Path, config: pytest.Config) -> str:
    """The path relative to where pytest was started, when it is below it."""
    try:
        return os.path.relpath(path, config.invocation_params.dir) if path.is_relative_to(
            config.invocation_params.dir) else str(path)
    except ValueError:
        return str(path)


def _write(config: pytest.Config, nodeid: str, failure: Failure) -> Path | None:
    folder = _folder(config)
    if folder is None or failure.section is None:
        return None
    title, text = failure.section
    path = folder / file_name(nodeid)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{nodeid}\n{failure.reason}\n\n{title}\n{text}\n")
    except OSError:
        return None
    return path


def place(config: pytest.Config, nodeid: str, failure: Failure) -> Failure:
    """Write a failure's long section to a file and say where; keep it in the report only with -v."""
    if not failure.brief:  # a short report stays as it is
        return failure
    path = _write(config, nodeid, failure)
    if path is None:
        return failure
    verbose = config.get_verbosity() > 0
    where = f"Full report (every process, every stack): {_shown(path, config)}"
    return dataclasses.replace(failure, section=failure.section if verbose else None,
                               brief=(*failure.brief, where if verbose else where + " (-v shows it here)"))
