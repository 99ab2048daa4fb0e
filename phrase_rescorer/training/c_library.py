"""A loop written in C, compiled on first use for this CPU and loaded with ``ctypes``.

The training loops that torch would run as many passes over memory (Adadelta's update,
``adadelta_loop``; the GRU's gates in its backward pass, ``gru_gates``; the output layer's
log-softmax, ``target_log_probs``) are written in C, in the ``.c`` files beside their modules
(package data, read by ``c_source``), and built by ``CLibrary``: with the machine's C compiler
(``$CC``, else ``cc``; its words are the command, so ``CC="ccache gcc"`` works) for this CPU
(``-march=native``, or ``-mcpu=native``, or the compiler's default target: the first it accepts;
vectorized; multiply-adds fused only where the source writes ``fmaf``: ``-ffp-contract=off``).
``ctypes`` releases the GIL while a loop runs.

The library is kept in ``$PHRASE_RESCORER_CACHE`` (default ``$XDG_CACHE_HOME/phrase_rescorer``,
else ``~/.cache/phrase_rescorer``) under a name that hashes the source, the flags and the macros
the compiler predefines for that target (its version and every instruction-set extension it will
use), so a cache shared by machines of different CPUs never hands one the other's instructions.
Building takes under a second, in an exclusive temporary directory; the file is synced, then
linked into place, and one already there (built by another process, perhaps loaded) is kept; a
cached file that does not load is built again.

A loop split over threads runs its parts with ``run_parts`` (``run_parts.h``, which the library's
source includes): a library asked for with ``openmp=True`` is first built with ``-fopenmp`` and kept
only where its OpenMP runtime is torch's own (the same ``omp_get_max_threads`` as torch's
``libgomp``), so that its parts run on the threads torch's operators use (kept waiting, asleep
under the programs' ``OMP_WAIT_POLICY=PASSIVE``: threads.py), rather than on new threads that
would compete with them for the cores; elsewhere (no
OpenMP, another runtime) the same source is built without it and starts pthreads per call.

Where no compiler works, ``load()`` returns None and ``problem()`` says why: each caller keeps its
pure-torch computation.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import re
import shlex
import subprocess
import tempfile
from collections.abc import Callable
from importlib import resources
from pathlib import Path

import torch


def c_source(name: str) -> str:
    """The C source file ``name`` shipped beside this module (package data, read through
    importlib.resources), each ``#include "FILE"`` line replaced by that file's text: the whole
    source the compiler sees, which the cached library's name hashes."""
    text = resources.files(__package__).joinpath(name).read_text(encoding="utf-8")
    return re.sub(r'^#include "([\w.]+)"\n', lambda m: c_source(m.group(1)), text, flags=re.MULTILINE)


#: ``run_parts(work, parts_at, size, threads)`` and ``parts(threads)`` (run_parts.h): a loop's parts
#: on torch's OpenMP threads or on pthreads (module text); the sources that split a loop include it.
RUN_PARTS = c_source("run_parts.h")

#: ``CLibrary.threads_from`` of a library whose parts run on torch's own OpenMP threads.
OPENMP_THREADS = "torch's OpenMP threads"

FLAGS = ("-std=gnu99", "-O3", "-ffp-contract=off", "-fno-math-errno", "-fPIC", "-shared", "-pthread")

#: This CPU's own instructions, as the compiler spells them (gcc and clang on x86: -march; clang on
#: Arm before version 15: -mcpu), else the compiler's default target: the first it accepts.
TARGETS: tuple[tuple[str, ...], ...] = (("-march=native",), ("-mcpu=native",), ())


def cache_dir() -> Path:
    """Where built libraries are kept (see the module's text)."""
    given = os.environ.get("PHRASE_RESCORER_CACHE")
    if given:
        return Path(given)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "phrase_rescorer"


def _run(command: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True, errors="replace", timeout=300)


def _failed(compiler: list[str], done: subprocess.CompletedProcess[str]) -> RuntimeError:
    first = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[0]
    return RuntimeError(f"{' '.join(compiler)} failed: {first}")


def _target(compiler: list[str]) -> tuple[tuple[str, ...], str]:
    """The first of ``TARGETS`` the compiler accepts, and the macros it then predefines: its
    version and every instruction-set extension it will use, which the cache key hashes."""
    done = None
    for flags in TARGETS:
        done = _run([*compiler, *flags, "-dM", "-E", "-x", "c", os.devnull])
        if done.returncode == 0:
            return flags, done.stdout
    assert done is not None
    raise _failed(compiler, done)


