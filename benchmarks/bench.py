"""``python -m benchmarks.bench`` (``make bench``): rescoring and training throughput.

In one run, on the first ``--lines`` lines of a real phrase table (../shared/data/moses-en-fr by
default, the bundled sample when that is absent), with a random-weight network of the paper's
size (speed does not depend on the weights):

* rescoring through the engine that ``rescore-phrase-table`` drives, with the default scorer
  (``prefix``) and with the reference scorer (file order, 64 pairs per batch, no sorting, no
  sharing: how the paper's original scoring script worked), ``--repeats`` times each,
  interleaved, so that both see the same machine load; pairs/s, their ratio (median of the
  per-repeat ratios) and the useful GFLOP/s (``flops``) against the machine's measured matrix
  product rate (``rescoring``);
* the scores of both, which must agree to 1e-4 + 1e-5 |log p| (float32 rounding; the exit
  status is 1 otherwise);
* the peak RSS of a rescoring process on the timed table and on 10 renamed copies of it;
* rescoring pairs/s per architecture (cho2014, rnnsearch, gnmt, transformer; ``--arch-lines`` lines, a small
  network), prefix-sharing scorer against the batched one (``architectures``);
* the prefix scorer's bound: 1 / (the reference's fraction of the machine's matrix-product rate
  x the share of the unshared FLOPs the prefix scorer computes), and the fraction of it reached;
* the Adadelta update alone, torch's operations in pieces against the compiled loop, and dropout
  alone, torch's masks against the C loop's (``training``);
* training steps (``Loop.step``: log p, backward, clipping, Adadelta) at batch 64 and a
  larger batch, paper and small sizes, float32 and bfloat16 (``training``);
* n-best scoring with the CSLM (``append_features``, small and paper presets, a synthetic 200-best
  list or ``--nbest``): hypotheses/s and useful GFLOP/s, the batched scores checked against the
  plain computation (``nbest``); the same with the NMT feature (small and medium rnnsearch networks given
  the source sentences, prefix and batched scorers; ``nbest_nmt``);
* the MBR choice of ``rerank --mbr`` on synthetic 200-best lists: sentences/s, against a plain
  transcription of Moses' moses/mbr.cpp, whose choices it must equal (``mbr``);
* the networks' own translation (an ensemble of two random ``medium`` networks, beam 12): one
  sentence's beam at a time against groups of 5 and 20 stepped together, sentences/s and their
  agreement (``translate_batch``);
* the CPU's model and vector/matrix features (avx2, avx512f, avx512_bf16, amx), and its bf16
  matrix-product rate;
* with a CUDA device: rescoring in float32 and bfloat16 (and their score difference), training,
  and the device's matrix product rate (``accelerator``); without one it says so.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from typing import Any

import click
import torch

from benchmarks import architectures, mbr, nbest, nbest_nmt, parts, training, translate_batch
from benchmarks.accelerator import accelerator_figures
from benchmarks.flops import TrieCounter
from benchmarks.rescoring import cpu_rescoring
from phrase_rescorer.data.pairs import load_pairs
from phrase_rescorer.errors import EXIT_INTERNAL
from phrase_rescorer.model.checkpoint import load_checkpoint


@parts.command
@parts.table_option
@click.option(
    "--lines",
    type=click.IntRange(min=0),
    default=20000,
    show_default=True,
    help="Lines timed (the head of the table); 0 for all.",
)
@click.option("--preset", type=click.Choice(["paper", "small"]), default="paper", show_default=True)
@click.option(
    "--repeats", type=click.IntRange(min=1), default=3, show_default=True, help="Interleaved timed runs of each scorer."
)
@parts.threads_option
@click.option(
    "--copies",
    type=click.IntRange(min=0),
    default=10,
    show_default=True,
    help="Peak RSS also on this many renamed copies of the timed lines (0: skip memory).",
)
@click.option("--whole-table", is_flag=True, help="Also rescore the whole table with the prefix scorer (long).")
@click.option("--train-batches", default="64,256", show_default=True, help="Training batch sizes timed ('' to skip).")
@click.option("--train-steps", type=click.IntRange(min=1), default=5, show_default=True)
@click.option(
    "--gpu-lines",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Lines timed on the GPU; 0 for the whole table.",
)
@click.option("--gpu-train-batch", type=click.IntRange(min=1), default=2048, show_default=True)
@click.option(
    "--cpu-bf16/--no-cpu-bf16",
    default=None,
    help="Also time bfloat16 on the CPU (the approximate prefix scorer, bf16 training)  [default: "
    "where the CPU has AMX-BF16 or AVX512-BF16, and with --quick; elsewhere bfloat16 is emulated, "
    "tens of times slower, and only its matrix-product rate is measured].",
)
@click.option(
    "--arch-lines",
    type=click.IntRange(min=0),
    default=2000,
    show_default=True,
    help="Lines timed per architecture with a small network (0: skip).",
)
@nbest.nbest_option
@click.option(
    "--nbest-lines",
    type=click.IntRange(min=0),
    default=10000,
    show_default=True,
    help="Hypotheses of the n-best list timed with the CSLM (0: skip; --nbest: 0 for all of it).",
)
@click.option(
    "--nmt-lines",
    type=click.IntRange(min=0),
    default=2000,
    show_default=True,
    help="Hypotheses of a synthetic n-best list timed with the NMT feature (0: skip).",
)
@click.option(
    "--mbr-sentences",
    type=click.IntRange(min=0),
    default=100,
    show_default=True,
    help="Sentences of synthetic 200-best lists timed with rerank --mbr's choice (0: skip).",
)
@click.option(
    "--translate-sentences",
    type=click.IntRange(min=0),
    default=60,
    show_default=True,
    help="Sentences translated by a medium network's beam, one at a time and in groups (0: skip).",
)
@click.option("--quick", is_flag=True, help="Smoke run: tiny network, 300 lines, one repeat, 2 training steps.")
@parts.json_option
def main(
    table: str | None,
    lines: int,
    preset: str,
    repeats: int,
    threads: int | None,
    copies: int,
    whole_table: bool,
    train_batches: str,
    train_steps: int,
    gpu_lines: int,
    gpu_train_batch: int,
    cpu_bf16: bool | None,
    arch_lines: int,
    nbest_path: str | None,
    nbest_lines: int,
    nmt_lines: int,
    mbr_sentences: int,
    translate_sentences: int,
    quick: bool,
    json_path: str | None,
) -> None:
    """Measure rescoring and training throughput and print the figures (``make bench``)."""
    if quick:
        preset, lines, repeats, train_steps, copies = "quick", min(lines, 300), 1, 2, min(copies, 3)
        gpu_lines, gpu_train_batch, arch_lines = gpu_lines or 2000, 64, min(arch_lines, 200)
        nbest_lines, nmt_lines, mbr_sentences = min(nbest_lines, 400), min(nmt_lines, 200), min(mbr_sentences, 5)
        translate_sentences = min(translate_sentences, 4)
    if threads:
        torch.set_num_threads(threads)
    table = parts.default_table(table)
    report: dict[str, Any] = {"date": time.strftime("%Y-%m-%d %H:%M %Z"), "machine": parts.machine()}
    say = click.echo
    with tempfile.TemporaryDirectory(prefix="phrase-rescorer-bench-") as tmp:
        work = Path(tmp)
        head = work / "head.gz"
        n = parts.head_of_table(table, lines or None, head)
        src_vocab, tgt_vocab = parts.shortlists(table, parts.preset_vocab_size(preset))
        config = parts.model_config(preset, src_vocab, tgt_vocab)
        model_path = work / "model.pt"
        parts.random_checkpoint(model_path, config, src_vocab, tgt_vocab)
        checkpoint = load_checkpoint(str(model_path))
        counter = TrieCounter()
        parts.rescore(checkpoint, head, work / "count.gz", counter, "cpu")
        work_count = counter.count
        unshared, shared = work_count.unshared_flops(config), work_count.prefix_flops(config)
        report.update(
            table=table,
            lines=n,
            sources=work_count.sources,
            preset=preset,
            model=config.to_dict(),
            mflop_per_pair=unshared / n / 1e6,
            prefix_work_share=shared / unshared,
            encoder_step_share=work_count.encoder_nodes / work_count.source_steps,
            decoder_step_share=work_count.decoder_nodes / work_count.target_steps,
        )
        m = report["machine"]
        say(f"phrase_rescorer benchmark, {report['date']}")
        say(
            f"machine: {m['cpu']}, {m['logical_cpus']} logical CPUs, torch {m['torch']}, {m['threads']} threads, "
            f"oneDNN {'yes' if m['onednn'] else 'no'}, load average {m['load_average']:.1f} at start"
        )
        say(
            f"CPU features: {m['cpu_features']}; torch kernels: {m['torch_cpu_capability']}; bf16 units: "
            f"{m['bf16_units'] or 'none (bfloat16 is emulated: slower than float32)'}"
        )
        say(f"table: {table}: first {n:,} lines, {work_count.sources:,} distinct sources (per window)")
        say(
            f"network: {preset} size (H={config.hidden_dim}, E={config.embed_dim}, M={config.maxout_dim}, "
            f"R={config.output_rank}, V={config.src_vocab_size:,}/{config.tgt_vocab_size:,}), random weights, float32"
        )
        say(
            f"work: {report['mflop_per_pair']:.1f} MFLOP per pair unshared (matrix products); the prefix scorer "
            f"computes {100 * shared / unshared:.1f}% of it ({100 * report['encoder_step_share']:.1f}% of the "
            f"encoder steps, {100 * report['decoder_step_share']:.1f}% of the decoder steps)"
        )
        cpu_rate = parts.matmul_gflops(torch.device("cpu"))
        report["cpu_matmul_gflops"] = cpu_rate
        say(f"machine fp32 matrix product (2048^3, {torch.get_num_threads()} threads): {cpu_rate:.1f} GFLOP/s")
        units = m["bf16_units"]
        if cpu_bf16 is None:
            cpu_bf16 = bool(units) or quick
        size = 2048 if units else (256 if quick else 512)  # an emulated 2048^3 bf16 product takes minutes
        report["cpu_matmul_gflops_bf16"] = bf16_rate = parts.matmul_gflops(
            torch.device("cpu"), torch.bfloat16, n=size, repeats=5 if units else 1
        )
        say(
            f"machine bf16 matrix product ({size}^3): {bf16_rate:.1f} GFLOP/s ({bf16_rate / cpu_rate:.2f}x fp32)"
            + ("" if cpu_bf16 else "; bfloat16 scoring and training not timed (--cpu-bf16 times them)")
        )

        # --- rescoring, interleaved ------------------------------------------------------------
        report["cpu_rescoring"] = rescoring = cpu_rescoring(
            checkpoint, head, work, n, repeats, unshared, shared, cpu_rate, cpu_bf16
        )
        scores_ok = rescoring["scores_equal"]

        # --- memory ----------------------------------------------------------------------------
        if copies:
            big = work / "copies.gz"
            parts.renamed_copies(head, copies, big)
            say("\npeak RSS of a rescoring process (prefix scorer, whole process; own process each)")
            report["peak_rss_mb"] = {}
            for what, path in ((f"first {n:,} lines", head), (f"{copies} renamed copies", big)):
                lines_done, secs, rss = parts.rescore_process(
                    path, work / "rss.gz", model_path, torch.get_num_threads()
                )
                report["peak_rss_mb"][lines_done] = rss
                say(f"  {lines_done:>10,} lines ({what}): {rss:,.0f} MB ({lines_done / secs:,.0f} pairs/s)")
        if whole_table:
            lines_done, secs, rss = parts.rescore_process(
                Path(table), work / "whole.gz", model_path, torch.get_num_threads()
            )
            report["whole_table"] = {"lines": lines_done, "pairs_per_s": lines_done / secs, "peak_rss_mb": rss}
            say(
                f"\nthe whole table, prefix scorer, own process: {lines_done:,} lines in {secs:,.0f} s, "
                f"{lines_done / secs:,.0f} pairs/s, peak RSS {rss:,.0f} MB"
            )

        if arch_lines:
            report["arch_rescoring"] = archs = architectures.arch_rescoring(
                table, arch_lines, "quick" if quick else "small", work, repeats
            )
            scores_ok = scores_ok and archs["scores_equal"]

        if nbest_lines or nbest_path:
            report["nbest"] = nb = nbest.nbest_part(
                nbest_path,
                nbest_lines,
                ["quick"] if quick else ["small", "paper"],
                repeats,
                20 if quick else 200,
                cpu_rate,
                work,
            )
            scores_ok = scores_ok and nb["scores_equal"]
        if nmt_lines:
            report["nbest_nmt"] = nmt = nbest_nmt.nmt_part(
                nmt_lines,
                [("quick", kind) for kind in nbest_nmt.KINDS]
                if quick
                else [("small", "forward"), *(("medium", kind) for kind in nbest_nmt.KINDS)],
                repeats,
                20 if quick else 100,
                20 if quick else 100,
                cpu_rate,
                work,
            )
            scores_ok = scores_ok and nmt["scores_equal"]
        if mbr_sentences:
            report["mbr"] = mbr_figures = mbr.mbr_part(mbr_sentences, 0 if quick else 3, 1 if quick else repeats)
            scores_ok = scores_ok and mbr_figures["choices_equal"]
        if translate_sentences:
            shape = "quick" if quick else "medium"
            network = nbest_nmt.random_network(work / f"translate-{shape}.pt", shape)
            report["translate_batch"] = translate_batch.batch_part(
                translate_sentences, (1, 2) if quick else (1, 5, 20), 1 if quick else 2, [network, network]
            )

        # --- training --------------------------------------------------------------------------
        batches = [int(b) for b in train_batches.split(",") if b.strip()]
        if batches:
            report["adadelta_update"] = training.adadelta_update(
                parts.size_variant(preset, src_vocab, tgt_vocab)[0], train_steps
            )
            report["dropout"] = training.dropout_masks_figures(50 if not quick else 3)
            report["cpu_training"] = training.cpu_training(
                load_pairs(str(head)), preset, src_vocab, tgt_vocab, batches, train_steps, work, cpu_rate, cpu_bf16
            )

        # --- GPU -------------------------------------------------------------------------------
        say("")
        if torch.cuda.is_available():
            report["gpu"] = accelerator_figures(
                checkpoint, table, gpu_lines, work, config, src_vocab, tgt_vocab, gpu_train_batch, torch.device("cuda")
            )
        else:
            report["gpu"] = None
            say("no CUDA device: GPU figures not measured")
        report["load_average_end"] = parts.machine()["load_average"]
        say(f"load average {report['load_average_end']:.1f} at the end")
    if json_path:
        Path(json_path).write_text(json.dumps(report, indent=2, default=str) + "\n")
    if not scores_ok:
        raise SystemExit(EXIT_INTERNAL)  # the scores differ from the reference: a bug


if __name__ == "__main__":
    main()
