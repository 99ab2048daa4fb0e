"""Reading a ``torch.profiler`` trace of training steps (``training_profile``): the step's phases
(the named ranges of ``Loop.step``), each operator's own time by kind (matrix products with the
rate the profiler's FLOP count gives them, element-wise, softmax and loss, ...), and the matrix
products by shape; and the time of the parts of a network that a profile names (``phase_times``)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

PHASES = ("train.batch", "train.forward", "train.backward", "train.clip", "train.optimizer")
MATMUL = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::addmv", "aten::mv", "aten::dot"}
#: oneDNN's product (``training.products``): x W^T, with or without an addend.
ONEDNN_LINEAR = "mkldnn::_linear_pointwise"
_KINDS = (  # (kind, name fragments after "aten::"); the first match wins
    ("softmax and loss", ("softmax", "nll_loss", "cross_entropy")),
    ("reductions", ("sum", "norm", "mean", "amax", "max_all")),
    (
        "copies and indexing",
        (
            "cat",
            "stack",
            "index",
            "embedding",
            "copy",
            "clone",
            "contiguous",
            "zero",
            "fill",
            "empty",
            "full",
            "arange",
            "gather",
            "scatter",
            "where",
            "to",
            "split",
            "unbind",
            "slice",
            "select",
            "narrow",
            "unsqueeze",
            "view",
            "reshape",
            "transpose",
            "permute",
            "expand",
            "as_strided",
            "t",
            "detach",
            "sort",
            "argsort",
            "alias",
            "resize",
        ),
    ),
    (
        "element-wise",
        (
            "sigmoid",
            "tanh",
            "mul",
            "add",
            "sub",
            "div",
            "sqrt",
            "neg",
            "max",
            "maximum",
            "clamp",
            "lerp",
            "pow",
            "exp",
            "log",
            "threshold",
            "reciprocal",
            "rsub",
            "addcmul",
            "addcdiv",
        ),
    ),
)
KINDS = ("matrix products", *(k for k, _ in _KINDS), "autograd bookkeeping", "other operators")


def is_operator(name: str) -> bool:
    """An operator (or autograd's work on one), not a named range such as a phase or
    ``Optimizer.step#...``, whose own time is Python between operators."""
    return name.startswith(("aten::", "autograd::", "mkldnn::")) or "Backward" in name


def kind_of(name: str) -> str:
    """The kind of an operator by its profiler name."""
    if name in MATMUL or name == ONEDNN_LINEAR:
        return "matrix products"
    if name.startswith("autograd::") or "Backward" in name:
        return "autograd bookkeeping"
    op = name[len("aten::") :].strip("_")
    for kind, fragments in _KINDS:
        if any(op == f or op.startswith(f + "_") or op.endswith("_" + f) or f"_{f}_" in op for f in fragments):
            return kind
    return "other operators"


@dataclass(frozen=True)
class Shape:
    """A product of (m, k) by (k, n)."""

    m: int
    k: int
    n: int

    @property
    def flops(self) -> int:
        return 2 * self.m * self.k * self.n


def shape_of(name: str, shapes: list[list[int]]) -> Shape | None:
    """The (m, k, n) of one profiled matrix-product call from its inputs' shapes: ``aten::mm``
    (a, b), ``aten::addmm`` (c, a, b), oneDNN's x W^T (x, W or x, the addend, W); None for other
    operators (batched products, products of vectors) or shapes that do not multiply."""
    matrices = [s for s in shapes if len(s) == 2]
    if name == "aten::mm" and len(matrices) in (2, 3):  # a third: the out= tensor
        (m, k), (k2, n) = matrices[:2]
    elif name == "aten::addmm" and len(shapes) >= 3 and len(shapes[1]) == len(shapes[2]) == 2:
        (m, k), (k2, n) = shapes[1], shapes[2]
    elif name == ONEDNN_LINEAR and len(matrices) in (2, 3):
        (m, k), (n, k2) = matrices[0], matrices[-1]
    else:
        return None
    return Shape(m, k, n) if k == k2 and m and k and n else None


def linear_flops(name: str, shapes: list[list[int]]) -> int:
    """FLOPs of one call of oneDNN's x W^T (the profiler counts none), from its inputs' shapes
    (``shape_of``); 0 for any other operator."""
    shape = shape_of(name, shapes) if name == ONEDNN_LINEAR else None
    return shape.flops if shape else 0


def _operator_time(event) -> float:
    """Own time (microseconds) of the operators under a range, nested ranges looked through."""
    return sum(c.self_cpu_time_total if is_operator(c.name) else 0.0 for c in _descendants(event))


def _descendants(event):
    for c in event.cpu_children:
        yield c
        yield from _descendants(c)


def analyse(prof, steps: int, wall_s: float) -> dict[str, Any]:
    """Per-step milliseconds by phase and by kind of operator, and the matrix products by shape."""
    per_step = 1e-3 / steps  # profiler microseconds, summed over the steps -> ms per step
    phases: dict[str, dict[str, float]] = {}
    for e in prof.events():
        if e.name in PHASES:
            p = phases.setdefault(e.name[len("train.") :], {"ms": 0.0, "outside_operators_ms": 0.0})
            p["ms"] += e.cpu_time_total * per_step
            p["outside_operators_ms"] += (e.cpu_time_total - _operator_time(e)) * per_step
    kinds: dict[str, float] = defaultdict(float)
    operators: dict[str, float] = defaultdict(float)
    shapes = []
    mm_time = mm_flops = 0.0
    for e in prof.key_averages(group_by_input_shape=True):
        if not is_operator(e.key):
            continue
        self_ms = e.self_cpu_time_total * per_step
        kind = kind_of(e.key)
        kinds[kind] += self_ms
        operators[e.key] += self_ms
        if kind == "matrix products":
            flops = e.flops or linear_flops(e.key, e.input_shapes) * e.count
            mm_time += self_ms
            mm_flops += flops / steps
            shapes.append(
                {
                    "op": e.key,
                    "shapes": str(e.input_shapes),
                    "ms": self_ms,
                    "calls": e.count / steps,
                    "gflops": flops / steps / (self_ms * 1e6) if self_ms else 0.0,
                }
            )
    in_ops = sum(kinds.values())
    return {
        "profiled_step_ms": wall_s * 1e3 / steps,
        "phases": phases,
        "kinds_ms": {k: kinds.get(k, 0.0) for k in KINDS},
        "outside_operators_ms": wall_s * 1e3 / steps - in_ops,
        "matmul_gflops": mm_flops / (mm_time * 1e6) if mm_time else 0.0,
        "top_operators": sorted(operators.items(), key=lambda kv: -kv[1])[:12],
        "matmul_shapes": sorted(shapes, key=lambda s: -s["ms"])[:10],
    }


#: Named ranges of the parts of a network (``phase.NAME``), opened only while a profile runs
#: (``benchmarks.nmt_training_profile``).
PART = "phase."
#: The backward work of a forward operator: ``autograd::engine::evaluate_function: MmBackward0``.
BACKWARD_OF = "autograd::engine::evaluate_function: "


def _named(name: str) -> bool:
    return name.startswith((PART, "train."))


def _nearest_named(event):
    """The named ranges inside ``event`` that no other named range inside it holds."""
    for c in event.cpu_children:
        if _named(c.name):
            yield c
        else:
            yield from _nearest_named(c)


def _enclosing(event) -> str | None:
    """The name of the innermost named range around ``event`` (None: none)."""
    e = event.cpu_parent
    while e is not None and not _named(e.name):
        e = e.cpu_parent
    return None if e is None else e.name


def phase_times(prof, steps: int) -> dict[str, float]:
    """Milliseconds per step of every named range (``phase.NAME``, ``train.NAME``) without the
    named ranges inside it, by name; and ``backward.NAME``: the backward pass's work for the
    operators that ran inside each named range of the forward pass, matched by autograd's
    sequence numbers (``backward.other``: what matches no forward operator, the gradients'
    accumulation into the parameters above all). ``train.backward`` is then the engine's time
    between those (its own time without them)."""
    per_step = 1e-3 / steps
    out: dict[str, float] = defaultdict(float)
    # (thread, sequence number) -> (start, named range) of the last forward operator of that number:
    # the one that made the autograd node (an operator that makes none, or the composite one
    # around the one that does, records the next number, and starts earlier)
    forward_part: dict[tuple[int, int], tuple[float, str]] = {}
    backward = []
    for e in prof.events():
        if _named(e.name):
            inner = sum(c.cpu_time_total for c in _nearest_named(e))
            out[e.name] += (e.cpu_time_total - inner) * per_step
        elif e.name.startswith(BACKWARD_OF):
            backward.append(e)
        elif e.sequence_nr >= 0 and not e.name.startswith("autograd::") and "Backward" not in e.name:
            where = _enclosing(e)
            key, start = (e.thread, e.sequence_nr), e.time_range.start
            if where is not None and where != "train.backward" and start >= forward_part.get(key, (start, ""))[0]:
                forward_part[key] = (start, where)
    for e in backward:
        where = forward_part.get((e.fwd_thread, e.sequence_nr), (0.0, None))[1] if e.sequence_nr >= 0 else None
        ms = e.cpu_time_total * per_step
        out["backward." + (where or "other")] += ms
        if _enclosing(e) == "train.backward":
            out["train.backward"] -= ms
    return dict(out)
