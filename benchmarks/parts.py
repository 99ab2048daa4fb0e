"""The pieces of the benchmark (``bench``): its inputs and its individual measurements.

Inputs: the first lines of a real table, a 10x table made of renamed copies, a random-weight
network of a preset's size saved as a normal checkpoint. Measurements: large matrix-product
GFLOP/s, one timed rescoring through the engine, the peak RSS of a rescoring run in a child
process (the trainer's steps per second: ``training_steps``).
"""

from __future__ import annotations

import gzip
import itertools
import os
import platform
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import click
import numpy as np
import torch

from phrase_rescorer import onednn
from phrase_rescorer.cli.common import ThreadCount
from phrase_rescorer.cpu_features import FLAGS, cpu_features
from phrase_rescorer.data.vocab import Vocabulary
from phrase_rescorer.model.checkpoint import Checkpoint, save_checkpoint
from phrase_rescorer.model.cho2014 import PRESETS, ModelConfig, RNNEncoderDecoder
from phrase_rescorer.moses.table_reader import InputTable
from phrase_rescorer.moses.words import split_words
from phrase_rescorer.rescoring.engine import TableRescorer
from phrase_rescorer.rescoring.options import RescoreOptions, RescoreSummary
from phrase_rescorer.rescoring.scorers import WindowScorer

REPO = Path(__file__).resolve().parents[1]
REAL_TABLE = REPO.parent / "shared" / "data" / "moses-en-fr" / "phrase-table.gz"
SAMPLE = REPO / "tests" / "data" / "sample.en-fr.phrase-table.gz"

