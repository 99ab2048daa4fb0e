"""Timed training steps: ``Loop.step`` on batches of a table's pairs, as training draws them.

What the training part of the benchmark (``training``), its accelerator part (``accelerator``)
and the profile of a step (``training_profile``) time: pairs/s and useful GFLOP/s, 3x the forward
matrix products of the pairs without padding (``flops.pair_flops``), and on request the rate of
the benchmark's reference product timed between the steps, to hold them against.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import numpy as np
import torch

from benchmarks import parts
from benchmarks.flops import pair_flops
from phrase_rescorer.allocator import keep_freed_memory
from phrase_rescorer.data.batching import epoch_plan, trainable
from phrase_rescorer.data.pairs import PairSet
from phrase_rescorer.data.vocab import Vocabulary
from phrase_rescorer.model.cho2014 import ModelConfig
from phrase_rescorer.parallel.distributed import Group
from phrase_rescorer.training.loop import Loop
from phrase_rescorer.training.phrase_task import PhraseTask
from phrase_rescorer.training.run_settings import TrainConfig, TrainingData


@dataclass(frozen=True)
class StepFigures:
    """What ``timed_steps`` measured. ``beside_by_library``: the rate of ``parts.ReferenceProduct``
    in each of ``parts.product_libraries``, timed once before each step (None when not asked
    for): the product's mean rate over the same seconds as the steps, the rate to hold them
    against on a machine whose speed drifts (on a shared 2-core VM the best-of-5 rate taken once
    swung by a third between processes); ``beside_gflops`` is the faster library's."""

    pairs_per_s: float
    useful_gflops: float
    page_faults_per_step: float | None = None  # minor faults of the timed steps (None: not counted here)
    beside_by_library: dict[str, float] | None = None
    warmup_steps: int = 0

    @property
    def beside_gflops(self) -> float | None:
        return max(self.beside_by_library.values()) if self.beside_by_library else None

    @property
    def beside_fraction(self) -> float | None:
        return None if self.beside_gflops is None else self.useful_gflops / self.beside_gflops


def training_figures(
    config: ModelConfig,
    pairs: PairSet,
    src: Vocabulary,
    tgt: Vocabulary,
    batch_size: int,
    steps: int,
    device: torch.device,
    work: Path,
    bf16: bool = False,
    beside: bool = False,
) -> StepFigures:
    """``timed_steps`` of ``Loop.step`` (log p, backward, gradient clipping, Adadelta) on
    batches of the table's pairs as the trainer draws them (``epoch_plan``), after the warm-up
    (``_warm_up``). Useful work: 3x the forward FLOPs of the pairs without padding
    (``flops.pair_flops``; the backward pass costs two forward passes' products)."""
    trainer, plan = benchmark_trainer(config, pairs, src, tgt, batch_size, device, work, bf16)
    return timed_steps(trainer, plan, steps, config, device, beside)


#: Steps run before the timed ones, at least. A process's first steps grow the heap to what the
#: largest batches need (page faults at ~14 microseconds each on a shared VM: one step faulted
#: 60,000 pages in, the next eight 2,000-5,000 each, then almost none), and oneDNN compiles a
#: kernel for each new row count of the recurrences' products (``training.products``: a hundred-
#: odd steps at paper size); hours of training see the settled state, and so do the timed steps.
WARMUP_STEPS = 10
#: More warm-up steps are run until ``SETTLED_STEPS`` in a row fault fewer than ``SETTLED_FAULTS``
#: pages in each, up to ``MAX_WARMUP_STEPS`` (the timed steps' faults are counted and printed).
SETTLED_STEPS, SETTLED_FAULTS, MAX_WARMUP_STEPS = 20, 100, 300


