"""Where the Moses configuration files that come with the package are (``moses_configs/``: the
EMS fragment, the annotated 5-feature moses.ini, their notes).

A wheel installs them inside the package, as ``phrase_rescorer/moses_configs/`` (pyproject.toml
maps the checkout's top-level ``moses_configs/`` there); run from a checkout, they are the
checkout's own ``moses_configs/``.
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent.parent
#: Installed from a wheel, then in a checkout (beside the package).
_CANDIDATES = (_PACKAGE / "moses_configs", _PACKAGE.parent / "moses_configs")


class ConfigsNotFound(FileNotFoundError):
    """Neither an installed nor a checkout ``moses_configs/`` is there (a broken install)."""


def configs_dir() -> Path:
    """The directory of the Moses configuration files (absolute)."""
    for candidate in _CANDIDATES:
        if (candidate / "ems-rnn-rescoring.config").is_file():
            return candidate
    raise ConfigsNotFound(
        "moses_configs/ is not installed with this copy of phrase_rescorer (looked in "
        + " and ".join(str(c) for c in _CANDIDATES)
        + "); reinstall it from a wheel or a checkout"
    )
