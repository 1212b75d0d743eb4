"""GD501: a collective that some ranks of a distributed job reach and others do not."""

from __future__ import annotations

import re
from collections.abc import Iterator
from difflib import SequenceMatcher

from gpudoctor.knowledge.distributed import JOB_TEST_WORDS, SAMPLE_RANKS, WHEN_COLLECTIVE
from gpudoctor.lint.analysis.events import Collective, Event
from gpudoctor.lint.analysis.values import Condition, distinguishes
from gpudoctor.lint.findings import ERROR, WARNING, Finding, Related
from gpudoctor.lint.rules._base import CheckContext, Rule, line_of, related_site

# Collectives compared per flow and rank: a flow with more is compared on its first ones.
_MOST = 400
# How a branch that leaves the block ends: what follows runs on the ranks that get past it.
_EXITS = frozenset({"return", "continue", "break", "raise"})
# A test on an object's own state, made when first needed: ``self.group is None``.
_LAZY_STATE = re.compile(r"(?:not )?self(?:\.\w+)+(?: is (?:not )?None)?")


class CollectiveUnderRankCondition(Rule):
    """## What it does
    Flags a collective of a distributed job — `torch.distributed.barrier`, `all_reduce`,
    `broadcast`, `all_gather`, `new_group`, a distributed checkpoint's `save`, their
    `deepspeed.comm` twins, accelerate's `wait_for_everyone` and `gather`, JAX's
    `multihost_utils`, Horovod's collectives — that runs under a test of the rank
    (`if rank == 0:`, `if dist.get_rank() == 0`, `if args.local_rank in [-1, 0]`,
    `if accelerator.is_main_process`, `if is_main_process():`, or after
    `if rank != 0: return`, or in a function decorated `@rank_zero_only`,
    `@accelerator.on_main_process` or `@master_only`), directly or in a function called
    there, when the ranks that do not take that branch do not reach a collective of the
    same kind instead. Lightning's `Trainer.save_checkpoint` and DeepSpeed's
    `engine.save_checkpoint` count: both must be called on every rank. So do mpi4py's
    `MPI.COMM_WORLD` collectives (`bcast`, `Barrier`, `Allreduce`...; on an unknown object
    named `comm`, those no other library's `comm` has), whose ranks, blocked, wait for ever.
    Accelerate's `save_state` is a collective under DeepSpeed, FSDP or automatic
    checkpoint naming only, which the configuration chooses at run time: a warning.
    Calling a `DistributedDataParallel` model (its forward) broadcasts the module's
    buffers from rank 0 when it has any and `broadcast_buffers` is on (the default), also
    under `torch.no_grad()`: a warning too (`model.module(x)` runs the module alone).

    The ranks are compared in order: the common "rank 0 goes first" pair, where the other
    ranks wait in a `barrier()` before rank 0's work and rank 0 in one after it, is fine.
    A collective on a process group of some ranks only (`group=` other than `None` or
    `group.WORLD`) is not checked, nor are point-to-point `send`/`recv`; a collective of
    the whole job under a test of a rank within a sub-group (`tp_rank == 0`,
    `get_tensor_model_parallel_rank() == 0`, `dist.get_rank(group) == 0`) is.

    ## Why is this bad?
    A collective completes only when every rank of its group calls it. The ranks that
    reach it wait for the others, which never come: the job hangs until the backend's
    timeout (NCCL's watchdog: 10 minutes in recent PyTorch, 30 before; gloo: 30 minutes)
    and then dies with a timeout on a rank that did nothing wrong, far from the `if`
    that caused it. A checkpoint save, an evaluation or a metric that all-reduces,
    written under `if rank == 0:`, is the most reported form.

    ## Example
    ```python
    | if dist.get_rank() == 0:
    |     evaluate(model)  # calls dist.all_reduce(...) inside
    ```

    Use instead:
    ```python
    | metrics = evaluate(model)  # every rank takes part
    | if dist.get_rank() == 0:
    |     print(metrics)
    ```

    ## References
    - [torch.distributed: collective functions](https://pytorch.org/docs/stable/distributed.html#collective-functions)
    - [Accelerate: wait_for_everyone](https://huggingface.co/docs/accelerate/package_reference/accelerator#accelerate.Accelerator.wait_for_everyone)
    - [PyTorch: debugging hangs with the Flight Recorder](https://pytorch.org/tutorials/prototype/flight_recorder_tutorial.html)
    """

    code = "GD501"
    name = "collective-under-rank-condition"
    severity = ERROR
    summary = "A collective reached by some ranks of a distributed job only"
    fix_title = "Call the collective on every rank, outside the rank test"
    INVALID = (
        """\
        | import torch.distributed as dist
        |
        | def save(model, path):
        |     if dist.get_rank() == 0:
        |         # ruleid: GD501
        |         dist.barrier()
        """,
        """\
        | import torch
        | import torch.distributed as dist
        |
        | def evaluate(model, loss):
        |     dist.all_reduce(loss)
        |     return loss
        |
        | def train(model, loss, rank):
        |     if rank == 0:
        |         # ruleid: GD501
        |         evaluate(model, loss)
        """,
        """\
        | import torch.distributed as dist
        |
        | def log_step(loss, local_rank):
        |     if local_rank != 0:
        |         return
        |     # ruleid: GD501
        |     dist.all_reduce(loss)
        """,
        """\
        | from accelerate import Accelerator
        |
        | accelerator = Accelerator()
        | if accelerator.is_main_process:
        |     # ruleid: GD501
        |     accelerator.wait_for_everyone()
        """,
        """\
        | import torch.distributed as dist
        |
        | def step(t, rank):
        |     if rank == 0:
        |         # ruleid: GD501
        |         dist.all_reduce(t)
        |     else:
        |         dist.barrier()
        """,
        """\
        | import torch.distributed as dist
        |
        | def make_groups(ranks, tp_rank):
        |     if tp_rank == 0:
        |         # ruleid: GD501
        |         return dist.new_group(ranks)
        |     return None
        """,
        """\
        | from mpi4py import MPI
        |
        | def load(path):
        |     data = open(path, "rb").read() if MPI.COMM_WORLD.Get_rank() == 0 else None
        |     return MPI.COMM_WORLD.bcast(data)
        |
        | def resume(path):
        |     if MPI.COMM_WORLD.Get_rank() == 0:
        |         # ruleid: GD501
        |         load(path)
        """,
        """\
        | from accelerate import Accelerator
        |
        | accelerator = Accelerator()
        | for epoch in range(3):
        |     if accelerator.is_main_process:
        |         # ruleid: GD501
        |         accelerator.save_state(f"checkpoint-{epoch}")
        """,
        """\
        | import torch
        | import torch.distributed as dist
        | from torch.nn.parallel import DistributedDataParallel as DDP
        |
        | def train(model, batches, rank):
        |     model = DDP(model, device_ids=[rank])
        |     for batch in batches:
        |         model(batch).sum().backward()
        |     if rank == 0:
        |         with torch.no_grad():
        |             # ruleid: GD501
        |             print(model(batches[0]))
        """,
    )
    VALID = (
        """\
        | import torch
        | import torch.distributed as dist
        |
        | def save(model, rank):
        |     dist.barrier()
        |     if rank == 0:
        |         print("saving")
        |         torch.save(model.state_dict(), "model.pt")
        """,
        """\
        | import torch.distributed as dist
        |
        | def prepare(local_rank):
        |     if local_rank not in [-1, 0]:
        |         dist.barrier()  # the other ranks wait for rank 0's download
        |     download()
        |     if local_rank == 0:
        |         dist.barrier()  # rank 0 releases them
        |
        | def download():
        |     pass
        """,
        """\
        | import torch.distributed as dist
        |
        | def share(objects, rank):
        |     if rank == 0:
        |         dist.broadcast_object_list(objects, src=0)
        |     else:
        |         dist.broadcast_object_list(objects, src=0)
        """,
        """\
        | import torch.distributed as dist
        |
        | def reduce_in_group(t, rank, group):
        |     if rank in (0, 1):
        |         dist.all_reduce(t, group=group)
        """,
        """\
        | import torch.distributed as dist
        |
        | def exchange(t, rank):
        |     if rank == 0:
        |         dist.send(t, dst=1)
        |     else:
        |         dist.recv(t, src=0)
        """,
        """\
        | import torch.distributed as dist
        |
        | def maybe_sync(t, world_size):
        |     if world_size > 1:
        |         dist.all_reduce(t)
        """,
        """\
        | from mpi4py import MPI
        |
        | comm = MPI.COMM_WORLD
        |
        | def load(path):
        |     data = open(path, "rb").read() if comm.Get_rank() == 0 else None
        |     return comm.bcast(data, root=0)
        """,
        """\
        | from accelerate import Accelerator
        |
        | accelerator = Accelerator()
        | accelerator.save_state("checkpoint")  # every process: it writes from the main one itself
        | if accelerator.is_main_process:
        |     accelerator.save("notes", "notes.txt")
        """,
        """\
        | import torch
        | from torch.nn.parallel import DistributedDataParallel as DDP
        |
        | def train(model, batches, rank):
        |     model = DDP(model, device_ids=[rank])
        |     for batch in batches:
        |         model(batch).sum().backward()
        |     if rank == 0:
        |         with torch.no_grad():
        |             print(model.module(batches[0]))  # the module alone: no collective
        """,
        """\
        | import torch.distributed as dist
        |
        | def evaluate(model):
        |     return model
        |
        | def load(rank):
        |     # `evaluate` is the function (a flag was meant): the test never holds
        |     if rank == 0 and not evaluate:
        |         dist.barrier()
        """,
    )

    def check(self, ctx: CheckContext) -> Iterator[Finding]:
        reported: set[object] = set()  # where findings are
        for flow in ctx.all_flows():
            collectives = [e for e in flow.events if isinstance(e.effect, Collective) and not e.effect.group]
            if not any(distinguishes(c.ranks) for e in collectives for c in e.ctx.conditions):
                continue
            per_rank = [[e for e in collectives if all(c.takes(rank) for c in e.ctx.conditions)][:_MOST]
                        for rank in SAMPLE_RANKS]
            order = {id(e): i for i, e in enumerate(collectives)}
            if [_kind(e) for e in per_rank[0]] == [_kind(e) for e in per_rank[1]]:
                continue  # every rank reaches the same collectives in the same order
            # What runs on one sample rank only, paired by kind: first within each call
            # (the "rank 0 goes first" pair of one function meets), then what is left of the
            # whole flow (a branch whose helper's barrier meets the other branch's own); what
            # is left then is where the ranks part.
            own = [[e for e in events if _excluding(e, 1 - rank) is not None] for rank, events in enumerate(per_rank)]
            calls = dict.fromkeys(e.ctx.via for events in own for e in events)
            left: tuple[list[Event], list[Event]] = ([], [])
            for call in calls:
                for rank, events in enumerate(_unpaired(*([e for e in events if e.ctx.via == call] for events in own))):
                    left[rank].extend(events)
            rest = _unpaired(*(sorted(events, key=lambda e: order[id(e)]) for events in left))
            # Every collective left over is reported (each line needs changing), once; where
            # the two sides of one test differ (an all_reduce against a barrier), only the
            # first side's, which names the other.
            tests: set[object] = set()
            for rank, events in enumerate(rest):
                other = rest[1 - rank]
                for event in events:
                    condition = _excluding(event, 1 - rank)
                    if condition is None or _undecided_inside(event, condition):
                        continue
                    effect = event.effect
                    assert isinstance(effect, Collective)
                    where = condition.call or effect.site
                    if where in reported or (rank == 1 and condition.site in tests):
                        continue
                    reported.add(where)
                    tests.add(condition.site)
                    yield self._finding(event, condition, other[0] if other else None)

    def _finding(self, event: Event, condition: Condition, instead: Event | None) -> Finding:
        effect = event.effect
        assert isinstance(effect, Collective)
        where = condition.call or effect.site
        related: list[Related] = [related_site(condition.site, "the test on the rank")]
        if condition.call is not None:
            what = f"this call reaches {_api(effect)}() ({line_of(effect.site, where)})"
            related.append(related_site(effect.site, "the collective"))
        else:
            what = f"{_api(effect)}() is reached"
        side = "true" if condition.holds else "false"
        test = f"where `{condition.text}` is {side}"
        if condition.text.startswith("@"):
            test = f"that `{condition.text}` lets through"
        elif condition.text.startswith("if ") and condition.text.rsplit(": ", 1)[-1] in _EXITS:
            test = f"that get past `{condition.text}`"
        other = ""
        if instead is not None and isinstance(instead.effect, Collective):
            other = f"; the other ranks run {_api(instead.effect)}() at {line_of(instead.effect.site, where)} instead"
            related.append(related_site(instead.effect.site, "what the other ranks run instead"))
        conditional = WHEN_COLLECTIVE.get(effect.kind)
        if conditional is not None:  # a collective under some configurations only: a warning
            other += f"; {conditional[0]}"
        # (MPI has no timeout of its own: a job blocked in one waits for ever)
        until = "for ever" if effect.kind.startswith("mpi.") else "until the backend's timeout"
        return self.finding(
            where,
            f"{what} only on the ranks {test} ({line_of(condition.site, where)})"
            f"{other}: a collective completes only when every rank of the job calls it, so the job hangs "
            f"there {until} — call it on every rank, outside the rank test",
            tuple(related),
            severity=WARNING if conditional is not None else None,
            hint=conditional[1] if conditional is not None else None,
        )


