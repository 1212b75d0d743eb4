"""GD502: an NCCL collective on "the current device" before the process chose its GPU."""

from __future__ import annotations

from collections.abc import Iterator

from gpudoctor.knowledge.distributed import CURRENT_DEVICE_KINDS, DEVICE_CHOICES, DEVICE_VARIABLE
from gpudoctor.lint.analysis.events import Collective, DeviceChoice, EnvWrite, Event, Init, ProcessGroupInit
from gpudoctor.lint.findings import WARNING, Finding
from gpudoctor.lint.rules._base import CheckContext, Rule, line_of, related_site


class CollectiveBeforeDeviceChosen(Rule):
    """## What it does
    Flags `torch.distributed.barrier()` and the object collectives (`all_gather_object`,
    `gather_object`, `broadcast_object_list`, `scatter_object_list`) made as the first
    collectives of a group made by `init_process_group("nccl")` (or DeepSpeed's
    `init_distributed()`, NCCL on a GPU machine) when the process has not chosen its GPU
    yet: no
    `torch.cuda.set_device(...)` (or `with torch.cuda.device(...)`) before them,
    no `device_id=` given to `init_process_group`, no `device_ids=` to `barrier`, and
    `CUDA_VISIBLE_DEVICES` not set by the program.

    ## Why is this bad?
    With NCCL these calls need a device and have no tensor to take it from. PyTorch
    2.11-2.13 run them on the *current* CUDA device, which is GPU 0 until the process sets
    another: every rank of a machine creates a CUDA context on GPU 0 and runs the
    collective there, so GPU 0 runs out of memory, NCCL refuses two ranks on one device,
    or the barrier hangs. PyTorch only warns ("barrier(): using the device under current
    context"). Earlier releases guessed the device from the rank ("using GPU N to perform
    barrier as devices used by this process are currently unknown. This can potentially
    cause a hang if this rank to GPU mapping is incorrect"), or took the device of an
    earlier collective of tensors; a barrier after such a collective is given that benefit
    of the doubt.

    A launcher that gives each rank one GPU through `CUDA_VISIBLE_DEVICES` (some SLURM
    setups) makes GPU 0 the right one; gpudoctor cannot see that, so this is a warning.

    ## Example
    ```python
    | dist.init_process_group("nccl")
    | dist.barrier()
    ```

    Use instead:
    ```python
    | local_rank = int(os.environ["LOCAL_RANK"])
    | torch.cuda.set_device(local_rank)
    | dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank))
    | dist.barrier()
    ```

    ## References
    - [torch.distributed.barrier](https://pytorch.org/docs/stable/distributed.html#torch.distributed.barrier)
    - [torch.distributed.init_process_group: device_id](https://pytorch.org/docs/stable/distributed.html#torch.distributed.init_process_group)
    """

    code = "GD502"
    name = "collective-before-device-chosen"
    severity = WARNING
    summary = "An NCCL collective on the current device before the process chose its GPU"
    fix_title = "Call torch.cuda.set_device(local_rank) (or pass device_id=) before the first collective"
    INVALID = (
        """\
        | import deepspeed
        | import torch.distributed as dist
        |
        | def main():
        |     deepspeed.init_distributed()  # NCCL on a GPU machine
        |     # ruleid: GD502
        |     dist.barrier()
        """,
        """\
        | import torch.distributed as dist
        |
        | def main():
        |     dist.init_process_group("nccl")
        |     # ruleid: GD502
        |     dist.barrier()
        """,
        """\
        | import torch.distributed as dist
        |
        | def main(rank, world_size):
        |     dist.init_process_group(backend="nccl", rank=rank, world_size=world_size)
        |     objects = [None]
        |     # ruleid: GD502
        |     dist.broadcast_object_list(objects, src=0)
        """,
    )
    VALID = (
        """\
        | import os
        | import torch
        | import torch.distributed as dist
        |
        | def main():
        |     local_rank = int(os.environ["LOCAL_RANK"])
        |     torch.cuda.set_device(local_rank)
        |     dist.init_process_group("nccl")
        |     dist.barrier()
        """,
        """\
        | import torch
        | import torch.distributed as dist
        |
        | def main(local_rank):
        |     dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank))
        |     dist.barrier()
        """,
        """\
        | import torch.distributed as dist
        |
        | def main(local_rank):
        |     dist.init_process_group("nccl")
        |     dist.barrier(device_ids=[local_rank])
        """,
        """\
        | import torch.distributed as dist
        |
        | def main():
        |     dist.init_process_group("gloo")
        |     dist.barrier()
        """,
        """\
        | import deepspeed
        | import torch.distributed as dist
        | from deepspeed import get_accelerator
        |
        | def main(local_rank):
        |     get_accelerator().set_device(local_rank)
        |     deepspeed.init_distributed()
        |     dist.barrier()
        """,
        """\
        | import os
        | import torch.distributed as dist
        |
        | def main(local_rank):
        |     os.environ["CUDA_VISIBLE_DEVICES"] = str(local_rank)
        |     dist.init_process_group("nccl")
        |     dist.barrier()
        """,
    )

    def check(self, ctx: CheckContext) -> Iterator[Finding]:
        reported: set[object] = set()
        for flow in ctx.all_flows():
            group: Event | None = None  # an NCCL group made without a device
            chosen = False  # the device was chosen (on whatever condition: the benefit of the doubt)
            for event in flow.events:
                effect = event.effect
                if (isinstance(effect, Init) and effect.api in DEVICE_CHOICES) or isinstance(effect, DeviceChoice) or \
                        (isinstance(effect, EnvWrite) and effect.var == DEVICE_VARIABLE):
                    chosen, group = True, None
                elif isinstance(effect, ProcessGroupInit):
                    nccl = effect.backend is not None and "nccl" in effect.backend.lower()
                    group = event if nccl and not effect.device and not chosen else None
                elif group is None:
                    continue
                elif isinstance(effect, Collective) and effect.kind not in CURRENT_DEVICE_KINDS:
                    group = None  # a collective of tensors: the group runs on their device from now on
                elif isinstance(effect, Collective) and not effect.device and not effect.group and \
                        effect.site not in reported:
                    reported.add(effect.site)
                    made = group.effect
                    assert isinstance(made, ProcessGroupInit)
                    yield self.finding(
                        effect.site,
                        f"{effect.api}() runs on the current CUDA device, and this process has not chosen one "
                        f"since the NCCL process group was made ({line_of(made.site, effect.site)}, without "
                        f"device_id=): every rank of the machine uses GPU 0 for it, which crowds GPU 0 or hangs — "
                        f"call torch.cuda.set_device(local_rank) before it, or pass device_id= to "
                        f"init_process_group",
                        (related_site(made.site, "the process group, made without a device"),),
                    )
                    group = None  # once per group