#: What every benchmark command shares: its help options, ``--table`` (and its default),
#: ``--threads`` and ``--json``.
command = click.command(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
threads_option = click.option(
    "--threads",
    "-threads",
    type=ThreadCount(),
    metavar="N|all",
    default=None,
    help="CPU threads, a number or 'all'  [default: torch's].",
)
json_option = click.option(
    "--json", "json_path", type=click.Path(dir_okay=False), default=None, help="Also write the figures here."
)
table_option = click.option(
    "--table",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="Moses phrase table  [default: ../shared/data/moses-en-fr/phrase-table.gz, else the bundled sample].",
)


def default_table(table: str | None) -> str:
    return table or str(REAL_TABLE if REAL_TABLE.exists() else SAMPLE)


#: What ``--quick`` uses instead of a preset: seconds, not minutes, on two cores.
QUICK_SIZES = dict(vocab_size=500, embed_dim=16, hidden_dim=32, maxout_dim=16, output_rank=8)


def machine() -> dict[str, object]:
    features = cpu_features()
    cpu = features.model if features.known else (platform.processor() or platform.machine())
    return {
        "cpu": cpu,
        "cpu_flags": {f: f in features.flags for f in FLAGS} if features.known else None,
        "cpu_features": features.describe(),
        "bf16_units": features.bf16_units,
        "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "logical_cpus": os.cpu_count(),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "onednn": onednn.available(),
        "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "load_average": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
    }


class ReferenceProduct:
    """The n x n x n product against which the benchmark rates its work, ready to be timed one at
    a time: alone (``matmul_gflops``) or between the timed steps, so that both are measured in the
    same seconds of a machine whose speed drifts (``training_steps.timed_steps``). ``library``:
    "blas", torch.mm (MKL in torch's wheels), or "onednn", the oneDNN product the training's
    recurrences use (``phrase_rescorer.onednn``; float32 on the CPU only), which on an AMD EPYC
    ran the 2048^3 product 15-20 % faster than MKL. ``shape`` (m, k, n): an (m, k) by (k, n)
    product instead of n x n x n (``product_ceiling`` times the training step's shapes so)."""

    def __init__(
        self,
        device: torch.device,
        dtype: torch.dtype = torch.float32,
        n: int = 2048,
        library: str = "blas",
        shape: tuple[int, int, int] | None = None,
    ):
        if library not in product_libraries(device, dtype):
            raise ValueError(f"no {library} product for {dtype} on {device}")
        self.device, self.library = device, library
        m, k, n = shape or (n, n, n)
        self.flops = 2 * m * k * n
        self.a = torch.randn(m, k, device=device).to(dtype)
        # oneDNN takes a b^T: b as (n, k) there, (k, n) for the BLAS
        self.b = torch.randn(*((n, k) if library == "onednn" else (k, n)), device=device).to(dtype)
        self.c = torch.empty(m, n, device=device, dtype=dtype)  # no allocation between the timed steps

    def seconds(self) -> float:
        """Wall time of one product."""
        synchronize(self.device)
        t = time.perf_counter()
        if self.library == "onednn":
            onednn.times_transposed(self.a, self.b)  # a b^T: the same work
        else:
            torch.mm(self.a, self.b, out=self.c)
        synchronize(self.device)
        return time.perf_counter() - t


def product_libraries(device: torch.device, dtype: torch.dtype = torch.float32) -> list[str]:
    """The libraries ``ReferenceProduct`` can time here: "blas", and "onednn" for float32 on the
    CPU where torch carries it (``onednn.available``), whichever the training's products use."""
    here = device.type == "cpu" and dtype == torch.float32 and onednn.available()
    return ["blas", "onednn"] if here else ["blas"]


def matmul_gflops(
    device: torch.device, dtype: torch.dtype = torch.float32, n: int = 2048, repeats: int = 5, library: str = "blas"
) -> float:
    """Best rate of an n x n x n matrix product (the machine's practical peak for this dtype)."""
    product = ReferenceProduct(device, dtype, n, library)
    product.seconds()  # the first one warms up
    return product.flops / min(product.seconds() for _ in range(repeats)) / 1e9


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


# --- inputs ------------------------------------------------------------------------------------


def head_of_table(table: str, lines: int | None, out: Path) -> int:
    """The first ``lines`` lines (all when None) of ``table`` (plain or compressed, read by the
    package's reader) as a gzip file; the count."""
    with InputTable(table, check_scores=False) as t:
        data = b"".join(e.raw + e.terminator for e in itertools.islice(t, lines))
    out.write_bytes(gzip.compress(data, compresslevel=1))
    return data.count(b"\n")


def renamed_copies(table: Path, copies: int, out: Path) -> None:
    """``copies`` copies of a table, the source phrases of copy k prefixed with the token ``@k``:
    distinct lines, still sorted by source (LC_ALL=C), the same phrase lengths plus one."""
    width = len(str(copies - 1))
    with gzip.open(out, "wb", compresslevel=1) as w:
        for k in range(copies):
            tag = f"@{k:0{width}d} ".encode()
            with gzip.open(table, "rb") as f:
                for line in f:
                    w.write(tag + line)


def shortlists(table: str, size: int) -> tuple[Vocabulary, Vocabulary]:
    """Shortlists of ``size`` tokens per side from a whole table, filled up with unused
    placeholder tokens when the table has fewer types, so that the network has the preset's
    output size whatever the table."""
    counts: tuple[Counter[str], Counter[str]] = (Counter(), Counter())
    with InputTable(table) as t:
        for entry in t:
            counts[0].update(split_words(entry.source))
            counts[1].update(split_words(entry.target))
    vocabs = []
    for c in counts:
        types = list(c)
        v = Vocabulary.from_counts(types, np.array([c[t] for t in types]), size)
        fill = [f"<unused-{i}>" for i in range(size - len(v))]
        vocabs.append(Vocabulary(v.tokens + fill) if fill else v)
    return vocabs[0], vocabs[1]


def model_config(preset: str, src: Vocabulary, tgt: Vocabulary) -> ModelConfig:
    sizes = QUICK_SIZES if preset == "quick" else PRESETS[preset]
    return ModelConfig(
        src_vocab_size=len(src),
        tgt_vocab_size=len(tgt),
        embed_dim=sizes["embed_dim"],
        hidden_dim=sizes["hidden_dim"],
        maxout_dim=sizes["maxout_dim"],
        output_rank=sizes["output_rank"],
    )


def random_checkpoint(path: Path, config: ModelConfig, src: Vocabulary, tgt: Vocabulary, seed: int = 1) -> None:
    """A network of the given size with the paper's random initialisation, saved normally."""
    torch.manual_seed(seed)
    model = RNNEncoderDecoder(config)
    save_checkpoint(str(path), model, src, tgt, info={"purpose": "benchmark (random weights)"})


def preset_vocab_size(preset: str) -> int:
    return int((QUICK_SIZES if preset == "quick" else PRESETS[preset])["vocab_size"])


# --- measurements ------------------------------------------------------------------------------


def rescore(checkpoint: Checkpoint, table: Path, out: Path, scorer: str | WindowScorer, device: str) -> RescoreSummary:
    """One rescoring through the engine that the CLI drives (``rescore_table``'s path), in the
    ``logprob`` format so that scores compare exactly. The engine's own timer excludes loading
    the model file."""
    name = scorer if isinstance(scorer, str) else "prefix"
    options = RescoreOptions(score_format="logprob", device=device, scorer=name)
    engine = TableRescorer(checkpoint, options, scorer=None if isinstance(scorer, str) else scorer)
    return engine.rescore(str(table), str(out))


def log_probs(path: Path) -> np.ndarray:
    """The last score of every line (the appended logprob column)."""
    with gzip.open(path, "rb") as f:
        return np.array([float(line.split(b" ||| ")[2].rsplit(b" ", 1)[1]) for line in f])


_CHILD = """
import resource, sys, torch
torch.set_num_threads(int(sys.argv[4]))
from phrase_rescorer.rescoring.engine import rescore_table
summary = rescore_table(sys.argv[1], sys.argv[2], sys.argv[3], device="cpu", scorer=sys.argv[5])
try:  # this process's own high-water mark (getrusage would count the parent's pages at fork)
    kb = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM:"))
except OSError:
    kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(summary.lines, summary.seconds, kb)
"""


def rescore_process(
    table: Path, out: Path, checkpoint: Path, threads: int, scorer: str = "prefix"
) -> tuple[int, float, float]:
    """Rescore ``table`` in a process of its own: (lines, engine seconds, peak resident memory in
    MB of the whole process: Python, torch, the network, the engine)."""
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    args = [sys.executable, "-c", _CHILD, str(table), str(out), str(checkpoint), str(threads), scorer]
    done = subprocess.run(args, env=env, stdout=subprocess.PIPE, text=True, check=True)
    lines, seconds, kb = done.stdout.split()[-3:]
    return int(lines), float(seconds), int(kb) / 1024


def size_variant(preset: str, src: Vocabulary, tgt: Vocabulary) -> tuple[ModelConfig, Vocabulary, Vocabulary]:
    """A preset's network over the head of larger shortlists (frequency-ordered, so the head is
    the preset's own shortlist): (config, source shortlist, target shortlist)."""
    v = preset_vocab_size(preset)
    src, tgt = Vocabulary(src.tokens[:v]), Vocabulary(tgt.tokens[:v])
    return model_config(preset, src, tgt), src, tgt
