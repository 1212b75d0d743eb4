"""Say how to install an optional part of gpudoctor into the interpreter that runs it.

The HTML report's chart needs matplotlib and its native stacks need py-spy, both in the
``report`` extra. gpudoctor is installed from a clone (``make demo``'s ``.venv``, or
``pip install -e CLONE`` into a project's own environment); a bare ``pip install
'gpudoctor[report]'`` would look for gpudoctor on the package index, where it is not,
and a bare ``pip`` may belong to another environment. So the hint names the running
interpreter and, from a checkout, the checkout itself (``python -m pip install -e
'CLONE[report]'``); an installed copy is told the extra's own packages.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import gpudoctor

# The packages of each extra, for an installed copy whose metadata cannot be read.
_EXTRAS = {"report": ("matplotlib", "py-spy")}


def source_checkout() -> Path | None:
    """Return the root of the source checkout gpudoctor runs from (a clone installed
    editable, or put on ``PYTHONPATH``), or None for an installed package."""
    root = Path(gpudoctor.__file__).resolve().parent.parent
    try:
        project = (root / "pyproject.toml").read_text(errors="replace")
    except OSError:
        return None
    return root if 'name = "gpudoctor"' in project and (root / "Makefile").is_file() else None


def _packages(extra: str) -> tuple[str, ...]:
    """The distributions ``extra`` names, from the installed metadata when it can be read."""
    from importlib import metadata

    try:
        requires = metadata.requires("gpudoctor") or []
    except metadata.PackageNotFoundError:
        requires = []
    found = []
    for requirement in requires:
        name, _, marker = requirement.partition(";")
        if f'extra == "{extra}"' in marker.replace("'", '"'):
            found.append(name.split(">")[0].split("=")[0].split("<")[0].split("[")[0].strip())
    return tuple(found) or _EXTRAS.get(extra, ())


def commands(extra: str = "report") -> tuple[str, ...]:
    """Return the commands that install ``extra`` for the running interpreter, the one to
    prefer first."""
    python = shlex.quote(sys.executable)
    root = source_checkout()
    if root is None:
        return (f"{python} -m pip install {' '.join(_packages(extra))}",)
    found = [f"{python} -m pip install -e {shlex.quote(f'{root}[{extra}]')}"]
    if Path(sys.prefix).resolve() == (root / ".venv").resolve():
        found.append("make demo")  # the checkout's own .venv: make demo installs the extra too
    return tuple(found)


def text(extra: str = "report") -> str:
    """Return the install hint as plain text, for the terminal and the JSON's notes."""
    return " or ".join(commands(extra))


def html(extra: str = "report") -> str:
    """Return the install hint as HTML: the commands, the first to prefer."""
    from html import escape

    return " or ".join(f"<code>{escape(c)}</code>" for c in commands(extra))
