"""Moses' decoder run on a moses.ini: the features its n-best lists carry, and a distinct n-best
list of a source file.

The features are what ``moses -f INI -show-weights`` prints, as mert-moses.pl reads them
(``get_featlist_from_moses``: ``$cmd .= " -show-weights";``): one ``Name= w1 w2 ...`` line per
feature with dense weights, in the order the decoder writes them into n-best lists, and
``Name UNTUNEABLE`` for a feature it leaves out of them (``UnknownWordPenalty0``): those are
skipped, as ``get_featlist_from_file`` skips them (``elsif (/^(\\S+) UNTUNEABLE$/)``).

A run that fails raises :class:`DecoderError` with the decoder's last line on stderr (with a
log file: naming it, and quoting its last lines). The
decoder is a child process: an exception in the caller (Ctrl-C, SIGTERM raised as
``errors.Terminated``) kills it before it propagates (``subprocess.run``).
"""

from __future__ import annotations

import os
import subprocess

from ..errors import HostError
from .nbest import Layout
from .toolkit import MosesToolkit


class DecoderError(HostError):
    """Moses' decoder failed on a moses.ini or an input (exit 6)."""


def _last_line(text: bytes) -> str:
    lines = [line.strip() for line in text.decode("utf-8", "replace").splitlines() if line.strip()]
    return lines[-1] if lines else "no message"


def nbest_layout(toolkit: MosesToolkit, ini: str) -> Layout:
    """The features of the n-best lists the decoder writes with ``ini``, in order, each with its
    number of values (module docstring)."""
    argv = [toolkit.decoder, "-f", os.path.abspath(ini), "-show-weights"]
    result = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True)
    if result.returncode != 0:
        raise DecoderError(f"{ini}: moses -show-weights failed (exit {result.returncode}): {_last_line(result.stderr)}")
    layout = []
    for line in result.stdout.decode("utf-8", "replace").splitlines():
        name, equals, values = line.partition("= ")
        if equals and name and " " not in name:
            layout.append((name, len(values.split())))
    if not layout:
        raise DecoderError(f"{ini}: moses -show-weights printed no 'Name= w1 w2 ...' line")
    return tuple(layout)


def log_tail(path: str, lines: int = 15) -> str:
    """The last ``lines`` lines of the log file ``path`` ("" when it cannot be read)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return ""


def decoder_argv(toolkit: MosesToolkit, ini: str, source: str, threads: int = 1) -> list[str]:
    """The decoder's command line that translates the plain text ``source`` with ``ini``."""
    return [
        toolkit.decoder,
        "-f",
        os.path.abspath(ini),
        "-input-file",
        os.path.abspath(source),
        "-threads",
        str(threads),
    ]


def nbest_options(nbest: str, size: int) -> list[str]:
    """The options that make the decoder write its distinct ``size``-best list to ``nbest`` beside
    its 1-best output."""
    return ["-n-best-list", os.path.abspath(nbest), str(size), "distinct"]


def decode_nbest(
    toolkit: MosesToolkit,
    ini: str,
    source: str,
    nbest: str,
    size: int,
    *,
    threads: int = 1,
    what: str = "",
    log: str | None = None,
) -> None:
    """Write to ``nbest`` the decoder's distinct ``size``-best list of the plain text ``source``
    (``-n-best-list FILE SIZE distinct``), its 1-best output discarded; ``what`` names the input
    in a failure's message (default ``source``).

    ``log``: the decoder's stderr is kept in that file, and the decoder writes its list to
    ``nbest.partial``, renamed onto ``nbest`` once it has exited cleanly; a failure's message
    names the log and quotes its last lines. Without it, stderr is read, and a failure's
    message quotes its last line."""
    target = nbest if log is None else f"{nbest}.partial"
    argv = decoder_argv(toolkit, ini, source, threads) + nbest_options(target, size)
    if log is None:
        result = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    else:
        with open(log, "wb") as err:
            result = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
    if result.returncode != 0 or not os.path.isfile(target):
        failed = f"moses failed (exit {result.returncode}) on {what or source}"
        if log is None:
            raise DecoderError(f"{failed}: {_last_line(result.stderr)}")
        raise DecoderError(f"{failed}; see {log}:\n{log_tail(log)}")
    if log is not None:
        os.replace(target, nbest)
