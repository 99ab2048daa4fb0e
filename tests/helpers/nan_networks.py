"""A network file whose weights give NaN, as a diverged training leaves one."""

from __future__ import annotations

from pathlib import Path

import torch


def nan_copy(model: Path, out: Path) -> Path:
    """``model`` written to ``out`` with its first weight matrix all NaN."""
    payload = torch.load(model, weights_only=True)
    weight = next(k for k in payload["state_dict"] if k.endswith("weight"))
    payload["state_dict"][weight].fill_(float("nan"))
    torch.save(payload, out)
    return out
