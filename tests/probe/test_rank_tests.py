"""The rank test the probe reads around a rank's line: an ``if`` enclosing it, or an early
exit before it (``if rank != 0: return``: the line runs on the other ranks only)."""

from __future__ import annotations

import textwrap
from pathlib import Path

from gpudoctor.probe.explain_ranks import Place, _condition_at, _condition_text

SOURCE = textwrap.dedent("""\
    import sys

    import torch.distributed as dist


    def save(rank, model):
        if rank != 0:
            return
        dist.barrier()


    def loop(batches):
        for batch in batches:
            if dist.get_rank() > 0:
                continue
            dist.all_reduce(batch)


    def main(local_rank):
        if local_rank not in (-1, 0):
            sys.exit(0)
        dist.barrier()
        if local_rank == 0:
            dist.barrier()


    def unrelated(rank):
        if rank == 0:
            print("saving")
        dist.barrier()
    """)


def test_an_early_exit_on_the_rank_before_the_line_is_its_rank_test(tmp_path: Path) -> None:
    path = tmp_path / "train.py"
    path.write_text(SOURCE)
    lines = SOURCE.splitlines()

    def at(text: str) -> str:
        return f"{path}:{lines.index(text) + 1}"

    found = _condition_at(at("    dist.barrier()"), ["python", str(path)])
    assert found is not None and (found.text, found.line, found.exits) == ("if rank != 0: return", 7, True)
    found = _condition_at(at("        dist.all_reduce(batch)"), ["python", str(path)])
    assert found is not None and found.text == "if dist.get_rank() > 0: continue" and found.exits
    main_barrier = f"{path}:{lines.index('    if local_rank == 0:')}"
    found = _condition_at(main_barrier, ["python", str(path)])
    assert found is not None and found.text == "if local_rank not in (-1, 0): sys.exit(0)"
    # An enclosing test is still the one named, and a test whose body goes on is none.
    found = _condition_at(f"{path}:{lines.index('    if local_rank == 0:') + 2}", ["python", str(path)])
    assert found is not None and found.text == "if local_rank == 0:" and not found.exits
    assert _condition_at(f"{path}:{len(lines)}", ["python", str(path)]) is None
    barrier = at("    dist.barrier()")
    place = Place(None, "barrier", "save", barrier, _condition_at(barrier, ["python", str(path)]))  # type: ignore[arg-type]
    assert _condition_text(place) == " after `if rank != 0: return` (line 7)"
