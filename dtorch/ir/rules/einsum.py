"""The Einsum rule: the equation's letters ARE the labels of the placement signature.

Per mesh dim: a shard of a letter the output keeps stays a shard (operands holding that
letter at full size are chunked to match); a shard of a summed letter gives Partial (the
operands holding it are chunked alike); one Partial operand with the others Replicate stays
Partial (einsum is linear in each operand). Dims that einsum broadcasts (size 1 against a
larger size) or reads diagonally (a letter repeated in one operand) must not be sharded.
Shapes and dtypes come from torch itself on meta tensors, once per equation and shapes.

Example:
    >>> import torch
    >>> from dtorch.ir.mesh import init_device_mesh
    >>> from dtorch.ir.operator import Operand
    >>> from dtorch.ir.params import EinsumParam
    >>> from dtorch.ir.placement import Shard
    >>> mesh = init_device_mesh("cpu", 2)
    >>> a = Operand(1, (4, 6), torch.float32, mesh, (Shard(1),))
    >>> b = Operand(2, (6, 5), torch.float32, mesh, (Shard(0),))
    >>> einsum_rule("einsum", EinsumParam("ij,jk->ik"), (a, b)).outputs[0]
    OutputMeta(shape=(4, 5), dtype=torch.float32, placements=(Partial(sum),))
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass

import torch

from dtorch.errors import PlacementError, ShapeError, UnsupportedDtypeError
from dtorch.ir.operator import Operand
from dtorch.ir.opkind import OpKind
from dtorch.ir.params import EinsumParam, OpParam
from dtorch.ir.placement import Shard
from dtorch.ir.rules.base import (
    DtypeError,
    Inference,
    Rule,
    all_replicate,
    describe_inputs,
    replicated,
)
from dtorch.ir.rules.signature import Cls, Labels, Signature, one_output, shard_rows

_ELLIPSIS = 1000  # labels of the dims '...' stands for: 1000, 1001, ...


@functools.cache
def einsum_signature(arity: int) -> Signature:
    """Every legal combination for ``arity`` operands (generated: it grows as 3 * 2^arity)."""
    entries = shard_rows(arity)
    for combo in itertools.product((Cls.R, Cls.SK), repeat=arity):
        if Cls.SK in combo:
            entries[combo] = Cls.P
    for i in range(arity):
        entries[tuple(Cls.P if j == i else Cls.R for j in range(arity))] = Cls.P
    text = (
        "all R -> R, S(i) or R with at least one S(i) -> S(i), S(k) or R with at least one "
        "S(k) -> P, one P with the others R -> P"
    )
    legend = "i: a letter the output keeps; k: a summed letter"
    return Signature(entries, text, frozenset(), legend)


@dataclass(frozen=True, slots=True)
class EinsumPlan:
    """Output shape and dtype, operand and output labels, and per operand the dims that
    must stay unsharded (broadcast or diagonal)."""

    shape: tuple[int, ...]
    dtype: torch.dtype
    in_labels: tuple[Labels, ...]
    out_labels: Labels
    blocked: tuple[frozenset[int], ...]


def einsum_plan(
    name: str, equation: str, shapes: tuple[tuple[int, ...], ...], dtypes: tuple[torch.dtype, ...]
) -> EinsumPlan:
    """The plan of ``equation`` on operands of these shapes and dtypes (cached)."""
    plan = _plan(equation, shapes, dtypes)
    if isinstance(plan, tuple):
        error, text = plan
        raise error(f"{name}: {text}")
    return plan


@functools.lru_cache(maxsize=1024)
def _plan(
    equation: str, shapes: tuple[tuple[int, ...], ...], dtypes: tuple[torch.dtype, ...]
) -> EinsumPlan | tuple[type[Exception], str]:
    unimplemented = _kernel_refusal(equation, shapes, dtypes) if _UNUSUAL & set(dtypes) else ""
    if unimplemented:
        return UnsupportedDtypeError, f"torch has no kernel for {equation!r} here: {unimplemented}"
    metas = [torch.empty(s, dtype=d, device="meta") for s, d in zip(shapes, dtypes, strict=True)]
    try:
        out = torch.einsum(equation, *metas)
    except (RuntimeError, ValueError) as error:
        kind = DtypeError if "scalar type" in str(error) else ShapeError
        return kind, f"torch rejects {equation!r} on {[list(s) for s in shapes]}: {error}"
    lhs, arrow, rhs = equation.partition("->")
    terms = [_letters(term, len(shape)) for term, shape in zip(lhs.split(","), shapes, strict=True)]
    sizes = _sizes(terms, shapes)
    outputs = _letters(rhs, out.ndim) if arrow else _implicit_output(terms)
    labelled = [_label(term, shape, sizes) for term, shape in zip(terms, shapes, strict=True)]
    return EinsumPlan(
        tuple(out.shape),
        out.dtype,
        tuple(labels for labels, _ in labelled),
        tuple(outputs),
        tuple(blocked for _, blocked in labelled),
    )


#: The dtypes some of torch's CPU einsum paths have no kernel for (bool's bmm...): only an
#: equation over one of them is tried on real tensors.
_UNUSUAL = frozenset({torch.bool, torch.uint16, torch.uint32, torch.uint64})


def _kernel_refusal(
    equation: str, shapes: tuple[tuple[int, ...], ...], dtypes: tuple[torch.dtype, ...]
) -> str:
    """torch's NotImplementedError text for ``equation`` on these dtypes ('' where it has a
    kernel): meta tensors take every dtype, the CPU kernels have no bool (or uint16...)
    ``bmm``, so tiny real operands ask them (a size of 1 kept: it decides the path).

    Example:
        >>> print(_kernel_refusal("ij,jk", ((5, 3), (3, 2)), (torch.bool, torch.bool)))
        "bmm" not implemented for 'Bool'
    """
    tiny = [
        torch.zeros([min(n, 2) for n in s], dtype=d) for s, d in zip(shapes, dtypes, strict=True)
    ]
    try:
        torch.einsum(equation, *tiny)
    except NotImplementedError as error:
        return str(error).split("\n", 1)[0]
    except (RuntimeError, ValueError):  # the meta probe words torch's other refusals
        return ""
    return ""


def _letters(term: str, ndim: int) -> list[int]:
    """A term's labels: ``ord(letter)``, and 1000+ for the dims '...' covers (right-aligned)."""
    if "..." not in term:
        return [ord(c) for c in term]
    head, tail = term.split("...")
    covered = ndim - len(head) - len(tail)
    return (
        [ord(c) for c in head]
        + [_ELLIPSIS + 64 - covered + j for j in range(covered)]
        + [ord(c) for c in tail]
    )


