"""Tensors sent through a torch.multiprocessing Queue by a producer that has already exited.

Report: https://github.com/pytorch/pytorch/issues/65418 ("Sending tensors from short-lived
multiprocessing process fails on Linux"); duplicate https://github.com/pytorch/pytorch/issues/70536.

An actor process generates rollouts (observation tensors) and puts them on a bounded
``torch.multiprocessing.Queue``; the learner in the parent takes them one at a time and does
a training step between gets, so it is slower than the actor. With the default
``file_descriptor`` sharing strategy a queued tensor carries only a handle: the receiving
process must fetch the storage's file descriptor from the sending process (its
resource_sharer thread) at ``get()`` time. The actor puts its last rollout and returns, so
its process exits while ~20 rollouts are still in the queue; the learner's next ``get()``
tries to fetch the descriptor from the exiting/dead actor and fails in
``rebuild_storage_fd`` -> ``resource_sharer.get_connection`` (``FileNotFoundError``,
``ConnectionRefusedError``, ``ConnectionResetError`` or ``EOFError``, depending on how far
the actor's exit has got), crashing the parent with exit status 1 after a few seconds.
Fix from the reports: keep the producer alive until the consumer has received everything
(e.g. wait on an Event / join from the consumer side), or
``torch.multiprocessing.set_sharing_strategy("file_system")``, or send numpy arrays /
``tensor.numpy()`` copies instead of shared tensors.
"""
import time

import torch
import torch.multiprocessing as mp

N_ROLLOUTS = 60


def actor(queue):
    for step in range(N_ROLLOUTS):
        obs = torch.randn(64, 84)
        queue.put((step, obs))
    queue.put((None, None))                    # sentinel, then the actor exits


if __name__ == "__main__":
    queue = mp.Queue(maxsize=20)
    proc = mp.Process(target=actor, args=(queue,), daemon=True)
    proc.start()
    policy = torch.nn.Linear(84, 4)
    opt = torch.optim.SGD(policy.parameters(), lr=1e-3)
    seen = 0
    while True:
        step, obs = queue.get()
        if step is None:
            break
        loss = policy(obs).logsumexp(1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        seen += 1
        time.sleep(0.1)                        # the learner is slower than the actor
    print("learned from", seen, "rollouts")
