"""GD107: a forked DataLoader worker touches the GPU."""

from __future__ import annotations

from collections.abc import Iterator

from gpudoctor.knowledge.registry import DATALOADER_FRAMEWORK
from gpudoctor.lint.analysis.events import DataLoaderStart, DefaultDevice, Init
from gpudoctor.lint.analysis.flows import first_gpu_use
from gpudoctor.lint.findings import ERROR, Finding
from gpudoctor.lint.rules._base import CheckContext, Rule, line_of, related_site


class GpuWorkInDataloaderWorker(Rule):
    """## What it does
    Flags a `torch.utils.data.DataLoader` with `num_workers > 0` whose workers are
    forked (the default on Linux up to Python 3.13, unless `multiprocessing_context`
    says otherwise) when worker-side code touches the GPU: the Dataset's
    `__getitem__`/`__iter__`, `collate_fn`, `worker_init_fn`, or a CUDA default device
    set with `torch.set_default_device("cuda")` before the loader is built.

    ## Why is this bad?
    DataLoader workers are forked from the training process, which has almost always
    initialized CUDA by then: the first CUDA call in a worker raises "Cannot
    re-initialize CUDA in forked subprocess". Even when it does not, every worker
    creates its own CUDA context and takes GPU memory for it.

    ## Example
    ```python
    | class Images(Dataset):
    |     def __getitem__(self, i):
    |         return self.data[i].cuda()
    |
    | loader = DataLoader(Images(), num_workers=4)
    ```

    Use instead:
    ```python
    | class Images(Dataset):
    |     def __getitem__(self, i):
    |         return self.data[i]
    |
    | loader = DataLoader(Images(), num_workers=4, pin_memory=True)
    | for batch in loader:
    |     batch = batch.cuda(non_blocking=True)
    ```

    ## References
    - [PyTorch: multi-process data loading](https://pytorch.org/docs/stable/data.html#multi-process-data-loading)
    """

    code = "GD107"
    name = "gpu-work-in-dataloader-worker"
    severity = ERROR
    summary = "Forked DataLoader workers use the GPU"
    fix_title = "Keep DataLoader workers on the CPU; move batches to the GPU in the training loop"
    INVALID = (
        """\
        | import torch
        | from torch.utils.data import DataLoader, Dataset
        |
        | class Cached(Dataset):
        |     def __len__(self):
        |         return 10
        |
        |     def __getitem__(self, i):
        |         return torch.full((3,), i).cuda()
        |
        | def main():
        |     # ruleid: GD107
        |     return DataLoader(Cached(), batch_size=2, num_workers=2)
        """,
        """\
        | import torch
        | from torch.utils.data import DataLoader
        |
        | def to_gpu(batch):
        |     return torch.stack(batch).to("cuda")
        |
        | def main(ds):
        |     # ruleid: GD107
        |     return DataLoader(ds, num_workers=4, collate_fn=to_gpu)
        """,
    )
    VALID = (
        """\
        | import torch
        | from torch.utils.data import DataLoader, Dataset
        |
        | class Cached(Dataset):
        |     def __getitem__(self, i):
        |         return torch.full((3,), i)
        |
        | def main():
        |     for batch in DataLoader(Cached(), num_workers=2):
        |         batch.cuda()
        """,
        """\
        | import torch
        | from torch.utils.data import DataLoader, Dataset
        |
        | class Cached(Dataset):
        |     def __getitem__(self, i):
        |         return torch.full((3,), i).cuda()
        |
        | def main():
        |     return DataLoader(Cached(), num_workers=2, multiprocessing_context="spawn")
        """,
        """\
        | import numpy as np
        | import torch
        | from torch.utils.data import DataLoader
        |
        | def seed_worker(worker_id):
        |     np.random.seed(torch.initial_seed() % 2**32)
        |
        | def main(ds):
        |     # the worker code seeds NumPy only; pinning is done by the parent's pin thread
        |     return DataLoader(ds, num_workers=4, worker_init_fn=seed_worker, pin_memory=True,
        |                       persistent_workers=True)
        """,
    )

    def check(self, ctx: CheckContext) -> Iterator[Finding]:
        for site in ctx.process_starts():
            effect, state, child = site.start, site.parent, site.child
            if not isinstance(effect, DataLoaderStart) or effect.workers == 0 or site.method != "fork":
                continue
            # A setting gpudoctor cannot read (``num_workers=cfg.workers``): the hazard is
            # there whenever it is above 0.
            forks = f"forks {effect.workers} workers" if effect.workers else \
                "forks its workers (when num_workers is above 0)"
            use = first_gpu_use(child, DATALOADER_FRAMEWORK) if child is not None else None
            if use is not None:
                init = use.effect
                assert isinstance(init, Init)
                yield self.finding(
                    effect.site,
                    f"DataLoader {forks}, whose code uses CUDA "
                    f"({init.api}, {line_of(init.site, effect.site)}); in a forked worker that fails with "
                    '"Cannot re-initialize CUDA in forked subprocess"',
                    (related_site(init.site, "the worker uses CUDA here"),),
                )
            elif state.default_cuda is not None:
                device = state.default_cuda.effect
                assert isinstance(device, DefaultDevice)
                yield self.finding(
                    effect.site,
                    f"DataLoader {forks} after the default device was "
                    "set to CUDA; tensors the workers create go to the GPU",
                    (related_site(device.site, "default device set to CUDA here"),),
                )
