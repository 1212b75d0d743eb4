"""Distributed jobs: tests on the rank evaluated for sample ranks (analysis/ranks.py), and
GD501 on the shapes real training code takes — the hazard and its look-alikes."""

from __future__ import annotations

import libcst as cst
import pytest

from gpudoctor.lint.analysis.ranks import samples
from tests.conftest import codes_at


@pytest.mark.parametrize(("test", "expected"), [
    ("rank == 0", (True, False)),
    ("rank != 0", (False, True)),
    ("rank > 0", (False, True)),
    ("args.local_rank in [-1, 0]", (True, False)),
    ("args.local_rank not in (-1, 0)", (False, True)),
    ("dist.get_rank() == 0", (True, False)),
    ("torch.distributed.get_rank() == 1", (False, True)),
    ("self.global_rank == 0", (True, False)),
    ("accelerator.is_main_process", (True, False)),
    ("not accelerator.is_local_main_process", (False, True)),
    ("self.trainer.is_global_zero", (True, False)),
    ("is_main_process()", (True, False)),
    ("jax.process_index() == 0", (True, False)),
    ("hvd.rank() == 0", (True, False)),
    ('int(os.environ["RANK"]) == 0', (True, False)),
    ('int(os.environ.get("LOCAL_RANK", 0)) == 0', (True, False)),
    ("rank == world_size - 1", (False, True)),
    ("rank % 2 == 0", (True, False)),
    ("rank == 0 and epoch % 10 == 0", (None, False)),
    ("rank == 0 or verbose", (True, None)),
    # The same on every sample: not a branch some ranks take and others skip.
    ("args.local_rank == -1", (False, False)),
    ("rank < 4", (True, True)),
    # Not read as a test on the rank.
    ("world_size > 1", None),
    ("rank in ranks_to_log", None),
    ("dist.get_rank(group) == 0", (True, False)),
    ("tp_rank == 0", (True, False)),
    ("mpu.get_tensor_model_parallel_rank() == 0", (True, False)),
    ("self.lora_rank > 0", None),
    ("np.rank(x) == 0", None),
    ("rank is None", None),
    ("epoch % 10 == 0", None),
    ("dist.is_initialized()", None),
])
def test_a_test_is_evaluated_for_each_sample_rank(test: str, expected: tuple[bool | None, ...] | None) -> None:
    assert samples(cst.parse_expression(test)) == expected


HEAD = "import torch\nimport torch.distributed as dist\n\n"


def _rows(source: str, marker: str = "# here") -> set[int]:
    return {i for i, line in enumerate(source.splitlines(), 1) if line.rstrip().endswith(marker)}


# Each case: a program whose rows marked "# here" are where GD501 must be reported, and
# nowhere else.
CASES = {
    "barrier under rank 0": """
def save(model, rank):
    if rank == 0:
        torch.save(model.state_dict(), "m.pt")
        dist.barrier()  # here
""",
    "through a helper": """
def evaluate(model, loss):
    dist.all_reduce(loss)
    return loss

def train(model, loss, rank):
    if rank == 0:
        evaluate(model, loss)  # here
    evaluate(model, loss)
""",
    "early return": """
def log(loss):
    if dist.get_rank() != 0:
        return
    dist.all_reduce(loss)  # here
""",
    "continue in a loop": """
def loop(batches, rank):
    for batch in batches:
        if rank != 0:
            continue
        dist.broadcast(batch, src=0)  # here
""",
    "mismatched kinds": """
def step(t, rank):
    if rank == 0:
        dist.all_reduce(t)  # here
    else:
        dist.all_gather([t], t)
""",
    "a loop of collectives under the test": """
def sync(ts, rank):
    if rank == 0:
        for t in ts:
            dist.all_reduce(t)  # here
""",
    "new_group on some ranks": """
def groups(rank):
    if rank < 1:
        return dist.new_group([0])  # here
    return None
""",
    "zero first (balanced)": """
from contextlib import contextmanager

@contextmanager
def zero_first(local_rank):
    if local_rank not in [-1, 0]:
        dist.barrier()
    yield
    if local_rank == 0:
        dist.barrier()

def load(local_rank):
    with zero_first(local_rank):
        data = [1, 2]
    return data
""",
    "balanced early return": """
def save(model, rank):
    if rank != 0:
        dist.barrier()
        return
    torch.save(model.state_dict(), "m.pt")
    dist.barrier()
""",
    "both branches": """
def share(objs, rank):
    if rank == 0:
        dist.broadcast_object_list(objs, src=0)
    else:
        dist.broadcast_object_list(objs, src=0)
""",
    "a sub-group": """
def part(t, rank, group):
    if rank == 0:
        dist.all_reduce(t, group=group)
        dist.barrier(group)
""",
    "the whole job's group named": """
def whole(t, rank):
    if rank == 0:
        dist.all_reduce(t, group=dist.group.WORLD)  # here
""",
    "point to point": """
def exchange(t, rank):
    if rank == 0:
        dist.send(t, dst=1)
    else:
        dist.recv(t, src=0)
""",
    "only printing and saving under the test": """
def report(model, loss, rank):
    dist.all_reduce(loss)
    if rank == 0:
        print(loss.item())
        torch.save(model.state_dict(), "m.pt")
""",
    "a test that is not on the rank": """
def maybe(t, args):
    if args.local_rank == -1:
        return t
    dist.all_reduce(t)
    return t
""",
    "a test the analysis cannot read": """
def chosen(t, rank, ranks):
    if rank in ranks:
        dist.all_reduce(t)
""",
}


