"""Counts and the words they go with agree: "1 process", "3 processes", "pid 7 was"."""

from __future__ import annotations

from gpudoctor.probe.wording import agree, pids, plural


def test_plural_agree_and_pids() -> None:
    assert [plural(n, "process") for n in (0, 1, 3)] == ["0 processes", "1 process", "3 processes"]
    assert (plural(1, "native thread"), plural(9, "native thread")) == ("1 native thread", "9 native threads")
    assert plural(2, "more process", "more processes") == "2 more processes"
    assert (agree(1, "was", "were"), agree(2, "was", "were")) == ("was", "were")
    assert (pids([7]), pids([7, 8])) == ("pid 7", "pids 7, 8")
