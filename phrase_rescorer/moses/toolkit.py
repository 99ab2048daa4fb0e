"""Finding a user's Moses installation: ``--moses DIR``, else the ``MOSES`` environment variable.

A Moses directory is what the Moses documentation calls ``$MOSES``: a built mosesdecoder
checkout (or an installed copy of it) with the decoder at ``bin/moses``, MERT's programs
(``mert``, ``extractor``) in ``bin/`` (mert-moses.pl's ``--mertdir``) and the scripts in
``scripts/``. :func:`find_moses` checks that every program a caller needs is there and
executable, and says which one is missing otherwise.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..errors import UsageError

#: What the experiment runs: the decoder, MERT's two programs and its driver script.
EXPERIMENT_NEEDS = ("bin/moses", "bin/mert", "bin/extractor", "scripts/training/mert-moses.pl")


class MosesNotFound(UsageError):
    """No usable Moses installation where the user pointed (or nowhere pointed at all)."""


@dataclass(frozen=True)
class MosesToolkit:
    root: str

    def path(self, relative: str) -> str:
        return os.path.join(self.root, relative)

    @property
    def decoder(self) -> str:
        return self.path("bin/moses")

    @property
    def bin_dir(self) -> str:
        return self.path("bin")

    @property
    def mert_script(self) -> str:
        return self.path("scripts/training/mert-moses.pl")


def find_moses(
    directory: str | None = None, *, needs: tuple[str, ...] = EXPERIMENT_NEEDS, environ: dict[str, str] | None = None
) -> MosesToolkit:
    """The Moses at ``directory``, else at ``$MOSES``; :class:`MosesNotFound` when neither
    names a directory holding every path in ``needs`` (programs must be executable)."""
    env = os.environ if environ is None else environ
    if directory:
        where, source = directory, "--moses"
    elif env.get("MOSES"):
        where, source = env["MOSES"], "$MOSES"
    else:
        raise MosesNotFound(
            "no Moses: give --moses DIR or set MOSES to a built mosesdecoder directory "
            "(the one holding bin/moses and scripts/)"
        )
    root = os.path.abspath(os.path.expanduser(where))
    if not os.path.isdir(root):
        raise MosesNotFound(f"{where} ({source}): no such directory")
    for relative in needs:
        path = os.path.join(root, relative)
        executable = relative.startswith("bin/")
        if not os.path.isfile(path) or (executable and not os.access(path, os.X_OK)):
            state = "is not executable" if os.path.isfile(path) else "is missing"
            raise MosesNotFound(f"{where} ({source}) is not a usable Moses: {relative} {state}")
    return MosesToolkit(root)
