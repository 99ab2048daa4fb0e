"""Running as one of several processes started by ``torchrun``: who this process is, which
device it uses, and the few collective operations that training and sharded rescoring need.

``torchrun`` (``python -m torch.distributed.run``) starts ``--nproc-per-node`` processes on each
of ``--nnodes`` machines and tells each one who it is in environment variables: ``WORLD_SIZE``
(processes in all), ``RANK`` (this one, 0 .. WORLD_SIZE-1), ``LOCAL_RANK`` (its number on this
machine) and where to meet (``MASTER_ADDR``, ``MASTER_PORT``). The training commands
(``train``, ``train-nmt``, ``train-lm``) and ``rescore`` read them, so the same command lines
run unchanged under torchrun. Without them (or with ``WORLD_SIZE=1``) a command is one process
and :class:`Group` is the one-process group, whose collectives return their argument: the
one-process code path does no communication at all.

Devices: under torchrun, ``--device auto`` (or ``cuda``) gives process LOCAL_RANK the GPU
``cuda:LOCAL_RANK``, so ``--nproc-per-node`` should be the number of GPUs of a machine;
``--device cpu`` runs every process on the CPU. Backend: NCCL between GPUs, gloo on the CPU
(:func:`backend_for`). Sharded rescoring exchanges only a few small Python objects and always
uses gloo (no GPU memory, no CUDA stream involved).
"""

from __future__ import annotations

import os
import pickle
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypeVar

import numpy as np
import torch
import torch.distributed as dist

from ..errors import UsageError

T = TypeVar("T")
Rows = TypeVar("Rows", np.ndarray, torch.Tensor)

#: How long a collective may wait for the slowest process. Training processes run in lock
#: step; rescoring processes wait for the slowest part at the end, hence the long default.
TRAIN_TIMEOUT = timedelta(minutes=30)
RESCORE_TIMEOUT = timedelta(hours=24)


class DistributedError(UsageError):
    """A launch that cannot work (device choice, GPU count); the message says what to change."""


@dataclass(frozen=True)
class Launch:
    """What torchrun told this process."""

    rank: int
    world_size: int
    local_rank: int

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Launch | None:
        """The launch described by ``env`` (default ``os.environ``); None for one process."""
        env = os.environ if env is None else env
        if "WORLD_SIZE" not in env or int(env["WORLD_SIZE"]) <= 1:
            return None
        return cls(int(env["RANK"]), int(env["WORLD_SIZE"]), int(env.get("LOCAL_RANK", "0")))


def process_device(device: torch.device, launch: Launch) -> torch.device:
    """This process's device: a CUDA request becomes ``cuda:LOCAL_RANK``; the CPU stays."""
    if device.type != "cuda":
        return device
    if device.index is not None and device.index != launch.local_rank:
        raise DistributedError(
            f"under torchrun process {launch.rank} uses cuda:{launch.local_rank} (its LOCAL_RANK); "
            f"pass --device cuda or auto, not {device}"
        )
    count = torch.cuda.device_count()
    if launch.local_rank >= count:
        raise DistributedError(
            f"this machine has {count} GPU(s) but torchrun started a process with LOCAL_RANK "
            f"{launch.local_rank}: use --nproc-per-node {count} (or --device cpu)"
        )
    return torch.device("cuda", launch.local_rank)


def backend_for(device: torch.device) -> str:
    return "nccl" if device.type == "cuda" else "gloo"


class Group:
    """The processes of a job and the collectives used here. ``Group()`` is one process alone."""

    def __init__(self, launch: Launch | None = None, device: torch.device | None = None, backend: str | None = None):
        self.rank = launch.rank if launch else 0
        self.world_size = launch.world_size if launch else 1
        self.local_rank = launch.local_rank if launch else 0
        self.backend = backend
        # Where collective tensors live: NCCL reduces CUDA tensors only.
        self._device = device if backend == "nccl" and device is not None else torch.device("cpu")

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        """Rank 0: the process that writes files and reports."""
        return self.rank == 0

    def share(self, rows: Rows) -> Rows:
        """This process's rows of ``rows``: every ``world_size``-th from ``rank`` on, so the
        shares of all processes are disjoint and together are ``rows``."""
        return rows[self.rank :: self.world_size] if self.distributed else rows

    def sum(self, values: Sequence[float]) -> list[float]:
        """Element-wise sums over the processes (float64; the same result in every process)."""
        if not self.distributed:
            return list(values)
        t = torch.tensor(list(values), dtype=torch.float64, device=self._device)
        dist.all_reduce(t, op=dist.ReduceOp.SUM)
        return t.tolist()

    def max(self, values: Sequence[int]) -> list[int]:
        """Element-wise maxima over the processes (agreement on flags such as "stop now")."""
        if not self.distributed:
            return list(values)
        t = torch.tensor(list(values), dtype=torch.int64, device=self._device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return [int(v) for v in t.tolist()]

    def broadcast(self, obj: T) -> T:
        """Rank 0's ``obj`` in every process."""
        if not self.distributed:
            return obj
        box = [obj]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def gather(self, obj: Any) -> list[Any]:
        """Every process's ``obj``, in rank order, in every process."""
        if not self.distributed:
            return [obj]
        out: list[Any] = [None] * self.world_size
        dist.all_gather_object(out, obj)
        return out

    def wait_for_all(self, poll: float = 0.05) -> None:
        """A barrier that keeps this process responsive to signals while it waits (a blocking
        collective would only see a SIGTERM once the others arrive)."""
        if not self.distributed:
            return
        work = dist.barrier(async_op=True)
        assert work is not None
        while not work.is_completed():
            time.sleep(poll)
        work.wait()

    def wrap(self, model: torch.nn.Module) -> torch.nn.Module:
        """``model`` in DistributedDataParallel (gradients averaged over the processes during
        the backward pass); the model itself for one process."""
        if not self.distributed:
            return model
        from torch.nn.parallel import DistributedDataParallel

        ids = [self._device.index] if self._device.type == "cuda" else None
        return DistributedDataParallel(model, device_ids=ids, gradient_as_bucket_view=True)

    def close(self) -> None:
        """Leave the group. After a command that succeeded, first wait until every process is
        done: a process that tore its connections down while rank 0 still wrote its files was
        aborted by gloo at exit ("terminate called without an active exception", SIGABRT),
        about one run in six. While an exception is unwinding (this runs as the command's
        context closes), leave at once: the others may never arrive."""
        if self.distributed and dist.is_initialized():
            if sys.exc_info()[0] is None:
                self.wait_for_all()
            dist.destroy_process_group()


def start(
    device: torch.device, *, backend: str | None = None, timeout: timedelta = TRAIN_TIMEOUT
) -> tuple[Group, torch.device]:
    """The group of this process and its device. Under torchrun: joins the process group
    (``backend`` default: :func:`backend_for` the device) and maps CUDA to ``cuda:LOCAL_RANK``;
    otherwise the one-process group and ``device`` unchanged."""
    launch = Launch.from_env()
    if launch is None:
        return Group(), device
    device = process_device(device, launch)
    backend = backend or backend_for(device)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    if not dist.is_initialized():
        dist.init_process_group(backend=backend, timeout=timeout)
    return Group(launch, device, backend), device


def portable(error: BaseException) -> BaseException:
    """``error`` if it survives pickling (to re-raise it in the other processes), else a
    RuntimeError with its text."""
    try:
        pickle.loads(pickle.dumps(error))
        return error
    except Exception:
        return RuntimeError(f"{type(error).__name__}: {error}")