def _sizes(terms: list[list[int]], shapes: tuple[tuple[int, ...], ...]) -> dict[int, int]:
    sizes: dict[int, int] = {}
    for term, shape in zip(terms, shapes, strict=True):
        for label, size in zip(term, shape, strict=True):
            sizes[label] = max(sizes.get(label, 1), size)
    return sizes


def _implicit_output(terms: list[list[int]]) -> list[int]:
    """Without '->': the '...' dims, then the letters that occur once, in alphabetical order."""
    counts: dict[int, int] = {}
    for term in terms:
        for label in term:
            counts[label] = counts.get(label, 0) + 1
    ellipsis = sorted(label for label in counts if label >= _ELLIPSIS)
    return ellipsis + sorted(label for label, n in counts.items() if n == 1 and label < _ELLIPSIS)


def _label(
    term: list[int], shape: tuple[int, ...], sizes: dict[int, int]
) -> tuple[Labels, frozenset[int]]:
    """An operand's labels; broadcast and repeated dims get labels of their own and are
    blocked from sharding."""
    labels, blocked = list(term), set[int]()
    for d, (label, size) in enumerate(zip(term, shape, strict=True)):
        if term.count(label) > 1 or size != sizes[label]:
            labels[d], blocked = -1 - d, blocked | {d}
    return tuple(labels), frozenset(blocked)


def einsum_rule(name: str, param: OpParam, inputs: tuple[Operand, ...]) -> Inference:
    """``torch.einsum(equation, *operands)``."""
    assert isinstance(param, EinsumParam)
    shapes = tuple(o.shape for o in inputs)
    plan = einsum_plan(name, param.equation, shapes, tuple(o.dtype for o in inputs))
    if all_replicate(inputs):
        return replicated(plan.shape, plan.dtype, len(inputs[0].placements))
    for operand, blocked in zip(inputs, plan.blocked, strict=True):
        if any(isinstance(p, Shard) and p.dim in blocked for p in operand.placements):
            raise PlacementError(
                f"{name}: got {describe_inputs(inputs)} on mesh {inputs[0].mesh.shape}; a "
                f"dim that {param.equation!r} broadcasts or reads diagonally cannot be sharded "
                f"(accepted there: R, P). Redistribute it first"
            )
    sig = einsum_signature(len(inputs))
    return one_output(name, sig, inputs, plan.in_labels, plan.out_labels, plan.shape, plan.dtype)


RULES: dict[OpKind, Rule] = {OpKind.Einsum: einsum_rule}
