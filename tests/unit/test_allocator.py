"""``allocator.keep_freed_memory``: glibc takes the settings, the user's own variables stand, and a
freed 20 MB block is reused instead of faulted in again (the reason for the settings)."""

from __future__ import annotations

import os
import platform
import resource
import subprocess
import sys

import pytest

from phrase_rescorer import allocator

GLIBC = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"

# A child process: allocate, touch and free a 20 MB block, then count the minor page faults of
# doing it again. Under glibc's defaults the block is a fresh mapping each time (~5,000 faults).
_REUSE = """
import ctypes, resource, sys
from phrase_rescorer.allocator import keep_freed_memory
if sys.argv[1] == "keep":
    assert keep_freed_memory()
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
size = 20 * 1024 * 1024
def cycle():
    p = libc.malloc(size)
    ctypes.memset(p, 1, size)
    libc.free(p)
cycle()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
cycle()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _faults(mode: str) -> int:
    """The child's faults, in an environment without the user's own malloc settings."""
    mine = (*allocator.USER_SETTINGS, "GLIBC_TUNABLES", "LD_PRELOAD")
    env = {k: v for k, v in os.environ.items() if k not in mine}
    done = subprocess.run([sys.executable, "-c", _REUSE, mode], capture_output=True, text=True, check=True, env=env)
    return int(done.stdout)


@pytest.mark.skipif(not GLIBC, reason="glibc's malloc only")
def test_a_freed_block_is_reused_instead_of_faulted_in_again() -> None:
    pages = 20 * 1024 * 1024 // resource.getpagesize()
    assert _faults("default") > pages // 2  # the premise: glibc maps it afresh
    assert _faults("keep") < pages // 20


@pytest.mark.skipif(not GLIBC, reason="glibc's malloc only")
@pytest.mark.parametrize(
    ("name", "value"), [("MALLOC_TRIM_THRESHOLD_", "131072"), ("GLIBC_TUNABLES", "glibc.malloc.mmap_threshold=65536")]
)
def test_the_users_own_settings_stand(monkeypatch: pytest.MonkeyPatch, name: str, value: str) -> None:
    monkeypatch.setenv(name, value)
    assert allocator.keep_freed_memory() is False


def test_nothing_is_done_off_linux(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "platform", "darwin")
    assert allocator.keep_freed_memory() is False
