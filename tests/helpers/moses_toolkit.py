"""The real Moses toolkit for integration tests: $MOSES, else ../shared/tools/moses, else skip."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.helpers.paths import SHARED


def moses_root() -> Path:
    """A Moses installation with bin/moses and scripts/ (skips the test when there is none)."""
    for candidate in (os.environ.get("MOSES"), SHARED / "tools" / "moses"):
        if candidate and (Path(candidate) / "bin" / "moses").exists():
            return Path(candidate)
    pytest.skip("no Moses: set MOSES to a built mosesdecoder (../shared/tools/moses is not beside this checkout)")
