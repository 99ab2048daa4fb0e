"""How the Moses tests find Moses, and the reason they give when they skip."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import moses as m


def _fake_moses(root: Path) -> Path:
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "moses").write_bytes(b"")
    (root / "bin" / "moses").chmod(0o755)
    return root


def test_moses_env_first_then_shared_then_a_reason(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shared = tmp_path / "shared"
    monkeypatch.setattr(m, "SHARED", shared)
    monkeypatch.delenv("MOSES", raising=False)
    found, reason = m.find_moses()  # a fresh clone: no MOSES, no ../shared
    assert found is None and "MOSES is not set" in reason and str(shared / "tools" / "moses") in reason
    beside = _fake_moses(shared / "tools" / "moses")
    assert m.find_moses() == (beside, "")
    own = _fake_moses(tmp_path / "own")
    monkeypatch.setenv("MOSES", str(own))
    assert m.find_moses() == (own, "")
    monkeypatch.setenv("MOSES", str(tmp_path / "nothing"))  # named, but not a Moses: not replaced
    found, reason = m.find_moses()
    assert found is None and "nothing" in reason and "no such directory" in reason
    monkeypatch.setenv("MOSES", str(shared))  # a directory, but no decoder in it
    found, reason = m.find_moses()
    assert found is None and "bin/moses is missing" in reason
