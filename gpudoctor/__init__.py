"""gpudoctor: find and explain GPU + process-parallelism failures."""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext gpudoctor``: the ``%gpudoctor`` magic and its cell hooks (gpudoctor/ipython/).

    Imported only when IPython asks, so that ``import gpudoctor`` stays light.
    """
    from gpudoctor.ipython.extension import load

    load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    """``%unload_ext gpudoctor``: remove the magic and the hooks."""
    from gpudoctor.ipython.extension import unload

    unload(ipython)
