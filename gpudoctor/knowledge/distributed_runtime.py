"""Distributed jobs as the probe sees them running: where a rank waiting in a collective
is in its stack, which launcher started the ranks, and what ends such a wait.

The probe's own modules stay framework-neutral (``probe/ranks.py``,
``probe/explain_ranks.py``); the names of the frameworks' files, launchers and settings
live here. The collectives' names and the tests that tell ranks apart are the linter's
(``gpudoctor/knowledge/distributed.py``), read by the probe too.

Sources, read in the torch 2.13.0 CPU wheel:
- ``torch/distributed/distributed_c10d.py``: every collective (``barrier``, ``all_reduce``,
  ``broadcast``, ``all_gather``, ...) is a function of this file, wrapped by
  ``c10d_logger._exception_logger``; a rank waiting in one shows it as the outermost frame
  of this file in a py-spy dump (``barrier (torch/distributed/distributed_c10d.py:5356)``
  above ``c10d::Work::wait``).
- ``torch/csrc/distributed/c10d/ProcessGroup.hpp`` and ``Backend.hpp``:
  ``kProcessGroupDefaultTimeout`` and ``kBackendDefaultTimeout`` are 30 minutes (gloo and
  the other backends); ``ProcessGroupNCCL.hpp``: ``kProcessGroupNCCLDefaultTimeout`` is 10
  minutes, enforced by NCCL's watchdog while ``TORCH_NCCL_ASYNC_ERROR_HANDLING`` is on (the
  default) or ``TORCH_NCCL_BLOCKING_WAIT=1``.
- ``torch/distributed/elastic/agent/server/api.py`` and ``local_elastic_agent.py``: the
  torchrun agent polls its workers and, when one fails, stops the others (SIGTERM, then
  SIGKILL) and reports the first failure as the "Root Cause".
- ``TORCH_DISTRIBUTED_DEBUG=DETAIL`` wraps each process group so that ranks check that
  they call the same collective with the same shapes before running it
  (``ProcessGroupWrapper``), which turns a mismatch into an error.
"""

from __future__ import annotations

# Files whose frames are a collective's own: the outermost such frame names the
# collective the rank waits in (its function name).
COLLECTIVE_FILES = ("torch/distributed/distributed_c10d.py",)
# Files of wrappers that run collectives of their own (torch 2.13 ``torch/nn/parallel/
# distributed.py``: DistributedDataParallel's ``forward`` broadcasts buffers and syncs before
# the module runs), and what a report calls the wait: "DistributedDataParallel.forward".
COLLECTIVE_WRAPPERS = {"torch/nn/parallel/distributed.py": "DistributedDataParallel"}
# Frames between the collective and the caller that are neither (decorators).
WRAPPER_FILES = ("torch/distributed/c10d_logger.py",)

# Launchers, by what their command line holds: (marker, name as the report says it).
LAUNCHERS = (
    ("torch.distributed.run", "torchrun"),
    ("torch.distributed.launch", "torch.distributed.launch"),
    ("torchrun", "torchrun"),
    ("accelerate", "accelerate launch"),
    ("deepspeed", "deepspeed"),
    ("mpirun", "mpirun"),
    ("mpiexec", "mpiexec"),
    ("srun", "srun"),
)
# Launchers that stop every other rank as soon as one fails.
STOPS_RANKS_ON_FAILURE = frozenset({"torchrun", "torch.distributed.launch", "accelerate launch", "deepspeed"})

TIMEOUT_NOTE = ("The backends do not fail such a wait at once: the job dies only after the process group's "
                "timeout (`init_process_group(timeout=...)`; by default 10 minutes for NCCL, enforced while "
                "TORCH_NCCL_ASYNC_ERROR_HANDLING is on, its default, or with TORCH_NCCL_BLOCKING_WAIT=1; "
                "30 minutes for gloo), and then with a timeout error on a rank that did nothing wrong.")
MISMATCH_CHECK = ("TORCH_DISTRIBUTED_DEBUG=DETAIL makes the ranks check that they call the same collective "
                  "before they run it, which turns such a hang into an error naming both.")

# Where a rank waits while the job's ranks gather (the rendezvous): ``init_process_group``
# (torch 2.13 ``distributed_c10d.py``) makes the store (``rendezvous.py``
# ``_create_c10d_store``: rank 0 hosts a ``TCPStore`` whose constructor waits in
# ``TCPStore::waitForWorkers`` for the other ranks to connect; the others retry connecting)
# and then waits in ``_store_based_barrier`` for every rank; a rank that never comes holds
# all the others there until the timeout (``default_pg_timeout``, 30 minutes).
RENDEZVOUS_CALLS = frozenset({"init_process_group"})
RENDEZVOUS_TIMEOUT_NOTE = ("It waits until the rendezvous timeout (`init_process_group(timeout=...)`, 30 minutes by "
                           "default), with no CPU and no error.")