@pytest.mark.parametrize("name", CASES)
def test_gd501_on_the_shapes_of_training_code(lint_source, name: str) -> None:  # type: ignore[no-untyped-def]
    source = HEAD + CASES[name].lstrip("\n")
    found = {row for code, row in codes_at(lint_source(source, select=["GD501"])) if code == "GD501"}
    assert found == _rows(source)


def test_a_spawned_worker_and_a_helper_module(lint_source) -> None:  # type: ignore[no-untyped-def]
    files = {
        "pkg/__init__.py": "",
        "pkg/dist_utils.py": """\
            import torch.distributed as dist

            def get_rank():
                if not dist.is_initialized():
                    return 0
                return dist.get_rank()

            def is_main_process():
                return get_rank() == 0

            def reduce_dict(d):
                dist.all_reduce(d)
                return d
            """,
        "pkg/train.py": """\
            import torch
            import torch.distributed as dist
            import torch.multiprocessing as mp

            from pkg import dist_utils

            def run(rank, world_size):
                dist.init_process_group("gloo", rank=rank, world_size=world_size)
                loss = torch.zeros(1)
                if dist_utils.is_main_process():
                    print(dist_utils.reduce_dict(loss))
                dist.destroy_process_group()

            if __name__ == "__main__":
                mp.spawn(run, args=(2,), nprocs=2)
            """,
    }
    findings = [f for f in lint_source(files, select=["GD501"]) if f.code == "GD501"]
    assert [(f.site.path.rsplit("/", 1)[-1], f.site.row) for f in findings] == [("train.py", 11)]
    message = findings[0].message
    assert "dist_utils.py:12" in message and "`dist_utils.is_main_process()` is true (line 10)" in message
    assert [r.message for r in findings[0].related] == ["the test on the rank", "the collective"]


def test_accelerate_and_jax(lint_source) -> None:  # type: ignore[no-untyped-def]
    source = """\
        from accelerate import Accelerator
        import jax
        from jax.experimental import multihost_utils

        def main(model, helper):
            accelerator = Accelerator()
            if accelerator.is_main_process:
                accelerator.wait_for_everyone()  # here
            if jax.process_index() == 0:
                multihost_utils.sync_global_devices("saved")  # here

        def passed_in(accelerator):
            if not accelerator.is_main_process:
                return
            accelerator.wait_for_everyone()  # here
        """
    import textwrap

    found = {row for code, row in codes_at(lint_source(source, select=["GD501"])) if code == "GD501"}
    assert found == _rows(textwrap.dedent(source))


def test_a_wrapped_model_and_the_module_it_wraps(lint_source) -> None:  # type: ignore[no-untyped-def]
    # Calling a DistributedDataParallel model is a collective (its forward broadcasts the
    # buffers); its ``.module``, reached directly or through an unwrapping helper, is not.
    source = """\
        import torch
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel

        def wrap(model, world_size):
            return DistributedDataParallel(model) if world_size > 1 else model

        def unwrap(model):
            return model.module if hasattr(model, "module") else model

        def plain(model):
            return model.module if isinstance(model, DistributedDataParallel) else model

        def evaluate(model):
            with torch.no_grad():
                return model(torch.ones(2))

        def train(model, rank):
            model = wrap(model, dist.get_world_size())
            model(torch.ones(2)).sum().backward()
            if rank == 0:
                evaluate(unwrap(model))
            if rank == 0:
                evaluate(plain(model))
            if rank == 0:
                evaluate(model.module)
            if rank == 0:
                evaluate(model)  # here
        """
    import textwrap

    findings = [f for f in lint_source(source, select=["GD501"]) if f.code == "GD501"]
    assert {f.site.row for f in findings} == _rows(textwrap.dedent(source))
    assert all(f.severity == "warning" for f in findings)


