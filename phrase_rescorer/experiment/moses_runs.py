"""Running Moses: one mert-moses.pl tuning run, and the decoder on a test set (its 1-best output,
and its n-best list from the same search where the run is reranked).

mert-moses.pl prints one line per iteration on stdout (scripts/training/mert-moses.pl:1050)::

    print "($run) BEST at $run: $bestpoint => $devbleu at ".`date`;

which :func:`tune` turns into a progress callback (iteration, dev BLEU of that iteration's n-best
lists on the 0-1 scale). Everything mert-moses.pl writes goes to ``mert.out`` / ``mert.err`` in
the run's directory, so a failure can be read there; the error message quotes the end of
``mert.err``.

Randomness: mert's ``-r SEED`` (``mert -h``: "the random seed (defaults to system clock)") is
given through ``--mertmertargs``, so each run has its own, recorded seed (``--predictable-seeds``
would give every run the same seeds: ``my $seed = $run * 1000;``, mert-moses.pl:901). The value
ends with a space because mert-moses.pl glues the scorer type straight onto it
(``$mert_mert_args = "$mertargs $mertmertargs"; $mert_mert_args .= "$sctype $scconfig";``,
mert-moses.pl:455-457).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
from collections.abc import Callable

from ..errors import EXIT_OS
from ..moses.decoder import DecoderError, decoder_argv, log_tail, nbest_options
from ..moses.decoder import decode_nbest as moses_decode_nbest
from ..moses.toolkit import MosesToolkit
from ..output import AtomicOutput
from .systems import ExperimentError

_BEST = re.compile(r"^\((\d+)\) BEST at \d+: .* => (\S+) at ")
_START = re.compile(r"^run (\d+) start at ")

IterationCallback = Callable[[int, float | None], None]


def mert_argv(
    toolkit: MosesToolkit,
    ini: str,
    dev_source: str,
    dev_reference: str,
    working_dir: str,
    *,
    seed: int,
    threads: int = 1,
    max_iterations: int | None = None,
    nbest: int = 100,
) -> list[str]:
    argv = [
        toolkit.mert_script,
        os.path.abspath(dev_source),
        os.path.abspath(dev_reference),
        toolkit.decoder,
        os.path.abspath(ini),
        f"--working-dir={os.path.abspath(working_dir)}",
        f"--mertdir={toolkit.bin_dir}",
        f"--decoder-flags=-threads {threads}",
        f"--nbest={nbest}",
        f"--mertmertargs=-r {seed} ",
    ]
    if max_iterations is not None:
        argv.append(f"--maximum-iterations={max_iterations}")
    return argv


def tune(
    toolkit: MosesToolkit,
    ini: str,
    dev_source: str,
    dev_reference: str,
    run_dir: str,
    *,
    seed: int,
    threads: int = 1,
    max_iterations: int | None = None,
    nbest: int = 100,
    on_iteration: IterationCallback | None = None,
) -> tuple[str, list[float]]:
    """Tune ``ini`` on the dev set in ``run_dir/mert-work`` (removed first if a previous attempt
    left it); return the tuned moses.ini and the dev BLEU (0-100) MERT reported per iteration."""
    work = os.path.join(run_dir, "mert-work")
    if os.path.exists(work):
        shutil.rmtree(work)  # an interrupted attempt: mert-moses.pl needs a fresh directory
    argv = mert_argv(
        toolkit,
        ini,
        dev_source,
        dev_reference,
        work,
        seed=seed,
        threads=threads,
        max_iterations=max_iterations,
        nbest=nbest,
    )
    out_path, err_path = os.path.join(run_dir, "mert.out"), os.path.join(run_dir, "mert.err")
    bleus: list[float] = []
    with open(out_path, "w", encoding="utf-8") as out, open(err_path, "wb") as err:
        out.write("# " + " ".join(argv) + "\n")
        out.flush()
        # its own process group: on an interruption the decoder mert-moses.pl started goes too
        process = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=err,
            cwd=run_dir,
            start_new_session=True,
            text=True,
            encoding="utf-8",
            errors="replace",
        )
        assert process.stdout is not None
        try:
            for line in process.stdout:
                out.write(line)
                out.flush()
                if (m := _START.match(line)) and on_iteration:
                    on_iteration(int(m.group(1)), None)
                elif m := _BEST.match(line):
                    try:
                        bleus.append(100.0 * float(m.group(2)))
                    except ValueError:
                        continue
                    if on_iteration:
                        on_iteration(int(m.group(1)), bleus[-1])
            code = process.wait()
        except BaseException:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            process.wait()
            raise
    tuned = os.path.join(work, "moses.ini")
    if code != 0 or not os.path.isfile(tuned):
        raise ExperimentError(
            f"mert-moses.pl failed (exit {code}); see {err_path}. Its last lines:\n{log_tail(err_path)}", EXIT_OS
        )
    return tuned, bleus


def decode(
    toolkit: MosesToolkit, ini: str, source: str, output: str, *, threads: int = 1, nbest: tuple[str, int] | None = None
) -> list[str]:
    """Translate ``source`` with ``ini`` into ``output`` (written through ``AtomicOutput`` once
    the decoder has produced one line per source line); return the lines.

    ``nbest`` (path, size): the same decoding also writes its distinct size-best list there (as
    ``path.partial``, renamed once the 1-best output is written; removed on any failure), the
    list that :func:`decode_nbest` would write: one search gives both."""
    partial = None if nbest is None else (f"{nbest[0]}.partial", nbest[1])
    try:
        lines, stdout = _decoded(toolkit, ini, source, output, threads, partial)
        with AtomicOutput(output, compress=False) as out:
            out.write(stdout)
        if nbest is not None and partial is not None:
            os.replace(partial[0], nbest[0])
    except BaseException:
        if partial is not None:
            with contextlib.suppress(FileNotFoundError):
                os.remove(partial[0])
        raise
    return [line.rstrip(" ") for line in lines]


def _decoded(
    toolkit: MosesToolkit, ini: str, source: str, output: str, threads: int, nbest: tuple[str, int] | None
) -> tuple[list[str], bytes]:
    """The decoder's output lines of ``source`` and its bytes, checked: one line per source line,
    and the list ``nbest`` (path, size) written, where asked."""
    with open(source, "rb") as f:
        expected = sum(1 for _ in f)
    log = f"{output}.log"
    argv = decoder_argv(toolkit, ini, source, threads)
    if nbest is not None:
        argv += nbest_options(*nbest)
    with open(log, "wb") as err:
        result = subprocess.run(argv, stdout=subprocess.PIPE, stderr=err)
    if result.returncode != 0:
        raise ExperimentError(
            f"moses failed (exit {result.returncode}) on {source}; see {log}:\n{log_tail(log)}", EXIT_OS
        )
    try:
        lines = result.stdout.decode("utf-8").split("\n")  # newlines only, as Moses counts
    except UnicodeDecodeError as exc:
        raise ExperimentError(f"moses wrote invalid UTF-8 for {source} ({exc}); see {log}", EXIT_OS) from exc
    if lines[-1] == "":
        lines.pop()
    if len(lines) != expected:
        raise ExperimentError(f"moses wrote {len(lines)} lines for the {expected} of {source}; see {log}", EXIT_OS)
    if nbest is not None and not os.path.isfile(nbest[0]):
        raise ExperimentError(f"moses wrote no n-best list for {source}; see {log}", EXIT_OS)
    return lines, result.stdout


def decode_nbest(toolkit: MosesToolkit, ini: str, source: str, output: str, size: int, *, threads: int = 1) -> None:
    """Write the decoder's distinct ``size``-best list of ``source`` to ``output`` (the decoder
    writes a temporary beside it, renamed once it exits cleanly; its stderr in ``output.log``)."""
    try:
        moses_decode_nbest(toolkit, ini, source, output, size, threads=threads, log=f"{output}.log")
    except DecoderError as e:
        raise ExperimentError(str(e), EXIT_OS) from None
