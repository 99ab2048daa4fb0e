"""What a phrase training run records beside its weights: ``run_record``, the settings a resumed
run must share (checked by ``loop.check_same_run``); ``model_info``, what the model file says of
its training."""

from __future__ import annotations

from typing import Any

from ..model.architectures import ArchConfig
from ..model.checkpoint import load_checkpoint
from ..model.cho2014 import ModelConfig
from ..model.kinds import ModelFile
from .evaluate import UnigramBaseline, heldout_coverage
from .run_settings import RUN_KEYS, TrainConfig, TrainingData
from .smoothed_output import BF16_OUTPUT_PRECISION
from .stacked_log_probs import BF16_STEPS_PRECISION


def run_record(
    data: TrainingData,
    model_config: ModelConfig,
    cfg: TrainConfig,
    global_batch: int,
    arch: ArchConfig | None,
    record: dict[str, str] | None,
) -> dict[str, Any]:
    """The settings of a run that ``--resume`` must find unchanged (``record``: the direction and
    target order the model file records), the precision of the products among them: a run goes on
    in the precision it started in, so that its steps are those of one computation."""
    record = record or {}
    direction, settings = record.get("direction"), cfg.to_dict()
    run: dict[str, Any] = {
        "model": model_config.to_dict(),
        "table_hash": data.table_hash,
        **{k: settings[k] for k in RUN_KEYS},
        "batch_size": global_batch,
    }
    if arch is not None:  # None: cho2014, whose run record stays as it was
        run["arch"] = arch.to_dict()
    if direction not in (None, "forward"):  # forward runs stay as they were
        run["direction"] = direction
    if record.get("target_order"):  # left-to-right runs stay as they were
        run["target_order"] = record["target_order"]
    if data.subwords is not None:
        run["subwords"] = [len(m.units) for m in data.subwords]
    if cfg.bf16:  # float32 runs stay as they were
        run["precision"] = "bfloat16"
    elif cfg.bf16_steps or cfg.bf16_output:
        parts = [BF16_STEPS_PRECISION] * cfg.bf16_steps + [BF16_OUTPUT_PRECISION] * cfg.bf16_output
        run["precision"] = " and ".join(parts)
    return run


def model_info(
    data: TrainingData,
    cfg: TrainConfig,
    argv: list[str] | None,
    languages: tuple[str | None, str | None],
    record: dict[str, str] | None,
) -> dict[str, Any]:
    """The ``info`` of the model files: seed, command line, data, languages, what it was trained
    on and in which direction (``record``), and the unigram baseline's held-out perplexity."""
    unigram = UnigramBaseline(data.encoded, data.train_idx, len(data.tgt_vocab))
    has_valid = len(data.valid_idx) > 0
    return {
        "seed": cfg.loop.seed,
        "argv": list(argv or []),
        "table_hash": data.table_hash,
        "source_lang": languages[0],
        "target_lang": languages[1],
        "trained_on": "phrase pairs",
        "direction": "forward",
        **(record or {}),
        "train_config": cfg.to_dict(),
        "unique_pairs": data.unique_pairs,
        "train_pairs": len(data.train_idx),
        "skipped_long": data.skipped_long,
        "heldout_pairs": data.heldout,
        "valid_pairs": len(data.valid_idx),
        "unigram_token_ppl": unigram.evaluate(data.encoded, data.valid_idx).token_ppl if has_valid else None,
        # compared with a table's by rescoring (rescoring.model_fit), with best_valid.mean_logp
        "valid_coverage": heldout_coverage(data.encoded, data.valid_idx) if has_valid else None,
    }


def recorded_units(last: str | ModelFile) -> dict[str, Any] | None:
    """The units of the run whose saved state is ``last`` (its path, or the file read), as
    ``--units auto`` is to keep them on ``--resume``: the choice the model file records
    (``info["units"]``); words for a word network that records none (trained before the choice was
    recorded, or with ``--units words``); None for a subword network that records none, whose
    number of units only its options said."""
    ckpt = load_checkpoint(last)
    units = ckpt.info.get("units")
    if isinstance(units, dict):
        return units
    return {"units": "words", "subwords": None} if ckpt.subwords is None else None
