"""What a shape/placement rule returns, and the small helpers every rule shares.

A rule maps ``(op name, param, input operands)`` to an :class:`Inference`: the shape, dtype
and placements of every output, plus the implicit redistributions its inputs need first.
Rules run on the client's hot path, so they are plain Python over tuples: no torch calls
except the one-time dtype probes of ``dtorch.ir.rules.promotion``.

Example:
    >>> import torch
    >>> from dtorch.ir.placement import Replicate
    >>> OutputMeta((2, 3), torch.float32, (Replicate(),)).shape
    (2, 3)
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from dtorch.errors import (
    DimError,
    DtypeError,  # noqa: F401 - re-exported: it lived here first
    ParamError,  # noqa: F401 - re-exported: it lived here first
    ShapeError,
)
from dtorch.ir.operator import Operand
from dtorch.ir.params import OpParam
from dtorch.ir.placement import Placement, Replicate, format_placements


@dataclass(frozen=True, slots=True)
class OutputMeta:
    """Shape, dtype and placements of one output; its mesh is the inputs' mesh."""

    shape: tuple[int, ...]
    dtype: torch.dtype
    placements: tuple[Placement, ...]


@dataclass(frozen=True, slots=True)
class Inference:
    """A rule's answer: the outputs, and per input the placements it must be redistributed to
    before the operator runs (None: use it as it is; an empty tuple means all None)."""

    outputs: tuple[OutputMeta, ...]
    input_placements: tuple[tuple[Placement, ...] | None, ...] = ()

    def input_placement(self, index: int, operand: Operand) -> tuple[Placement, ...]:
        """The placements input ``index`` has when the kernel runs."""
        wanted = self.input_placements[index] if self.input_placements else None
        return operand.placements if wanted is None else wanted


#: ``rule(user-facing op name, param, inputs) -> Inference``.
Rule = Callable[[str, OpParam, tuple[Operand, ...]], Inference]


def all_replicate(inputs: Sequence[Operand]) -> bool:
    """True when no input is sharded or partial on any mesh dimension (the fast path)."""
    for operand in inputs:
        for p in operand.placements:
            if p.__class__ is not Replicate:
                return False
    return True


def norm_dim(name: str, dim: int, ndim: int) -> int:
    """``dim`` counted from the end when negative; DimError (a ShapeError and an IndexError)
    naming the operator, the dim and the accepted range when out of range.

    A 0-d tensor accepts dims -1 and 0, as in torch.

    Example:
        >>> norm_dim("sum", -1, 3)
        2
    """
    if dim.__class__ is not int and not isinstance(dim, int):  # a float, a str: no dim
        raise TypeError(f"{name}: dim must be an int, got {dim!r} ({type(dim).__name__})")
    size = max(ndim, 1)
    if not -size <= dim < size:
        raise DimError(
            f"{name}: dimension {dim} is out of range for a {ndim}-D tensor; accepted: "
            f"{-size} to {size - 1}"
        )
    return dim % size


def norm_dims(name: str, dims: Sequence[int], ndim: int) -> tuple[int, ...]:
    """Each of ``dims`` normalised; ShapeError when one repeats."""
    out = tuple(norm_dim(name, d, ndim) for d in dims)
    if len(set(out)) != len(out):
        raise ShapeError(f"{name}: dimension list {tuple(dims)} names a dimension twice")
    return out


def describe_inputs(inputs: Sequence[Operand]) -> str:
    """``(S(0),) x (R,)`` style text of the inputs' placements for messages."""
    return " x ".join(format_placements(o.placements) for o in inputs)


def describe_shapes(inputs: Sequence[Operand]) -> str:
    """``[4, 8] x [8]`` style text of the inputs' shapes for messages."""
    return " x ".join(str(list(o.shape)) for o in inputs)


@functools.lru_cache(maxsize=8192)
def replicated(shape: tuple[int, ...], dtype: torch.dtype, mesh_ndim: int) -> Inference:
    """One all-Replicate output: the fast path's answer, shared between calls (it is
    immutable, and building frozen records costs more than looking one up)."""
    return Inference((OutputMeta(shape, dtype, (Replicate(),) * mesh_ndim),))