def _unpaired(first: list[Event], second: list[Event]) -> tuple[list[Event], list[Event]]:
    """What is left of two ranks' collectives once those of the same kind, in the same
    order, are paired."""
    matcher = SequenceMatcher(None, [_kind(e) for e in first], [_kind(e) for e in second], autojunk=False)
    left: tuple[list[Event], list[Event]] = ([], [])
    for tag, a0, a1, b0, b1 in matcher.get_opcodes():
        if tag != "equal":
            left[0].extend(first[a0:a1])
            left[1].extend(second[b0:b1])
    return left


def _kind(event: Event) -> str:
    effect = event.effect
    assert isinstance(effect, Collective)
    return effect.kind


def _api(effect: Collective) -> str:
    """The collective as a message shows it, without its call parentheses."""
    return effect.api.removesuffix("()")


def _excluding(event: Event, rank: int) -> Condition | None:
    """The test on the rank that keeps ``event`` from running on sample rank ``rank``."""
    for condition in event.ctx.conditions:
        if distinguishes(condition.ranks) and not condition.takes(rank):
            return condition
    return None


def _undecided_inside(event: Event, condition: Condition) -> bool:
    """Is the collective, reached through the call made under ``condition``, reached in the
    called code only on a way the analysis could not decide? That code may take another
    way for that call (``val(model=ema)`` runs ``if model is None: load_data()`` with a
    model): no finding rests on it. A test on the rank, one asking whether the job is
    distributed (``if dist.is_initialized():``), or one on state an object makes once
    (``if self.group is None:``) decides nothing about that."""
    from gpudoctor.lint.frontend.parsed import concrete

    call = condition.call
    if call is None:
        return False
    conditions = event.ctx.conditions
    index = next(i for i, c in enumerate(conditions) if c is condition)
    test, where = concrete(condition.site), concrete(call)
    for inner in conditions[index + 1:]:
        if inner.ranks is not None or any(word in inner.text for word in JOB_TEST_WORDS) or \
                _LAZY_STATE.fullmatch(inner.text):
            continue
        site = concrete(inner.site)
        if site.path == where.path and test.row <= site.row <= where.row:
            continue  # (a test in the caller, inside the branch: code there runs when it holds)
        return True
    return False