def timed_steps(
    trainer: Loop,
    plan: list[np.ndarray],
    steps: int,
    config: ModelConfig,
    device: torch.device,
    beside: bool = False,
    *,
    forward_flops: Callable[[np.ndarray, np.ndarray], int] | None = None,
    warmup_steps: int | None = None,
) -> StepFigures:
    """Pairs/s and useful GFLOP/s of ``steps`` steps over ``plan`` after the warm-up (``_warm_up``,
    or ``warmup_steps`` steps; the plan cycled); with ``beside``, also each reference product's
    rate, timed once before each step (its time is not the steps'). Useful work: 3x
    ``forward_flops(source tokens, target tokens)`` of each batch (default: ``pair_flops``)."""
    encoded = cast(PhraseTask, trainer.task).data.encoded
    count = forward_flops or (lambda s, t: int(pair_flops(config, s, t).sum()))
    # their memory taken before the heap settles
    libraries = parts.product_libraries(device) if beside else []
    references = [parts.ReferenceProduct(device, library=lib) for lib in libraries]
    batches = itertools.cycle(plan)
    if warmup_steps is None:
        warmup = _warm_up(trainer, batches)
    else:
        warmup = warmup_steps
        for b in itertools.islice(batches, warmup_steps):
            trainer.step(b)
    for product in references:
        product.seconds()  # its first call's page faults and set-up outside the timed window
    done, flops, elapsed = 0, 0, 0.0
    product_time = dict.fromkeys((p.library for p in references), 0.0)
    faults_before = _minor_faults()
    for b in itertools.islice(batches, steps):
        for product in references:
            product_time[product.library] += product.seconds()
        parts.synchronize(device)
        t = time.perf_counter()
        trainer.step(b)
        parts.synchronize(device)
        elapsed += time.perf_counter() - t
        done += len(b)
        flops += 3 * count(encoded.src_lengths[b], encoded.tgt_lengths[b])
    faults_after = _minor_faults()
    rates = {p.library: p.flops * steps / product_time[p.library] / 1e9 for p in references} if beside else None
    faults = None if faults_before is None or faults_after is None else (faults_after - faults_before) / steps
    return StepFigures(done / elapsed, flops / elapsed / 1e9, faults, rates, warmup)


def _warm_up(trainer: Loop, batches: Iterator[np.ndarray]) -> int:
    """Run ``WARMUP_STEPS`` steps, then more until the state has settled (``SETTLED_STEPS``
    steps in a row with fewer than ``SETTLED_FAULTS`` faults each, at most ``MAX_WARMUP_STEPS``
    in all); the steps run."""
    quiet, done = 0, 0
    while done < MAX_WARMUP_STEPS:
        before = _minor_faults()
        trainer.step(next(batches))
        done += 1
        after = _minor_faults()
        if before is None or after is None:
            quiet = SETTLED_STEPS  # faults not counted here: the fixed warm-up only
        else:
            quiet = quiet + 1 if after - before < SETTLED_FAULTS else 0
        if done >= WARMUP_STEPS and quiet >= SETTLED_STEPS:
            break
    return done


def _minor_faults() -> int | None:
    """This process's minor page faults so far (None where ``resource`` is missing)."""
    try:
        import resource
    except ImportError:  # not on Windows
        return None
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def benchmark_trainer(
    config: ModelConfig,
    pairs: PairSet,
    src: Vocabulary,
    tgt: Vocabulary,
    batch_size: int,
    device: torch.device,
    work: Path,
    bf16: bool = False,
    optimizer_kernel: str = TrainConfig.optimizer_kernel,
) -> tuple[Loop, list[np.ndarray]]:
    """A training ``Loop`` on all of ``pairs`` (none held out) and its first epoch's full batches, drawn
    as training draws them (``epoch_plan``)."""
    encoded = pairs.encode(src, tgt)
    idx = trainable(encoded, np.arange(len(pairs)), TrainConfig.max_length)
    data = TrainingData(
        src,
        tgt,
        encoded,
        idx,
        np.zeros(0, dtype=np.int64),
        unique_pairs=len(pairs),
        heldout=0,
        skipped_long=len(pairs) - len(idx),
        table_hash="benchmark",
    )
    cfg = TrainConfig(batch_size=batch_size, bf16=bf16, optimizer_kernel=optimizer_kernel)
    keep_freed_memory()  # as the training commands do
    trainer = Loop(PhraseTask(data, config, cfg, device), cfg.loop, str(work / "train.pt"), device, Group())
    plan = epoch_plan(encoded, idx, batch_size, seed=1, epoch=0)
    return trainer, [b for b in plan if len(b) == batch_size] or plan


def training_pairs_per_second(
    config: ModelConfig,
    pairs: PairSet,
    src: Vocabulary,
    tgt: Vocabulary,
    batch_size: int,
    steps: int,
    device: torch.device,
    work: Path,
) -> float:
    """Pairs/s of ``training_figures``."""
    return training_figures(config, pairs, src, tgt, batch_size, steps, device, work).pairs_per_s