def test_an_early_exit_is_named_as_written(lint_source) -> None:  # type: ignore[no-untyped-def]
    source = HEAD + """\
def log(loss, local_rank):
    if local_rank != 0:
        return
    dist.all_reduce(loss)
"""
    found = [f for f in lint_source(source, select=["GD501"])]
    assert [f.site.row for f in found] == [7]
    assert "only on the ranks that get past `if local_rank != 0: return` (line 5)" in found[0].message


def test_an_exit_nested_in_a_rank_branch_makes_what_follows_rank_dependent(lint_source) -> None:  # type: ignore[no-untyped-def]
    # VLMEvalKit's run.py: rank 0 evaluates, and skips the rest of the loop for some
    # datasets; the others reach the barrier every time.
    source = HEAD + """\
def run(names, mode, rank):
    for name in names:
        if rank == 0:
            if mode == "infer":
                continue
            print(name)
        dist.barrier()


def only_inner_loops_and_errors(names, rank):
    for name in names:
        if rank == 0:
            for other in names:
                if other == name:
                    continue
            if not names:
                raise ValueError(name)
        dist.barrier()
"""
    found = [f for f in lint_source(source, select=["GD501"])]
    assert [f.site.row for f in found] == [10]
    assert "only on the ranks that get past `if rank == 0: ...: continue` (line 6)" in found[0].message


def test_rank_tests_leave_other_rules_alone(lint_source) -> None:  # type: ignore[no-untyped-def]
    """What follows ``if rank != 0: return`` is still analysed for the other rules."""
    source = """\
        import multiprocessing as mp
        import torch

        def work(i):
            return torch.ones(i, device="cuda").sum().item()

        def main(rank):
            torch.cuda.init()
            if rank != 0:
                return
            with mp.get_context("fork").Pool(2) as pool:
                pool.map(work, [1])

        if __name__ == "__main__":
            main(0)
        """
    findings = [f for f in lint_source(source) if f.code == "GD101"]
    assert [f.site.row for f in findings] == [11]


def test_a_helper_barrier_meets_the_other_branch(lint_source) -> None:  # type: ignore[no-untyped-def]
    source = HEAD + """\
def save_and_sync(model):
    torch.save(model.state_dict(), "m.pt")
    dist.barrier()

def save(model, rank):
    if rank == 0:
        save_and_sync(model)
    else:
        dist.barrier()
"""
    assert not lint_source(source, select=["GD501"])


def test_two_programs_in_one_flow_are_paired_call_by_call(lint_source) -> None:  # type: ignore[no-untyped-def]
    """A test module running two training scripts: each script's "rank 0 first" pairs meet
    within the script, and the one unbalanced evaluation is the one reported."""
    script = HEAD + """\
def load(args, evaluate):
    if args.local_rank not in [-1, 0] and not evaluate:
        dist.barrier()
    data = [1]
    if args.local_rank == 0 and not evaluate:
        dist.barrier()
    return data

def main(args):
    if args.local_rank not in [-1, 0]:
        dist.barrier()
    model = 1
    if args.local_rank == 0:
        dist.barrier()
    load(args, evaluate=False)
    if args.do_eval and args.local_rank in [-1, 0]:
        evaluate(args)  # {mark}

def evaluate(args):
    dist.barrier()
"""
    files = {"first.py": script.format(mark="here"), "second.py": script.format(mark="there"),
             "run_all.py": "import first\nimport second\n\ndef test_all(args):\n    first.main(args)\n"
                           "    second.main(args)\n"}
    found = {(f.site.path.rsplit("/", 1)[-1], f.site.row) for f in lint_source(files, select=["GD501"])}
    row = next(i for i, line in enumerate(script.splitlines(), 1) if "{mark}" in line)
    assert found == {("first.py", row), ("second.py", row)}


