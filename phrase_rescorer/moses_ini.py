"""moses.ini: point a phrase dictionary at a rescored table and give it its extra feature(s)."""

from __future__ import annotations


class MosesIniError(ValueError):
    """A moses.ini that cannot be patched, or that does not match its phrase table."""
