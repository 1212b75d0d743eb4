"""Keeping DataLoader output tensors in a list exhausts file descriptors: "Too many open files".

Report: https://github.com/pytorch/pytorch/issues/11201 (also
https://github.com/pytorch/pytorch/issues/973 and https://github.com/SBU-BMI/wsinfer/pull/182).

A DataLoader with worker processes (``num_workers=2``) sends each batch's tensors to the
main process through shared memory; with the default ``file_descriptor`` sharing strategy
every received storage keeps a file descriptor open for as long as the tensor lives. The
loop appends each batch's ``index`` tensor to a Python list, so descriptors accumulate
until the open-files limit (``ulimit -n``; set here to 256 to stand for a typical default
of 1024 with a bigger dataset) is reached. The main process then fails in
``DataLoader._try_get_data`` with ``RuntimeError: Too many open files. Communication with
the workers is no longer possible. Please increase the limit using `ulimit -n` ... or change
the sharing strategy ... 'file_system'``, and the workers are shut down. Fix from the
thread: do not keep the worker-produced tensors (store ``.item()``/``.clone()``/a NumPy
copy), or ``torch.multiprocessing.set_sharing_strategy('file_system')``, or raise
``ulimit -n``.
"""
import resource

import torch
from torch.utils.data import DataLoader, Dataset

resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))


class Samples(Dataset):
    def __len__(self):
        return 100000

    def __getitem__(self, index):
        return {"index": index, "x": torch.randn(4)}


if __name__ == "__main__":
    loader = DataLoader(Samples(), batch_size=1, num_workers=2)
    seen = []
    for batch in loader:
        seen.append(batch["index"])
    print(len(seen))
