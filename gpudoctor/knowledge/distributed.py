"""Distributed jobs: the collectives every rank must reach, and the tests that tell ranks apart.

A collective (an all-reduce, a barrier, a broadcast) completes only when every rank of its
process group calls it; a rank that never does leaves the others waiting until the
backend's timeout (NCCL's watchdog: 10 minutes by default in torch >= 2.2, 30 before;
gloo: 30 minutes), then the job dies with a timeout on a rank that did nothing wrong.

Sources, read for the names and argument positions below:
- torch 2.11 ``torch/distributed/distributed_c10d.py`` (``all_reduce(tensor, op, group,
  async_op)``, ``broadcast(tensor, src, group, async_op)``, ``barrier(group, async_op,
  device_ids)``, ``new_group`` "requires that all processes in the main group ... enter
  this function, even if they are not going to be members of the group"), and
  ``torch/distributed/checkpoint/state_dict_saver.py`` (``save`` is a collective unless
  ``no_dist``);
- deepspeed 0.16 ``deepspeed/comm/comm.py`` (the same functions and positions);
- accelerate 1.x ``accelerate/accelerator.py`` (``wait_for_everyone``, ``gather``,
  ``gather_for_metrics``, ``reduce``, ``pad_across_processes``) and
  ``accelerate/utils/operations.py``;
- jax 0.10 ``jax/experimental/multihost_utils.py`` (``sync_global_devices``,
  ``process_allgather``, ``broadcast_one_to_all``);
- horovod 0.28 ``horovod/torch/mpi_ops.py`` and ``horovod/tensorflow/__init__.py``;
- mpi4py 4.0 ``src/mpi4py/MPI.src/Comm.pyx`` (``Comm.bcast``, ``Barrier``, ``Allreduce``...:
  "collective" operations every process of the communicator calls; the lower-case ones
  pickle Python objects, the capitalised ones move buffers);
- accelerate 1.x ``Accelerator.save_state``: under DeepSpeed it calls the engine's
  ``save_checkpoint`` (a collective), under FSDP ``save_fsdp_model`` (one), and with
  ``automatic_checkpoint_naming`` ``wait_for_everyone``; Accelerate's examples call it on
  every process and it writes from the main one itself.
Point-to-point calls (``send``, ``recv``, ``isend``, ``irecv``) are not collectives: they
are meant to be made by some ranks only.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Collective:
    """One collective API: what ranks must agree on (``kind``: calls of the same kind on
    different ranks meet) and where its process-group argument is (None: it has none and
    always runs on every rank of the job)."""

    qualname: str
    kind: str
    group_position: int | None
    group_keyword: str = "group"


def _torch_like(prefix: str) -> tuple[Collective, ...]:
    # name -> position of ``group`` (distributed_c10d.py, torch 2.11; deepspeed/comm/comm.py)
    positions = {
        "all_reduce": 2, "all_gather": 2, "all_gather_object": 2, "all_gather_into_tensor": 2,
        "reduce_scatter": 3, "reduce_scatter_tensor": 3, "broadcast": 2, "broadcast_object_list": 2,
        "reduce": 3, "gather": 3, "gather_object": 3, "scatter": 3, "scatter_object_list": 3,
        "barrier": 0, "monitored_barrier": 0, "all_to_all": 2, "all_to_all_single": 4,
    }
    return tuple(Collective(f"{prefix}.{name}", name, position) for name, position in positions.items())


# mpi4py 4.0 ``Comm``'s collective methods (blocking and non-blocking: a non-blocking one
# too is called by every process of the communicator).
MPI_COLLECTIVES = ("bcast", "gather", "scatter", "allgather", "alltoall", "reduce", "allreduce", "barrier",
                   "scan", "exscan", "Bcast", "Gather", "Gatherv", "Scatter", "Scatterv", "Allgather",
                   "Allgatherv", "Alltoall", "Alltoallv", "Reduce", "Allreduce", "Reduce_scatter",
                   "Reduce_scatter_block", "Barrier", "Scan", "Exscan", "Ibarrier", "Ibcast", "Iallreduce",
                   "Iallgather", "Ireduce", "Igather", "Iscatter")

COLLECTIVES: tuple[Collective, ...] = (
    *_torch_like("torch.distributed"),
    *_torch_like("deepspeed.comm"),
    Collective("torch.distributed.new_group", "new_group", None),
    Collective("torch.distributed.checkpoint.save", "checkpoint.save", None, "process_group"),
    Collective("torch.distributed.checkpoint.load", "checkpoint.load", None, "process_group"),
    *(Collective(f"accelerate.Accelerator.{name}", name, None)
      for name in ("wait_for_everyone", "gather", "gather_for_metrics", "reduce", "pad_across_processes",
                   "save_state")),
    *(Collective(f"accelerate.utils.{name}", name, None)
      for name in ("wait_for_everyone", "gather", "gather_object", "reduce", "broadcast",
                   "broadcast_object_list", "pad_across_processes")),
    # lightning 2.5 ``trainer/trainer.py``: ``Trainer.save_checkpoint`` "needs to be called on
    # all processes" (it ends in ``self.strategy.barrier("Trainer.save_checkpoint")``).
    *(Collective(f"{trainer}.save_checkpoint", "save_checkpoint", None) for trainer in (
        "pytorch_lightning.Trainer", "pytorch_lightning.trainer.trainer.Trainer", "lightning.Trainer",
        "lightning.pytorch.Trainer", "lightning.pytorch.trainer.trainer.Trainer")),
    *(Collective(f"jax.experimental.multihost_utils.{name}", name, None)
      for name in ("sync_global_devices", "process_allgather", "broadcast_one_to_all")),
    # mpi4py's world communicator (``from mpi4py import MPI``; ``MPI.COMM_WORLD.bcast(data)``).
    *(Collective(f"mpi4py.MPI.COMM_WORLD.{name}", f"mpi.{name}", None) for name in MPI_COLLECTIVES),
    *(Collective(f"horovod.{binding}.{name}", name, None)
      for binding in ("torch", "tensorflow", "tensorflow.keras", "keras")
      for name in ("allreduce", "allgather", "broadcast", "broadcast_parameters", "broadcast_optimizer_state",
                   "broadcast_variables", "alltoall", "barrier", "join")),
)
BY_QUALNAME = {collective.qualname: collective for collective in COLLECTIVES}
# Module wrappers whose forward is a collective: DistributedDataParallel's ``forward``
# broadcasts the module's buffers from rank 0 before running it (torch 2.x
# ``nn/parallel/distributed.py``: ``_pre_forward`` -> ``_sync_buffers`` when
# ``broadcast_buffers``, True by default, and the module has buffers: BatchNorm's running
# statistics, a registered causal mask or position index), also under ``torch.no_grad()``
# and in eval mode; a backward after it all-reduces the gradients. A rank-0-only evaluation
# of the wrapped model hangs there; ``ddp_model.module(x)`` runs the module alone. Each:
# the keyword that, False, turns the forward's collective off, and the collective.
DDP_FORWARD = Collective("torch.nn.parallel.DistributedDataParallel.forward", "ddp.forward", None)
COLLECTIVE_WRAPPERS = dict.fromkeys(
    ("torch.nn.parallel.DistributedDataParallel", "torch.nn.parallel.distributed.DistributedDataParallel"),
    ("broadcast_buffers", DDP_FORWARD))
# What the analysis calls an object such a wrapper made: the wrapper's name and this.
WRAPPED = "()"
# Collectives that are one under some configurations of the job only, by kind: what a
# finding says of it, and the way out. (Under plain DDP ``save_state`` on the main process
# alone works; Hugging Face diffusers' training scripts test
# ``accelerator.is_main_process or accelerator.distributed_type == DistributedType.DEEPSPEED``.)
WHEN_COLLECTIVE = {
    "save_state": ("Accelerator.save_state waits for every process under DeepSpeed, FSDP or automatic "
                   "checkpoint naming, and writes from the main process itself on every configuration",
                   "Call accelerator.save_state on every process (it writes from the main one itself), or test "
                   "`accelerator.is_main_process or accelerator.distributed_type == DistributedType.DEEPSPEED`"),
    "ddp.forward": ("DistributedDataParallel's forward broadcasts the module's buffers from rank 0 when it has "
                    "any (BatchNorm statistics, a registered mask or index) and broadcast_buffers is on, the default",
                    "Run the wrapped module itself on one rank (`model.module(x)`), or run the forward on every "
                    "rank; DistributedDataParallel(..., broadcast_buffers=False) turns the broadcast off"),
}
# Collectives that run on "the current device" of an NCCL group unless told one
# (distributed_c10d.py, torch 2.11-2.13: ``barrier`` allocates its one-element tensor on the
# device of ``device_ids``, else the group's bound ``device_id``, else the current device —
# "this may use default device 0, causing issues like hang or all processes creating context
# on device 0"; the object collectives use ``torch.cuda.current_device()``, and their docs make
# setting it with ``torch.cuda.set_device()`` "the user's responsibility").
CURRENT_DEVICE_KINDS = frozenset({"barrier", "all_gather_object", "gather_object", "broadcast_object_list",
                                  "scatter_object_list"})
# Where a job's process group is made, and the keyword binding it to a device (torch >= 2.3).
# DeepSpeed's ``init_distributed(dist_backend, ...)`` calls it without a device (deepspeed
# ``comm/torch.py`` ``TorchBackend.init_process_group``): no keyword binds one.
# Each: (backend keyword, its position, the keyword binding a device, the backend when none
# is given). torch's default (None) makes "cpu:gloo,cuda:nccl", whose barrier and object
# collectives run on the CPU (``_get_object_coll_device``: "cpu" when among the pairs);
# DeepSpeed's is the accelerator's, NCCL on CUDA.
PROCESS_GROUP_INITS: dict[str, tuple[str, int, str | None, str | None]] = {
    "torch.distributed.init_process_group": ("backend", 0, "device_id", None),
    **dict.fromkeys(("deepspeed.init_distributed", "deepspeed.comm.init_distributed",
                     "deepspeed.comm.comm.init_distributed"), ("dist_backend", 0, None, "nccl")),
}
# What chooses this process's GPU for the calls above (torch 2.11 torch/cuda/__init__.py).
# DeepSpeed's accelerator (deepspeed 0.16 ``accelerator/real_accelerator.py``: ``get_accelerator()``
# returns the CUDA accelerator on a GPU machine, whose ``set_device`` calls
# ``torch.cuda.set_device``): known by the name below once ``get_accelerator()`` returns.
ACCELERATOR_GETTERS = dict.fromkeys(("deepspeed.get_accelerator", "deepspeed.accelerator.get_accelerator",
                                     "deepspeed.accelerator.real_accelerator.get_accelerator"),
                                    "deepspeed.accelerator.Accelerator")
DEVICE_CHOICES = frozenset({"torch.cuda.set_device", "torch.cuda.device", "torch.accelerator.set_device_index",
                            "torch.accelerator.set_device_idx", "deepspeed.accelerator.Accelerator.set_device"})
# A variable that, set before CUDA starts, leaves the process one GPU of its own.
DEVICE_VARIABLE = "CUDA_VISIBLE_DEVICES"
# Strategies that configure TensorFlow's collective ops, which must happen before its runtime
# starts (tensorflow 2.21 python/eager/context.py ``configure_collective_ops``: "Collective
# ops must be configured at program startup", raised from the multi-worker strategy's
# ``_initialize_multi_worker`` when TF_CONFIG names a cluster; alone it only logs "Collective
# ops is not configured at program startup").
STARTUP_STRATEGIES = frozenset({"tensorflow.distribute.MultiWorkerMirroredStrategy",
                                "tensorflow.distribute.experimental.MultiWorkerMirroredStrategy"})
# Classes whose instances the analysis follows so that their collective methods are known
# (``accelerator = Accelerator(); accelerator.wait_for_everyone()``).
CLASSES = frozenset({"accelerate.Accelerator", *(c.qualname.rsplit(".", 1)[0] for c in COLLECTIVES
                                                  if c.qualname.endswith("Trainer.save_checkpoint"))})
# Decorators that run the function they wrap on rank 0 only (lightning's ``rank_zero_only``,
# lightning_utilities 0.11 ``core/rank_zero.py``; accelerate's ``Accelerator.on_main_process``
# and ``on_local_main_process``; mmengine/mmcv's ``master_only``), by their last name.
RANK_ZERO_DECORATORS = frozenset({"rank_zero_only", "on_main_process", "on_local_main_process", "master_only"})
# Method names no other library uses: called on an object the analysis cannot identify (an
# ``accelerator`` passed in as a parameter), they are still that library's collective.
DISTINCT_METHODS = {"wait_for_everyone": BY_QUALNAME["accelerate.Accelerator.wait_for_everyone"],
                    "gather_for_metrics": BY_QUALNAME["accelerate.Accelerator.gather_for_metrics"]}
# Methods that are a collective when called on an object whose name ends with one of these
# words: a training loop's ``trainer`` or ``engine``. Lightning's ``Trainer.save_checkpoint``
# "needs to be called on all processes" (lightning 2.5 ``trainer/trainer.py``), DeepSpeed's
# ``DeepSpeedEngine.save_checkpoint`` too ("all processes must call this method and not
# just the process with rank 0", deepspeed 0.16 ``runtime/engine.py``).
# Lightning's ``Strategy.barrier`` and ``broadcast`` (``strategies/strategy.py``) too; and an
# mpi4py communicator's collectives on a ``comm`` (``self.comm.bcast(x)``), for the names
# no other library's ``comm`` has (not ``gather``, ``reduce``, ``scatter``, ``scan``).
_MPI_NAMED = frozenset(MPI_COLLECTIVES) - {"gather", "reduce", "scatter", "scan", "barrier"}
NAMED_RECEIVER_METHODS: dict[str, tuple[tuple[tuple[str, ...], Collective], ...]] = {
    "save_checkpoint": ((("trainer", "engine"), Collective("save_checkpoint", "save_checkpoint", None)),),
    "barrier": ((("strategy",), Collective("strategy.barrier", "barrier", None)),
                (("comm",), Collective("comm.barrier", "mpi.barrier", None))),
    "broadcast": ((("strategy",), Collective("strategy.broadcast", "broadcast", None)),),
    **{name: ((("comm",), Collective(f"comm.{name}", f"mpi.{name}", None)),) for name in sorted(_MPI_NAMED)},
}
# Logging calls that all-reduce what they log across ranks when told to (Lightning's
# ``LightningModule.log(..., sync_dist=True)`` and ``log_dict``, lightning 2.5
# ``core/module.py``: the value is reduced through the strategy).
SYNCED_LOGS = {"log": "sync_dist", "log_dict": "sync_dist"}
SYNCED_LOG = Collective("log", "all_reduce", None)
# How a collective (or a strategy of STARTUP_STRATEGIES, below) shows in source text (the
# prescan looks for these before parsing): its last name, for names no everyday code uses;
# ``broadcast``, ``gather``, ``reduce``, ``scatter``, ``join``, ``save_checkpoint`` only as
# an attribute of one of ``OWNER_WORDS``.
GENERIC_NAMES = frozenset({"broadcast", "gather", "reduce", "scatter", "join", "save", "load", "allreduce",
                           "save_checkpoint", "scan", "exscan", "Scan", "Exscan", "Gather", "Reduce", "Scatter",
                           "save_state"})
WORDS = frozenset(c.qualname.rsplit(".", 1)[-1] for c in COLLECTIVES) - GENERIC_NAMES | {"allreduce"}
OWNER_WORDS = frozenset({"dist", "distributed", "comm", "accelerator", "hvd", "multihost_utils", "dcp", "checkpoint",
                         "trainer", "engine", "model_engine", "strategy"})

# -- telling ranks apart -------------------------------------------------------------------
# A test on the rank decides which ranks run a branch. The analysis evaluates such a test for
# two sample ranks, 0 and 1, of a job of two (``world_size`` is 2); local ranks equal global
# ones. A test it cannot evaluate for both is left undecided (no finding rests on it).
SAMPLE_RANKS = (0, 1)
SAMPLE_WORLD_SIZE = 2
# Names and attributes holding this process's rank (``rank``, ``args.local_rank``,
# ``self.global_rank``), or its rank within a model-parallel group (``tp_rank``; also any
# name ending in ``_parallel_rank``): a collective of the whole job under a test of either
# is reached by some ranks only. (A collective of the sub-group itself names its group and
# is not checked.) Other names ending in ``rank`` (``lora_rank``, a tensor's rank) are not
# ranks of processes.
RANK_NAMES = frozenset({"rank", "global_rank", "local_rank", "world_rank", "node_rank", "process_index",
                        "local_process_index", "RANK", "LOCAL_RANK", "tp_rank", "dp_rank", "pp_rank", "ep_rank",
                        "cp_rank", "sp_rank", "mp_rank", "ring_attn_rank", "group_rank"})
RANK_SUFFIX = "_parallel_rank"
# Functions returning it (``dist.get_rank()``, ``dist.get_rank(group)``, ``jax.process_index()``,
# ``hvd.rank()``, a project's own ``get_rank()``, Megatron's ``get_tensor_model_parallel_rank()``).
RANK_CALLS = frozenset({"get_rank", "get_local_rank", "get_global_rank", "get_node_local_rank", "process_index",
                        "rank", "local_rank", "get_process_index", "get_group_rank", "Get_rank"})
# Those that may be given a group (their other arguments would make them something else).
GROUP_RANK_CALLS = frozenset({"get_rank", "get_group_rank"})
# Environment variables a launcher sets to it (torchrun, mpirun, srun).
RANK_VARIABLES = frozenset({"RANK", "LOCAL_RANK", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "PMI_RANK",
                            "SLURM_PROCID", "SLURM_LOCALID"})
# Names, attributes and argument-less calls that are true on rank 0 only (of the job or of
# its node): ``accelerator.is_main_process``, ``trainer.is_global_zero``, ``is_main_process()``.
MAIN_FLAGS = frozenset({"is_main_process", "is_local_main_process", "is_global_zero", "is_master", "is_main",
                        "master_process", "is_rank_zero", "is_rank_0", "is_master_ordinal",
                        "is_world_process_zero", "is_local_process_zero", "is_chief", "main_process",
                        "is_master_process", "is_local_master"})
# The number of ranks (``world_size``, ``dist.get_world_size()``, ``jax.process_count()``).
WORLD_NAMES = frozenset({"world_size", "num_processes", "WORLD_SIZE"})
WORLD_CALLS = frozenset({"get_world_size", "process_count", "Get_size"})
# What creating one after the runtime started does.
STARTUP_TOO_LATE = ('raises RuntimeError "Collective ops must be configured at program startup" when TF_CONFIG '
                    "names a cluster (alone, it logs that collective ops were not configured)")
WORDS = WORDS | {name.rsplit(".", 1)[-1] for name in STARTUP_STRATEGIES} | {"init_process_group", "init_distributed",
                                                                              "sync_dist"} \
    | {name.rsplit(".", 1)[-1] for name in COLLECTIVE_WRAPPERS}

# Words of a test that asks whether the job is distributed at all (``if dist.is_initialized():``,
# ``if world_size > 1:``, ``if self.distributed:``): true in any distributed job, so code under
# one is reached on every rank that reaches the test.
JOB_TEST_WORDS = ("is_initialized", "is_available", "distributed", "world_size", "WORLD_SIZE", "ddp", "DDP",
                  "multi_gpu", "n_gpu", "num_processes", "process_count", "dist.", "_group")

# What a file's text must contain for one of its tests to read the rank (a quick look before
# any test is evaluated).
TEXT_PATTERN = "|".join(sorted({"rank", "RANK", "process_index", "PROCID", "LOCALID", *MAIN_FLAGS,
                                 *RANK_ZERO_DECORATORS}))
# The words the text gate looks for before a file is parsed: a file naming none of them
# calls no collective of its own. A collective's words count only in a file that imports one
# of COLLECTIVE_MODULES (TensorFlow's own ``all_reduce`` and ``checkpoint.save`` are not in
# the tables: a Keras backend file naming them has nothing for these rules); a strategy's
# name counts anywhere.
GATE_WORDS = tuple(sorted(WORDS))
# The generic names, as calls: ``.reduce(`` in the text, then one of OWNER_WORDS before it.
GATE_CALLS = tuple(f".{name}(" for name in sorted(GENERIC_NAMES))
GENERIC_CALL_PATTERN = r"(?:" + "|".join(sorted(OWNER_WORDS)) + r")\.(?:" + "|".join(sorted(GENERIC_NAMES)) + r")\("
STRATEGY_WORDS = tuple(sorted(name.rsplit(".", 1)[-1] for name in STARTUP_STRATEGIES))
COLLECTIVE_MODULES = ("torch", "deepspeed", "accelerate", "lightning", "pytorch_lightning", "horovod", "jax",
                      "mpi4py")
IMPORT_PATTERN = r"^[ \t]*(?:import|from)[ \t]+(?:" + "|".join(COLLECTIVE_MODULES) + r")\b"