class CLibrary:
    """One C source, built and loaded once per process. ``name`` names its cached files;
    ``declare`` sets the ``ctypes`` signatures of its functions on the loaded library."""

    def __init__(self, name: str, source: str, declare: Callable[[ctypes.CDLL], None], openmp: bool = False) -> None:
        self.name, self.source, self.declare, self.openmp = name, source, declare, openmp
        self._loaded: list[ctypes.CDLL | None] = []
        self._problem: list[str] = []
        self.threads_from = ""  # once loaded: OPENMP_THREADS or "pthreads"

    def build(self, compiler: list[str], again: bool = False, extra: tuple[str, ...] = ()) -> Path:
        """The library for this compiler and CPU (and ``extra`` flags): from the cache, else built
        into it (``again``: the cached file would not load, build it anew)."""
        target_flags, macros = _target(compiler)
        flags = (*FLAGS, *target_flags, *extra)
        key = hashlib.sha256("\0".join((self.source, " ".join(flags), macros)).encode()).hexdigest()[:16]
        directory = cache_dir()
        target = directory / f"{self.name}-{key}.so"
        if target.exists() and not again:
            return target
        try:
            directory.mkdir(parents=True, exist_ok=True)
            building = tempfile.TemporaryDirectory(dir=directory, prefix=".build-")
        except OSError as e:
            raise RuntimeError(f"{e}; set PHRASE_RESCORER_CACHE to a writable directory") from e
        with building as tmp:
            source = Path(tmp) / f"{self.name}.c"
            source.write_text(self.source, encoding="utf-8")
            built = Path(tmp) / f"{self.name}.so"
            done = _run([*compiler, *flags, "-o", str(built), str(source), "-lm"])
            if done.returncode != 0:
                raise _failed(compiler, done)
            with open(built, "rb") as f:
                os.fsync(f.fileno())
            if again:
                os.replace(built, target)
            else:
                # A library that another process (another node of a shared home) has built and
                # loaded already is kept, never replaced under it.
                try:
                    os.link(built, target)
                except FileExistsError:
                    pass
                except OSError:  # a file system without hard links
                    os.replace(built, target)
        return target

    def load(self) -> ctypes.CDLL | None:
        """The library (built on first use, then from the cache), or None where it cannot be
        built or loaded here; ``problem()`` says why."""
        if not self._loaded:
            try:
                compiler = shlex.split(os.environ.get("CC") or "cc")
                if not compiler:
                    raise RuntimeError("CC is set to nothing")
                lib = self._with_torchs_openmp(compiler) if self.openmp else None
                self.threads_from = OPENMP_THREADS if lib is not None else "pthreads"
                if lib is None:
                    lib = self._built(compiler, ())
                self.declare(lib)
                self._loaded.append(lib)
            except (OSError, RuntimeError, subprocess.SubprocessError, ValueError) as e:
                self._problem.append(str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__)
                self._loaded.append(None)
        return self._loaded[0]

    def _built(self, compiler: list[str], extra: tuple[str, ...]) -> ctypes.CDLL:
        try:
            return ctypes.CDLL(str(self.build(compiler, extra=extra)))
        except OSError:  # a cached file that does not load (cut short, another system)
            return ctypes.CDLL(str(self.build(compiler, again=True, extra=extra)))

    def _with_torchs_openmp(self, compiler: list[str]) -> ctypes.CDLL | None:
        """The OpenMP build, where the compiler makes one and its runtime is torch's (module text)."""
        torchs = Path(torch.__file__).parent / "lib" / "libgomp.so.1"
        try:
            lib = self._built(compiler, ("-fopenmp",))
            theirs = ctypes.cast(ctypes.CDLL(str(torchs)).omp_get_max_threads, ctypes.c_void_p).value
            lib.omp_runtime.restype = ctypes.c_void_p
            return lib if theirs is not None and lib.omp_runtime() == theirs else None
        except (OSError, AttributeError, RuntimeError, subprocess.SubprocessError):
            return None

    def problem(self) -> str | None:
        """Why the library cannot be used here (after trying to build it), None where it can."""
        return None if self.load() is not None else self._problem[0]
