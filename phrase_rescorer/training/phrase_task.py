"""The phrase / sentence-pair task of the training loop (``train``, ``train-nmt``): maximise
log p(target|source) over the unique pairs (Cho et al. 2014, section 4).

Adadelta (rho 0.95, eps 1e-6) or Adam, minibatches of unique pairs drawn regardless of their
frequencies (``batching.epoch_plan``), gradient-norm clipping, and the per-sequence cost of the
original code: loss = -(sum of log p(target|source) over the batch) / batch size, log p computed
as ``sequence_log_probs`` defines it, for the paper's network without the padding work
(``packed_log_probs``; Adadelta as one compiled loop over all parameters: ``optim``). ``bf16``
autocasts the products to bfloat16. Pairs longer than ``max_length`` tokens on either side do not
train; held-out pairs (``PairSet.heldout_mask``) never train, and the first ``valid_max`` of them,
in table order, are scored at each validation. The loop (``loop.fit``) does the rest.

Under torchrun the batch is the global batch of ``batch_size`` x processes pairs, process r
trains on rows r, r + world, ... of each (``Group.share``), and ``batch_size`` in the resume check
counts global pairs, so a run resumes with any number of processes giving the same global batch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch.profiler import record_function

from ..data.batching import collate, epoch_plan
from ..data.pairs import PairSet
from ..model.architectures import ArchConfig, build_model
from ..model.checkpoint import RIGHT_TO_LEFT, load_checkpoint, save_checkpoint
from ..model.cho2014 import ModelConfig
from ..model.kinds import ModelFile
from ..parallel.distributed import Group
from .dropout_masks import counter_dropout
from .evaluate import HeldOut, autocast, evaluate
from .heldout_bleu import HeldOutBleu
from .label_smoothing import training_objective
from .loop import TrainingError
from .optim import make_optimizer
from .run_record import model_info, run_record
from .run_settings import TrainConfig, TrainingData, prepare_data, preset_sizes
from .task_interface import RunState, Validation

#: What a network of each direction scores, in the data's own names of its sides.
DIRECTION_SAYS = {"forward": "p(target|source)", "inverse": "p(source|target)"}


class PhraseTask:
    """Training on pairs. ``languages``: the (source, target) language codes to record in the
    model files (None: unknown; a resumed run keeps the recorded ones)."""

    unit = "pairs"

    def __init__(
        self,
        data: TrainingData,
        model_config: ModelConfig,
        cfg: TrainConfig,
        device: torch.device,
        argv: list[str] | None = None,
        group: Group | None = None,
        languages: tuple[str | None, str | None] = (None, None),
        arch: ArchConfig | None = None,
        record: dict[str, str] | None = None,
    ):
        self.data, self.config, self.cfg, self.device = data, model_config, cfg, device
        self.group = group or Group()
        self.global_batch = cfg.batch_size * self.group.world_size
        self.global_tokens = None if cfg.batch_tokens is None else cfg.batch_tokens * self.group.world_size
        self.run = run_record(data, model_config, cfg, self.global_batch, arch, record)
        torch.manual_seed(cfg.loop.seed)
        self.network = build_model(model_config, arch)
        self.network.reset_parameters(std=cfg.init_std)
        self.network.to(device)
        if cfg.dropout_kernel == "compiled" and device.type == "cpu":
            counter_dropout(self.network)  # the masks drawn by a C loop (dropout_masks), not by bernoulli_
        # What training steps call: log p(target|source) per pair, for cho2014 without the padding work
        # (``packed_log_probs``), under torchrun in its DDP wrapper (same call).
        objective = training_objective(self.network, cfg.label_smoothing, cfg.bf16_steps, cfg.bf16_output)
        self.net = self.group.wrap(objective)
        # The paper's Adadelta, one compiled loop over all parameters or torch's bit for bit in cache-sized
        # pieces; or Adam, the optimizer of sentence-level NMT toolkits (``train-nmt``'s default).
        self.optimizer = make_optimizer(
            self.network.parameters(), cfg.optimizer, cfg.loop.lr, cfg.rho, cfg.eps, kernel=cfg.optimizer_kernel
        )
        self.clip_norm: float | None = cfg.clip_norm
        self.heldout_bleu: HeldOutBleu | None = None  # phrase_task sets it for train-nmt --valid-bleu
        self.info = model_info(data, cfg, argv, languages, record)
        if self.group.distributed:
            self.info.update(processes=self.group.world_size, global_batch=self.global_batch)

    def record(self) -> dict[str, Any]:
        return self.run

    def start_event(self) -> dict[str, Any]:
        d = self.data
        return {
            "train_pairs": len(d.train_idx),
            "skipped_long": d.skipped_long,
            "valid_pairs": len(d.valid_idx),
            "argv": self.info["argv"],
            "label_smoothing": self.cfg.label_smoothing,  # the logged loss is the smoothed one
        }

    def plan(self, epoch: int) -> list[np.ndarray]:
        d = self.data
        return epoch_plan(
            d.encoded, d.train_idx, self.global_batch, self.cfg.loop.seed, epoch, max_tokens=self.global_tokens
        )

    def loss(self, idx: np.ndarray) -> torch.Tensor:
        """-(sum of log p over this process's pairs of the batch ``idx``) / the batch's size."""
        mine = self.group.share(idx)
        # The phases are named for torch.profiler (``benchmarks.training_profile``); outside a
        # profile a named range costs ~20 microseconds (measured), 0.1 ms of a step of >= 10 ms.
        with record_function("train.batch"):
            # A process left without a row (the epoch's last batch may be smaller than the number
            # of processes) still joins the gradient exchange, with a zero loss.
            batch = collate(self.data.encoded, mine if len(mine) else idx[:1]).to(self.device)
        with record_function("train.forward"):
            with autocast(self.device, self.cfg.bf16):
                logp = self.net(batch.src, batch.src_len, batch.tgt, batch.tgt_len)
            loss = -logp.sum() / len(idx)
            return loss if len(mine) else loss * 0.0

    def validate(self) -> Validation:
        d = self.data
        unigram = {"unigram_token_ppl": self.info["unigram_token_ppl"]}
        if not len(d.valid_idx):
            return Validation(None, None, {"valid_token_ppl": None, "valid_mean_logp": None, **unigram})
        v = evaluate(
            self.network,
            d.encoded,
            self.group.share(d.valid_idx),
            self.device,
            self.cfg.valid_batch_size,
            self.cfg.bf16,
        )
        if self.group.distributed:
            total, tokens, pairs = self.group.sum([v.total_logp, v.tokens, v.pairs])
            v = HeldOut(pairs=int(pairs), tokens=int(tokens), total_logp=total)
        figures = {"token_ppl": v.token_ppl, "mean_logp": v.mean_logp, "pairs": v.pairs}
        event = {"valid_token_ppl": v.token_ppl, "valid_mean_logp": v.mean_logp, **unigram}
        if self.heldout_bleu is not None:  # every process translates the same pairs with the same weights
            bleu = round(self.heldout_bleu.score(self.network), 4)
            figures.update(bleu=bleu, bleu_pairs=len(self.heldout_bleu))
            event.update(valid_bleu=bleu, valid_bleu_pairs=len(self.heldout_bleu))
        return Validation(v.total_logp, figures, event)

    def save(self, path: str, progress: RunState, training_state: dict[str, Any] | None) -> None:
        d, p = self.data, progress
        info = {**self.info, "run_id": p.run_id, "steps": p.step, "epochs_done": p.epoch, "best_valid": p.best}
        save_checkpoint(path, self.network, d.src_vocab, d.tgt_vocab, info, training_state, subwords=d.subwords)

    def read_last(
        self, last: str | ModelFile, check: Callable[[dict[str, Any] | None], None]
    ) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
        ckpt = load_checkpoint(last, "--resume")
        path = ckpt.path or ""
        run = (ckpt.training_state or {}).get("run")
        if isinstance(run, dict) and "precision" not in run and ckpt.info.get("train_config", {}).get("bf16"):
            run["precision"] = "bfloat16"  # a bf16 run saved before its record named the precision
        check(ckpt.training_state)
        if [m.proto for m in ckpt.subwords or ()] != [m.proto for m in self.data.subwords or ()]:
            raise TrainingError(
                f"--resume: {path} holds other subword units than the ones learned again now; "
                "start afresh without --resume"
            )
        for key, recorded in (("source_lang", ckpt.source_lang), ("target_lang", ckpt.target_lang)):
            given = self.info[key]
            if given is not None and recorded is not None and given != recorded:
                option = "--" + key.replace("_", "-")
                raise TrainingError(f"{path} was trained with {option} {recorded}, not {given}")
            self.info[key] = given or recorded
        assert ckpt.training_state is not None
        return ckpt.training_state, ckpt.state_dict


def phrase_task(
    pairs: PairSet,
    cfg: TrainConfig,
    device: torch.device,
    group: Group,
    *,
    preset: str,
    sizes: dict[str, int | None],
    subwords: int | None,
    cell: str,
    summary: str,
    arch: ArchConfig | None,
    direction: str,
    languages: tuple[str | None, str | None],
    argv: list[str],
    trained_on: str,
    right_to_left: bool = False,
    units: dict[str, Any] | None = None,
    valid_bleu: int = 0,
) -> PhraseTask:
    """The task of a preset (``sizes`` override its sizes) on ``pairs``. ``direction`` inverse
    trains on the pairs read the other way (``PairSet.swapped``), with the languages swapped as
    well: a model file's source language is the one its network reads. ``right_to_left``: the
    network writes what it predicts from the last token to the first (``PairSet.targets_reversed``;
    the model file records ``target_order``, which ``Checkpoint.split`` follows). ``units``: the
    record of a choice of units made from the data (``data.units``), kept in the model files'
    ``info``. ``valid_bleu`` N: each validation also translates the first N held-out pairs and logs
    their BLEU (``heldout_bleu``)."""
    requested_vocab, model_sizes = preset_sizes(preset, **sizes)
    if direction == "inverse":
        pairs, languages = pairs.swapped(), (languages[1], languages[0])
    data = prepare_data(pairs, requested_vocab, cfg, subwords, right_to_left)
    config = ModelConfig(
        src_vocab_size=len(data.src_vocab),
        tgt_vocab_size=len(data.tgt_vocab),
        cell=cell,
        summary=summary,
        **model_sizes,
    )
    record = {"trained_on": trained_on, "direction": direction}
    if right_to_left:  # left-to-right files stay as they were
        record["target_order"] = RIGHT_TO_LEFT
    task = PhraseTask(data, config, cfg, device, argv, group, languages, arch, record)
    if units is not None:  # files of runs whose units were given stay as they were
        task.info["units"] = units
    if valid_bleu:
        chosen = data.valid_idx[:valid_bleu]
        references = [" ".join(pairs.pair(int(i))[1]) for i in chosen]  # words, in reading order
        target_units = None if data.subwords is None else data.subwords[1]
        task.heldout_bleu = HeldOutBleu(data.encoded, chosen, references, data.tgt_vocab, target_units, right_to_left)
    return task
