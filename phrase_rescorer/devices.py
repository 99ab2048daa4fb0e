"""The one device resolver: what ``--device`` and ``RescoreOptions.device`` mean."""

from __future__ import annotations

import torch

from .errors import UsageError


class DeviceError(UsageError):
    """A device that cannot be used here (CUDA asked for without one, or an unknown name)."""


def resolve_device(name: str | torch.device) -> torch.device:
    """``auto``: CUDA when available, else the CPU; ``cpu``, ``cuda``, ``cuda:N`` as torch reads
    them. Asking for CUDA on a machine without it is an error, not a silent fall-back."""
    if isinstance(name, torch.device):
        device = name
    elif name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    else:
        try:
            device = torch.device(name)
        except RuntimeError as e:
            raise DeviceError(f"unknown device {name!r} (auto, cpu, cuda or cuda:N)") from e
    if device.type == "cuda" and not torch.cuda.is_available():
        raise DeviceError(f"--device {name} was asked for, but no CUDA device is available")
    return device
