"""The C loops' threads (``training.c_library``, run_parts.h): built with OpenMP only where the
runtime is torch's own, else with pthreads, and the two builds giving the same results bit for
bit on several threads."""

from __future__ import annotations

import ctypes
import subprocess
from pathlib import Path

import pytest
import torch

from phrase_rescorer.training import adadelta_loop, c_library
from phrase_rescorer.training import target_log_probs as tlp
from phrase_rescorer.training.c_library import CLibrary


def _pair(module: object) -> tuple[ctypes.CDLL, ctypes.CDLL]:
    """The module's library built with OpenMP (where it can be) and without."""
    library: CLibrary = module.LIBRARY  # type: ignore[attr-defined]
    if library.load() is None:
        pytest.skip(f"the loops cannot be built here: {library.problem()}")
    plain = CLibrary(library.name, library.source, library.declare, openmp=False)
    other = plain.load()
    assert other is not None and plain.threads_from == "pthreads"
    return library.load(), other  # type: ignore[return-value]


def _openmp_here() -> bool:
    """Whether torch runs on a libgomp in its own lib directory and ``cc -fopenmp`` compiles."""
    if not (Path(torch.__file__).parent / "lib" / "libgomp.so.1").exists():
        return False
    try:
        done = subprocess.run(["cc", "-fopenmp", "-E", "-x", "c", "-"], input="#include <omp.h>\n", capture_output=True)
    except OSError:
        return False
    return done.returncode == 0


def test_the_openmp_build_is_kept_only_on_torchs_own_runtime() -> None:
    lib = adadelta_loop.LIBRARY.load()
    if lib is None:
        pytest.skip(f"the loops cannot be built here: {adadelta_loop.LIBRARY.problem()}")
    if adadelta_loop.LIBRARY.threads_from == c_library.OPENMP_THREADS:
        torchs = ctypes.CDLL(str(Path(torch.__file__).parent / "lib" / "libgomp.so.1")).omp_get_max_threads
        assert lib.omp_runtime() == ctypes.cast(torchs, ctypes.c_void_p).value
    else:
        assert adadelta_loop.LIBRARY.threads_from == "pthreads"
        assert not _openmp_here(), "torch's libgomp and an OpenMP compiler are here, yet pthreads were chosen"


def test_without_torchs_runtime_the_loops_start_pthreads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """As where torch runs on another OpenMP (or none): the pthread build."""
    if adadelta_loop.LIBRARY.load() is None:
        pytest.skip(f"the loops cannot be built here: {adadelta_loop.LIBRARY.problem()}")
    monkeypatch.setattr(c_library.torch, "__file__", str(tmp_path / "torch" / "__init__.py"))
    library = CLibrary("adadelta", adadelta_loop.SOURCE, adadelta_loop.LIBRARY.declare, openmp=True)
    assert library.load() is not None and library.threads_from == "pthreads"


def test_both_builds_update_alike_bit_for_bit_on_three_threads() -> None:
    openmp, pthreads = _pair(adadelta_loop)
    gen = torch.Generator().manual_seed(2)
    sizes = [700_000, 300_001, 5]  # three parts of 2^18 elements or more
    start = [[torch.randn(n, generator=gen) for n in sizes] for _ in range(2)]
    start.append([torch.rand(n, generator=gen) for n in sizes])
    start.append([torch.rand(n, generator=gen) for n in sizes])
    results = []
    for lib in (openmp, pthreads):
        tensors = [tuple(t[i].clone() for t in start) for i in range(len(sizes))]
        adadelta_loop.step(lib, tensors, lr=1.0, rho=0.95, eps=1e-6, threads=3, grad_scale=0.5)
        results.append(tensors)
    for a, b in zip(*results, strict=True):
        for x, y in zip(a, b, strict=True):
            assert torch.equal(x, y)


@pytest.mark.parametrize("eps", [0.0, 0.1])  # 0.1: the label-smoothed loop of the sentence networks
def test_both_builds_give_the_same_target_log_probs_bit_for_bit_on_three_threads(eps: float) -> None:
    openmp, pthreads = _pair(tlp)
    gen = torch.Generator().manual_seed(3)
    u0, w0 = torch.randn(200, 12, generator=gen), torch.randn(333, 12, generator=gen)
    b0 = torch.randn(333, generator=gen)
    targets = torch.randint(0, 333, (200,), generator=gen)
    before = torch.get_num_threads()
    results = []
    try:
        torch.set_num_threads(3)
        for lib in (openmp, pthreads):
            u, w, b = (t.clone().requires_grad_() for t in (u0, w0, b0))
            out = tlp._CompiledTargetLogProbs.apply(u, w, b, targets, lib, eps, 0, None)
            out.sum().backward()
            results.append((out.detach(), u.grad, w.grad, b.grad))
    finally:
        torch.set_num_threads(before)
    for x, y in zip(*results, strict=True):
        assert torch.equal(x, y)


def test_the_sources_are_the_package_files_with_their_include_inlined() -> None:
    """The loops' C lives in .c files of the package (data the wheel ships, read through
    importlib.resources); a ``#include "run_parts.h"`` line becomes that file's text, so the
    source the compiler sees, and the cache key that hashes it, holds the header too."""
    here = Path(c_library.__file__).parent
    assert (here / "adadelta_loop.c").read_text().replace(
        '#include "run_parts.h"\n', (here / "run_parts.h").read_text()
    ) == adadelta_loop.SOURCE
    assert "static int run_parts(" in tlp.SOURCE and '#include "' not in tlp.SOURCE
    assert (here / "run_parts.h").read_text() == c_library.RUN_PARTS


def test_the_cached_library_changes_with_its_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A changed source (an edited .c file, or the header it includes) is built anew under
    another name, never served the library of the old source from the cache."""
    monkeypatch.setenv("PHRASE_RESCORER_CACHE", str(tmp_path))
    if adadelta_loop.LIBRARY.load() is None:
        pytest.skip(f"the loops cannot be built here: {adadelta_loop.LIBRARY.problem()}")
    compiler = ["cc"]

    def declare(lib: ctypes.CDLL) -> None:
        lib.answer.restype = ctypes.c_int

    first = CLibrary("answer", "int answer(void) { return 1; }\n", declare).build(compiler)
    again = CLibrary("answer", "int answer(void) { return 1; }\n", declare).build(compiler)
    second = CLibrary("answer", "int answer(void) { return 2; }\n", declare).build(compiler)
    assert first == again and first != second
    assert ctypes.CDLL(str(first)).answer() == 1 and ctypes.CDLL(str(second)).answer() == 2
    # an edited header changes the source of every file that includes it, and so its library
    header = "static int base(void) { return %d; }\n"
    source = '#include "base.h"\nint answer(void) { return base(); }\n'
    built = []
    for value in (3, 4):
        files = _Files({"answer.c": source, "base.h": header % value})
        monkeypatch.setattr(c_library.resources, "files", lambda package, files=files: files)
        built.append(CLibrary("answer", c_library.c_source("answer.c"), declare).build(compiler))
    assert built[0] != built[1]
    assert [ctypes.CDLL(str(path)).answer() for path in built] == [3, 4]


class _Files:
    """importlib.resources.files() of a package holding the given texts."""

    def __init__(self, texts: dict[str, str]) -> None:
        self.texts = texts

    def joinpath(self, name: str) -> _Files:
        return _Text(self.texts[name])  # type: ignore[return-value]


class _Text:
    def __init__(self, text: str) -> None:
        self.text = text

    def read_text(self, encoding: str = "utf-8") -> str:
        return self.text
