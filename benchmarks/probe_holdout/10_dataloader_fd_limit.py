"""DataLoader workers share each tensor by file descriptor; the parent keeps them all and
runs out of descriptors: "RuntimeError: received 0 items of ancdata" / "Too many open files".

Modelled on pytorch/pytorch#973 ("file_descriptor sharing strategy may be leaking FDs,
resulting in DataLoader causing RuntimeError: received 0 items of ancdata",
https://github.com/pytorch/pytorch/issues/973), pytorch/pytorch#11201 ("Too many open files
error": keeping the loader's tensors in a list) and pytorch/pytorch#41465. With
num_workers > 0 and the default "file_descriptor" sharing strategy each tensor a worker
returns travels as an open fd (a /dev/shm segment) that stays open while the tensor lives;
the loop appends every batch's tensors to a list, so open fds grow by several per batch
until the process's limit (set to 256 here, as a small `ulimit -n` in a container; with
the usual 1024 it only takes longer) is reached and the DataLoader raises RuntimeError
("received 0 items of ancdata" or "Too many open fds ... consider ulimit -n ... or
set_sharing_strategy('file_system')") at the `for batch in loader:` line; exit status 1.
The fixes the reporters used: torch.multiprocessing.set_sharing_strategy("file_system"),
raise `ulimit -n`, or keep copies (`.numpy().copy()` / `.clone()`) instead of the shared
tensors.
"""
import resource

import torch
from torch.utils.data import DataLoader, Dataset

resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))


class Samples(Dataset):
    def __len__(self):
        return 100_000

    def __getitem__(self, i):
        return {"features": torch.zeros(8), "label": torch.tensor(i)}


if __name__ == "__main__":
    loader = DataLoader(Samples(), batch_size=4, num_workers=2)
    kept = []
    for batch in loader:
        kept.append(batch["features"])
        kept.append(batch["label"])
    print(len(kept))
