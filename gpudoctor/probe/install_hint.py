"""Say how to install an optional part of gpudoctor, the way this copy of it was installed.

The HTML report's chart needs matplotlib and its native stacks need py-spy, both in
the ``report`` extra. Someone who cloned the repository runs gpudoctor from the
checkout's ``.venv`` (``make demo`` builds it); there ``pip install
'gpudoctor[report]'`` would fetch a second gpudoctor from the index into whatever
environment ``pip`` belongs to. So the hint names the checkout's commands when
gpudoctor runs from a source checkout, and the package's extra otherwise.
"""

from __future__ import annotations

from pathlib import Path

import gpudoctor


def source_checkout() -> Path | None:
    """Return the root of the source checkout gpudoctor runs from (a clone installed
    editable, or put on ``PYTHONPATH``), or None for an installed package."""
    root = Path(gpudoctor.__file__).resolve().parent.parent
    try:
        project = (root / "pyproject.toml").read_text(errors="replace")
    except OSError:
        return None
    return root if 'name = "gpudoctor"' in project and (root / "Makefile").is_file() else None


def commands(extra: str = "report") -> tuple[str, ...]:
    """Return the commands that install ``extra``, first the one to prefer."""
    if source_checkout() is None:
        return (f"pip install 'gpudoctor[{extra}]'",)
    return ("make demo", f".venv/bin/pip install -e '.[{extra}]'")


def text(extra: str = "report") -> str:
    """Return the install hint as plain text, for the terminal and the JSON's notes."""
    found = commands(extra)
    root = source_checkout()
    if root is None:
        return f"{found[0]}, in the environment gpudoctor runs in"
    return f"{' or '.join(found)} in the source checkout {root}"


def html(extra: str = "report") -> str:
    """Return the install hint as HTML: the commands, and where to run them."""
    from html import escape

    found = [f"<code>{escape(c)}</code>" for c in commands(extra)]
    root = source_checkout()
    if root is None:
        return found[0]
    return f"{' or '.join(found)} in the source checkout <code>{escape(str(root))}</code>"
