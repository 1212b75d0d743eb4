"""Which rule codes are on: ruff's select / extend-select / ignore with prefixes and ALL."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from gpudoctor.errors import GpudoctorError


@dataclass(frozen=True)
class Selection:
    """The enabled rule codes, decided once from the settings."""

    enabled: frozenset[str]

    def __contains__(self, code: str) -> bool:
        return code in self.enabled


def _expand(patterns: Iterable[str], known: Sequence[str], origin: str) -> set[str]:
    chosen: set[str] = set()
    for pattern in patterns:
        if pattern == "ALL":
            chosen.update(known)
            continue
        matched = {code for code in known if code.startswith(pattern)}
        if not matched:
            raise GpudoctorError(f"unknown rule code or prefix {pattern!r} in {origin}")
        chosen.update(matched)
    return chosen


def build_selection(
    known: Sequence[str],
    default: Iterable[str],
    select: Iterable[str] | None = None,
    extend_select: Iterable[str] | None = None,
    ignore: Iterable[str] | None = None,
    origin: str = "the command line",
) -> Selection:
    """Resolve ``select``/``extend-select``/``ignore`` against the known codes.

    ``select`` replaces the default set; ``extend-select`` adds to whichever set is in
    force; ``ignore`` wins over both, as in ruff.
    """
    base = _expand(select, known, origin) if select else set(default)
    base |= _expand(extend_select or (), known, origin)
    base -= _expand(ignore or (), known, origin)
    return Selection(frozenset(base))
