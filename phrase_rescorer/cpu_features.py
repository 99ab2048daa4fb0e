"""What the CPU offers for the network's matrix products: its vector and matrix units.

bfloat16 is fast on a CPU only where it has bf16 units: Intel's AMX-BF16 tiles (Sapphire Rapids
and later) or the AVX512-BF16 dot-product instructions (Cooper Lake, Zen 4 and later). Without
them torch converts to float32 and back around every product, which is slower than float32
itself, and bf16 then costs exactness for nothing. The flags come from ``/proc/cpuinfo``
(Linux); where it cannot be read nothing is known and nothing is claimed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

#: The flags that matter here, in the order they are printed.
FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_tile", "amx_bf16")


@dataclass(frozen=True)
class CpuFeatures:
    model: str  # "model name" of the first processor; "unknown" when not read
    flags: frozenset[str]
    known: bool  # whether the flags were read at all

    @property
    def bf16_units(self) -> str | None:
        """The fastest bf16 unit ("AMX-BF16", "AVX512-BF16"), None without one."""
        if "amx_bf16" in self.flags:
            return "AMX-BF16"
        if "avx512_bf16" in self.flags:
            return "AVX512-BF16"
        return None

    def describe(self) -> str:
        """e.g. ``AMD EPYC (avx2 yes, avx512f no, avx512_bf16 no, amx_tile no, amx_bf16 no)``."""
        if not self.known:
            return f"{self.model} (CPU flags unknown)"
        listed = ", ".join(f"{f} {'yes' if f in self.flags else 'no'}" for f in FLAGS)
        return f"{self.model} ({listed})"

    def bf16_warning(self) -> str | None:
        """The warning for a bf16 request on this CPU, None where it has bf16 units (or unknown)."""
        if not self.known or self.bf16_units:
            return None
        return (
            f"this CPU ({self.model}) has no bf16 units (neither AMX-BF16 nor AVX512-BF16): torch "
            "emulates bfloat16 here, which is usually slower than float32, and less exact"
        )


def cpu_features(cpuinfo: str | Path = "/proc/cpuinfo") -> CpuFeatures:
    """The features of the first processor listed in ``cpuinfo``."""
    try:
        text = Path(cpuinfo).read_text(errors="replace")
    except OSError:
        return CpuFeatures("unknown", frozenset(), known=False)
    model, flags = "unknown", None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "model name" and model == "unknown":
            model = value.strip()
        elif key == "flags" and flags is None:
            flags = frozenset(value.split())
        if flags is not None and model != "unknown":
            break
    return CpuFeatures(model, flags or frozenset(), known=flags is not None)
