"""Rescoring under torchrun: each process rescores one contiguous part of the table, and the
parts are joined, in order, into the output.

    rank 0: one pass over IN finds where parts may start (``sharding.find_cuts``)
    all:    part k of IN -> TableRescorer (any scorer) -> OUT's part k, in a hidden directory
    all:    wait for each other; any failure -> every process raises it, nothing at OUT
    rank 0: parts -> OUT (temporary name, fsync, rename), the hidden directory removed

The output is byte for byte the one-process output for a plain OUT, and its decompressed bytes
are for a compressed OUT (one gzip member, bzip2 or xz stream, or zstd frame per part; see
``sharding``), given the same scorer, the same options and the same threads per process (on
the CPU the default scorer splits a window over its threads, which changes the float32
rounding; torchrun sets OMP_NUM_THREADS=1 when it starts several processes on a machine).
Every process opens IN and the model by the same path and writes beside OUT, so on several
machines they must be on a shared file system.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import time
from collections.abc import Callable, Sequence

import torch

from ..compression import format_of_name
from ..moses.phrase_table import PhraseTableError
from ..output import AtomicOutput, check_distinct_paths, check_output_path
from ..rescoring.engine import TableRescorer, check_lines, load_checkpoints
from ..rescoring.options import ProgressCallback, RescoreOptions, RescoreSummary
from .distributed import Group, portable
from .sharding import IndexProgress, Part, TablePart, concatenate, find_cuts, plan_parts


def rescore_sharded(
    in_path: str,
    out_path: str,
    model_path: str | Sequence[str],
    group: Group,
    *,
    on_progress: ProgressCallback | None = None,
    on_warning: Callable[[str], None] | None = None,
    on_index: IndexProgress | None = None,
    **options,
) -> RescoreSummary:
    """Rescore ``in_path`` into ``out_path`` with the processes of ``group``; every process
    calls it with the same arguments (``options``: the fields of ``RescoreOptions``, with this
    process's device). Progress and warnings are reported by rank 0; the summary counts every
    part. Any process's error is raised in every process."""
    started = time.perf_counter()
    for path in (in_path, out_path):
        if path == "-":
            raise PhraseTableError(
                path,
                None,
                "under torchrun, IN and OUT must be files (each "
                "process reads its own part of IN; the parts are joined into OUT)",
            )
    for model in [model_path] if isinstance(model_path, str) else model_path:
        check_distinct_paths(in_path, out_path, model=model)
    check_output_path(out_path)  # the same refusals, and words, as one process
    opts = RescoreOptions(**options)
    directory, name = os.path.split(os.path.abspath(out_path))

    plan: tuple[list[Part], str, int] | BaseException | None = None
    if group.is_main:
        try:
            check_lines(in_path, opts.max_tokens)  # every line, as one process checks them, before any is scored
            index = find_cuts(in_path, opts.window, opts.window_cap, on_index)
            if index.lines == 0:  # as in one process: an empty table hides a failed earlier step
                raise PhraseTableError(in_path, None, "empty phrase table: no lines to rescore")
            parts_dir = os.path.join(directory, f".{name}.parts-{secrets.token_hex(4)}")
            os.mkdir(parts_dir)
            plan = (plan_parts(index, group.world_size), parts_dir, os.path.getsize(in_path))
        except Exception as e:
            plan = portable(e)
    plan = group.broadcast(plan)
    if isinstance(plan, BaseException):
        raise plan
    assert plan is not None
    parts, parts_dir, in_size = plan
    # each part compressed as OUT is (one stream per part; see ``sharding``)
    suffix = os.path.splitext(out_path)[1].lower() if format_of_name(out_path) else ""
    part_paths = [os.path.join(parts_dir, f"part-{k:05d}{suffix}") for k in range(len(parts))]

    warnings: list[str] = []
    summary: RescoreSummary | None = None
    error: BaseException | None = None
    try:
        summary = _rescore_part(
            in_path, in_size, parts[group.rank], part_paths[group.rank], model_path, opts, on_progress, warnings.append
        )
    except Exception as e:
        error = portable(e)
    except BaseException:  # interrupted: leave nothing behind, let torchrun stop the others
        with contextlib.suppress(OSError):
            os.unlink(part_paths[group.rank])
        if group.is_main:
            shutil.rmtree(parts_dir, ignore_errors=True)
        raise

    group.wait_for_all()
    reports = group.gather((error, summary, warnings[:1]))
    failure = next((e for e, _, _ in reports if e is not None), None)
    if failure is None and group.is_main:
        try:
            concatenate(part_paths, out_path)
        except Exception as e:
            failure = portable(e)
    if group.is_main:
        shutil.rmtree(parts_dir, ignore_errors=True)
    failure = group.broadcast(failure)
    if failure is not None:
        raise failure

    done = [s for _, s, _ in reports]
    first_warning = next((w[0] for _, _, w in reports if w), None)
    if first_warning is not None and on_warning is not None and group.is_main:
        on_warning(first_warning)
    unsorted = [s.first_unsorted_line for s in done if s.first_unsorted_line is not None]
    device = torch.device(opts.device)
    return RescoreSummary(
        lines=sum(s.lines for s in done),
        seconds=time.perf_counter() - started,
        columns=done[0].columns,
        signature=done[0].signature,
        first_unsorted_line=min(unsorted) if unsorted else None,
        device=f"{device.type} x {group.world_size} processes",
        whole_run=True,
    )


def _rescore_part(
    in_path: str,
    in_size: int,
    part: Part,
    part_path: str,
    model_path: str | Sequence[str],
    opts: RescoreOptions,
    on_progress: ProgressCallback | None,
    on_warning: Callable[[str], None],
) -> RescoreSummary:
    if not os.path.isdir(os.path.dirname(part_path)):
        raise PhraseTableError(
            part_path,
            None,
            "the output directory is not the same for every "
            "process (on several machines it must be a shared file system)",
        )
    if os.path.getsize(in_path) != in_size:
        raise PhraseTableError(
            in_path,
            None,
            "not the file that process 0 indexed (on several machines the input must be on a shared file system)",
        )
    engine = TableRescorer(load_checkpoints(model_path), opts, on_progress=on_progress, on_warning=on_warning)
    previous = None if part.previous_source is None else part.previous_source.decode(errors="replace")
    with TablePart(in_path, part) as table, AtomicOutput(part_path) as out:
        return engine.rescore_stream(table, out, in_path, previous_source=previous)