def test_lightning_rank_zero_only_and_save_checkpoint(lint_source) -> None:  # type: ignore[no-untyped-def]
    """The shape of a real Lightning hang: a Trainer subclass whose ``save_checkpoint``
    override runs on rank 0 only (Lightning's own ``save_checkpoint`` ends in a barrier)."""
    source = """\
        import pytorch_lightning as pl
        from pytorch_lightning.utilities import rank_zero_only

        class Trainer(pl.Trainer):
            @rank_zero_only
            def save_checkpoint(self, filepath, weights_only=False):
                super().save_checkpoint(filepath, weights_only)  # here

        class Model(pl.LightningModule):
            def validation_step(self, batch, index):
                loss = self(batch)
                if self.trainer.is_global_zero:
                    self.log("val_loss", loss, sync_dist=True)  # here
                    self.trainer.save_checkpoint("last.ckpt")  # here
                self.log("val_loss_all", loss, sync_dist=True)
                return loss

        def fit(trainer, model):
            if trainer.is_global_zero:
                print("saving")
                trainer.save_checkpoint("m.ckpt")  # here
        """
    import textwrap

    findings = [f for f in lint_source(source, select=["GD501"]) if f.code == "GD501"]
    assert {f.site.row for f in findings} == _rows(textwrap.dedent(source))
    decorated = next(f for f in findings if f.site.row == 7)
    assert "that `@rank_zero_only` lets through (line 5)" in decorated.message


def test_gd502_with_deepspeed_and_spawned_workers(lint_source) -> None:  # type: ignore[no-untyped-def]
    source = """\
        import deepspeed
        import torch
        import torch.distributed as dist
        import torch.multiprocessing as mp

        def load(local_rank):
            deepspeed.init_distributed("nccl")
            dist.barrier()  # here

        def worker(rank, world_size):
            dist.init_process_group("nccl", rank=rank, world_size=world_size)
            names = [None] * world_size
            dist.all_gather_object(names, "x")  # here
            dist.barrier()

        def good(rank, world_size):
            dist.init_process_group("nccl", rank=rank, world_size=world_size)
            torch.cuda.set_device(rank)
            dist.barrier()

        if __name__ == "__main__":
            mp.spawn(worker, args=(2,), nprocs=2)
            mp.spawn(good, args=(2,), nprocs=2)
        """
    import textwrap

    found = {row for code, row in codes_at(lint_source(source, select=["GD502"])) if code == "GD502"}
    assert found == _rows(textwrap.dedent(source))


def test_gd503_after_a_helper_module_started_the_runtime(lint_source) -> None:  # type: ignore[no-untyped-def]
    files = {
        "helpers.py": """\
            import tensorflow as tf

            def has_gpu():
                return len(tf.config.list_logical_devices("GPU")) > 0
            """,
        "main.py": """\
            import tensorflow as tf

            import helpers

            def main():
                if helpers.has_gpu():
                    print("GPU")
                strategy = tf.distribute.MultiWorkerMirroredStrategy()
                return strategy

            if __name__ == "__main__":
                main()
            """,
    }
    findings = [f for f in lint_source(files, select=["GD503", "GD302"])]
    assert [(f.code, f.site.row) for f in findings] == [("GD503", 8)]
    assert "helpers.py:4" in findings[0].message


@pytest.mark.parametrize(("source", "acts"), [
    ("import torch.distributed as dist\n\ndef f():\n    dist.barrier()\n", True),
    ("from torch import distributed\n\ndef f(t):\n    distributed.all_reduce(t)\n", True),
    ("import torch.distributed as dist\n\ndef f(t):\n    dist.broadcast(t, 0)\n", True),
    # A tensor's own gather is no collective.
    ("import torch\n\ndef f(x, i):\n    return x.gather(0, i)\n", False),
    ("import tensorflow as tf\n\ndef f(t):\n    return tf.distribute.MultiWorkerMirroredStrategy()\n", True),
    # TensorFlow's own all_reduce and checkpoint.save are not in the tables: nothing to lint.
    ("import tensorflow as tf\n\ndef f(ctx, t):\n    return ctx.all_reduce('sum', t)\n", False),
    ("import tensorflow as tf\n\ndef f(checkpoint):\n    checkpoint.save('x')\n", False),
    # Naming the strategy is not making one.
    ("import tensorflow as tf\n\ndef f(s):\n    return isinstance(s, tf.distribute.MultiWorkerMirroredStrategy)\n",
     False),
])
def test_the_gate_reads_collectives_only_where_they_can_be(source: str, acts: bool) -> None:
    import ast

    from gpudoctor.lint.frontend.prescan import Prescan
    from gpudoctor.lint.frontend.text_facts import mentioned_words, mentions_acts, mentions_collectives

    if acts:  # the text gate lets through what the prescan confirms
        assert mentions_acts(source, mentioned_words(source)) or mentions_collectives(source)
    assert Prescan(source, ast.parse(source)).acts is acts
