"""The accelerator part of the benchmark (``bench``, with a CUDA device): rescoring in float32 and
bfloat16 (and their score difference), training steps, and the device's matrix-product rate."""

from __future__ import annotations

from typing import Any

import click
import numpy as np
import torch

from benchmarks import parts, training_steps
from phrase_rescorer.data.pairs import load_pairs
from phrase_rescorer.rescoring.prefix import PrefixScorer


def accelerator_figures(
    checkpoint,
    table,
    lines,
    work,
    config,
    src_vocab,
    tgt_vocab,
    train_batch,
    device: torch.device,
    matmul_n: int = 8192,
) -> dict[str, Any]:
    """Rescoring in float32 and bfloat16 (and their score difference), training at batch 64 and
    ``train_batch``, and the matrix product rate, on ``device`` (a CUDA device in ``main``; the
    tests run it on the CPU, since the machines this was developed on had no GPU)."""
    say = click.echo
    gpu_table = work / "gpu.gz"
    n = parts.head_of_table(table, lines or None, gpu_table)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else str(device)
    out: dict[str, Any] = {
        "device": name,
        "lines": n,
        "matmul_gflops": {
            "float32": parts.matmul_gflops(device, n=matmul_n),
            "bfloat16": parts.matmul_gflops(device, torch.bfloat16, n=matmul_n),
        },
    }
    say(
        f"{name}: matrix product {out['matmul_gflops']['float32']:,.0f} GFLOP/s float32, "
        f"{out['matmul_gflops']['bfloat16']:,.0f} bfloat16"
    )
    model = checkpoint.build_model(device)
    scores = {}
    for dname, dtype in (("float32", torch.float32), ("bfloat16", torch.bfloat16)):
        scorer = PrefixScorer(model, device, dtype=dtype)
        parts.rescore(checkpoint, gpu_table, work / f"gpu-{dname}.gz", scorer, str(device))  # warm-up
        secs = parts.rescore(checkpoint, gpu_table, work / f"gpu-{dname}.gz", scorer, str(device)).seconds
        scores[dname] = parts.log_probs(work / f"gpu-{dname}.gz")
        out[dname] = {"pairs_per_s": n / secs}
        say(f"  rescoring, {dname}: {n / secs:,.0f} pairs/s on {n:,} lines")
    d = np.abs(scores["bfloat16"] - scores["float32"])
    out["bfloat16"].update(max_abs_diff=float(d.max()), mean_abs_diff=float(d.mean()))
    say(f"  bfloat16 - float32 scores: max {d.max():.3g}, mean {d.mean():.3g} (log p)")
    pairs = load_pairs(str(gpu_table))
    out["training"] = {}
    for b in (64, train_batch):
        rate = training_steps.training_pairs_per_second(config, pairs, src_vocab, tgt_vocab, b, 20, device, work)
        out["training"][b] = rate
        say(f"  training, batch {b}: {rate:,.0f} pairs/s")
    return out
