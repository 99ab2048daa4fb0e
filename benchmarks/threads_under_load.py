"""``python -m benchmarks.threads_under_load`` (``make bench-load``): ``--threads 2`` against
``--threads 1`` on a quiet machine and on one whose cores are busy.

A Moses pipeline runs its steps side by side (EMS, train-model.perl's two scoring directions),
so a command given ``--threads N`` often shares its cores with other work. This times the real
commands, each in a process of its own started as the programs start (``entry``), from after
the start-up (Python, torch: seconds that do not depend on --threads) to the end of the work:

* ``rescore-phrase-table`` on the first ``--lines`` lines of a real table (a random-weight
  network of the ``small`` preset: speed does not depend on the weights);
* ``nbest`` with a random-weight CSLM (the ``small`` preset over a 500-word shortlist) on a
  synthetic n-best list of ``--hypotheses`` lines (``synthetic_nbest``);

each with ``--threads 1`` and ``--threads 2``, first on the machine as it is ("quiet"), then
with one busy-loop process per usable core started by this script ("loaded"; they are always
killed before it ends). It prints the seconds, and for each the ratio 2 threads / 1 thread:
the programs' target is a ratio of at most 1.5 under load and quiet-machine speed kept.

``--spin`` also times the programs as they ran before their threads were made to sleep while
they wait (``GOMP_SPINCOUNT=300000``, GNU OpenMP's default: docs/performance.md says why), in
the same run, so that both ratios see the same machine.

Other work on the machine changes every figure: run it on an otherwise idle machine, or say
what else ran.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import click

from benchmarks import parts

REPO = Path(__file__).resolve().parents[1]

#: The environment of libgomp's own default wait (spinning up to 300,000 times before sleeping):
#: what the programs ran with before ``entry`` set a passive wait.
SPINNING = {"GOMP_SPINCOUNT": "300000"}


@contextmanager
def busy_cores(count: int) -> Iterator[list[subprocess.Popen[bytes]]]:
    """``count`` busy-loop processes for the time of the block, always ended after it."""
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for _ in range(count):
            procs.append(subprocess.Popen([sys.executable, "-c", "while True: pass"]))
        time.sleep(0.5)  # let them take their cores
        yield procs
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait()


def program_env(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("OMP_NUM_THREADS", None)  # --threads decides
    return {**env, **extra}


#: One run of a program as ``entry`` starts it (OpenMP's wait set, then torch loaded with the
#: command line), timed from after the start-up to the end of the command's work.
_CHILD = """
import sys, time
from phrase_rescorer import threads
threads.wait_passively()
from phrase_rescorer.cli import cli
start = time.perf_counter()
code = cli.main(sys.argv[1:], prog_name="phrase-rescorer", standalone_mode=False)
print(time.perf_counter() - start, file=sys.stderr)
sys.exit(code or 0)
"""


def timed(args: list[str], env: dict[str, str], timeout: float) -> float:
    """Seconds of ``phrase-rescorer ARGS``'s work, its start-up (Python, torch) left out; inf
    when the process ran past ``timeout``."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", _CHILD, "-q", *args],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return float("inf")
    if done.returncode != 0:
        raise click.ClickException(f"{' '.join(args)}: exit {done.returncode}: {done.stderr.decode()[-500:]}")
    return float(done.stderr.split()[-1])


def inputs(work: Path, table: str, lines: int, hypotheses: int) -> dict[str, list[str]]:
    """The commands timed (without --threads), their inputs made under ``work``."""
    import torch

    from benchmarks.synthetic_nbest import base_sentences, synthetic_nbest
    from phrase_rescorer.lm.lm_file import save_lm
    from phrase_rescorer.lm.network import CSLM, PRESETS
    from phrase_rescorer.lm.text import build_vocabulary

    head = work / "table.gz"
    parts.head_of_table(table, lines, head)
    src, tgt = parts.shortlists(str(head), parts.preset_vocab_size("small"))
    parts.random_checkpoint(work / "rnn.pt", parts.model_config("small", src, tgt), src, tgt)

    _, sentences = base_sentences()
    synthetic_nbest(sentences, hypotheses, work / "list.nbest")
    vocab = build_vocabulary(iter(sentences), 500)
    torch.manual_seed(1)
    config = replace(PRESETS["small"], vocab_size=len(vocab))
    save_lm(str(work / "cslm.pt"), CSLM(config), vocab, info={"purpose": "benchmark (random weights)"})
    return {
        "rescore-phrase-table": ["rescore", str(head), str(work / "out.gz"), "--model", str(work / "rnn.pt")],
        "nbest (CSLM)": ["nbest", str(work / "list.nbest"), str(work / "out.nbest"), "-m", str(work / "cslm.pt")],
    }


@parts.command
@parts.table_option
@click.option("--lines", type=click.IntRange(min=1), default=3000, show_default=True, help="Table lines rescored.")
@click.option("--hypotheses", type=click.IntRange(min=1), default=20000, show_default=True, help="N-best lines scored.")
@click.option("--repeats", type=click.IntRange(min=1), default=1, show_default=True, help="Timed runs of each.")
@click.option("--spin", is_flag=True, help="Also time the programs with GNU OpenMP's default spinning wait.")
@click.option(
    "--timeout", type=float, default=300.0, show_default=True, help="Seconds after which one run counts as inf."
)
@parts.json_option
def main(
    table: str | None, lines: int, hypotheses: int, repeats: int, spin: bool, timeout: float, json_path: str | None
) -> None:
    """Time --threads 1 and 2 of rescore-phrase-table and nbest, quiet and under load."""
    from phrase_rescorer.threads import usable_cores

    cores = usable_cores()
    variants: dict[str, dict[str, str]] = {"as shipped": {}}
    if spin:
        variants["spinning (GOMP_SPINCOUNT=300000)"] = SPINNING
    seconds: dict[tuple[str, str, str, int], list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="phrase-rescorer-load-") as tmp:
        commands = inputs(Path(tmp), parts.default_table(table), lines, hypotheses)
        click.echo(
            f"{cores} usable cores; load: {cores} busy-loop processes; {repeats} run(s) each; "
            f"seconds of each command's work, start-up left out"
        )
        for load in ("quiet", "loaded"):
            with busy_cores(cores if load == "loaded" else 0):
                for _ in range(repeats):
                    for variant, extra in variants.items():
                        for name, args in commands.items():
                            for n in (1, 2):
                                s = timed([*args, "--threads", str(n)], program_env(extra), timeout)
                                seconds.setdefault((variant, name, load, n), []).append(s)
    figures: list[dict[str, Any]] = []
    click.echo(f"\n{'variant':34} {'command':22} {'load':7} {'1 thread':>9} {'2 threads':>9} {'ratio':>6}")
    for variant in variants:
        for name in commands:
            for load in ("quiet", "loaded"):
                one = min(seconds[(variant, name, load, 1)])
                two = min(seconds[(variant, name, load, 2)])
                ratio = two / one
                figures.append(
                    dict(variant=variant, command=name, load=load, one_thread=one, two_threads=two, ratio=ratio)
                )
                click.echo(f"{variant:34} {name:22} {load:7} {one:9.2f} {two:9.2f} {ratio:6.2f}")
    if json_path:
        Path(json_path).write_text(
            json.dumps({"figures": figures, "cores": cores, "machine": parts.machine()}, indent=2, default=str) + "\n"
        )


if __name__ == "__main__":
    main()
