"""What makes a resumed run the same run: ``differences(saved, now, steps)`` compares the record a
``.last.pt`` holds (``Task.record()`` with the loop's schedule, as saved) with the record the
command's options give now, and says what differs; the loop refuses to resume where it does. The
schedule of the learning rate may differ where it gave the ``steps`` already taken the same rates
(``schedule.same_rates``): a constant rate resumed with a cool-down that starts where the run stands.
Settings added to the record later read, in the records saved before them, as the value that
keeps those runs what they were.

``run_id(record)``: the identity of a run, which every model file it writes records (``info``'s
``run_id``) and ``average`` compares. It is a hash of the record at the run's first start (the
data, the sizes, the seed and every other setting that makes the networks of a run what they
are), kept in the ``.last.pt`` and restored by ``--resume``. A hash, not a random number: the same
data, seed and settings still give byte-identical files, and such runs compute the same networks
(on a CPU exactly; on a GPU from the same initial weights, through the same batches).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from .schedule import SCHEDULE_KEYS, same_rates

#: The value of each setting added to a run's record later, for the runs saved before.
_FIRST_VALUES = {
    "optimizer": "adadelta",
    "label_smoothing": 0.0,
    "lr_decay_steps": None,
    "warmup_steps": None,
    "lr_decay_start": 0,
}
#: Run-record entries compared as a whole: (name, its value when absent).
_NAMED = {
    "arch": ("architecture", "cho2014"),
    "direction": ("direction", "forward"),
    "subwords": ("the number of subword units per side", "none"),
    "target_order": ("the order the target is written in", "left-to-right"),
    "precision": ("the precision of the products (--bf16, --bf16-steps, --bf16-output)", "float32"),
}


def differences(saved: dict[str, Any], now: dict[str, Any], steps: int) -> str | None:
    """Why the run ``saved``, ``steps`` steps in, cannot be resumed with the settings ``now``, as
    the words that follow the ``.last.pt``'s name ("was trained on other data; ..."); None where
    they agree. The learning rate's schedule agrees where it gave those steps the same rates."""
    if saved.get("table_hash") != now["table_hash"]:
        return "was trained on other data; resume with the same input files and data options, or start afresh"
    plain = [k for k in now if k not in ("model", "table_hash", *_NAMED, *SCHEDULE_KEYS)]
    flat_saved = {**saved.get("model", {}), **{k: saved.get(k, _FIRST_VALUES.get(k)) for k in plain}}
    flat_now = {**now["model"], **{k: now[k] for k in plain}}
    diff = [f"{k} was {flat_saved.get(k)!r}, now {v!r}" for k, v in flat_now.items() if flat_saved.get(k) != v]
    if flat_saved.get("batch_size") != flat_now.get("batch_size"):
        diff.append("batch_size counts a global batch: --batch-size x processes")
    schedule_saved = {k: saved.get(k, _FIRST_VALUES[k]) for k in SCHEDULE_KEYS}
    schedule_now = {k: now.get(k, _FIRST_VALUES[k]) for k in SCHEDULE_KEYS}
    if not same_rates(schedule_saved, schedule_now, steps):
        changed = [
            f"{k} was {schedule_saved[k]!r}, now {v!r}" for k, v in schedule_now.items() if schedule_saved[k] != v
        ]
        taken = f"other learning rates for the {steps:,} steps taken"
        diff.append(f"{', '.join(changed)}: {taken} (a cool-down may start at step {steps:,} or later)")
    for key, (name, absent) in _NAMED.items():
        if saved.get(key) != now.get(key):
            diff.append(f"{name} was {saved.get(key) or absent}, now {now.get(key) or absent}")
    if not diff:
        return None
    return (
        f"was trained with other settings ({'; '.join(diff)}); repeat the original options, "
        "or start afresh without --resume"
    )


def run_id(record: dict[str, Any]) -> str:
    """The identity of the run whose record is ``record``: 16 hexadecimal digits."""
    text = json.dumps(record, sort_keys=True, default=repr)
    return hashlib.sha256(text.encode()).hexdigest()[:16]
