"""The Create rule: a new tensor's metadata comes from its param alone.

``empty`` with Partial placements yields Replicate there (its values are unspecified, so any
layout is as good; API.md). Every other kind keeps the placements it was asked for.

Example:
    >>> import torch
    >>> from dtorch.ir.mesh import init_device_mesh
    >>> from dtorch.ir.opkind import CreateKind
    >>> from dtorch.ir.params import CreateParam
    >>> from dtorch.ir.placement import Partial, Shard
    >>> mesh = init_device_mesh("cpu", (2, 2))
    >>> param = CreateParam(CreateKind.EMPTY, (4, 2), torch.float32, mesh, (Shard(-1), Partial()))
    >>> create_rule("empty", param, ()).outputs[0].placements
    (Shard(dim=1), Replicate())
"""

from __future__ import annotations

import functools

import torch

from dtorch.errors import ShapeError
from dtorch.ir.operator import Operand
from dtorch.ir.opkind import CreateKind, OpKind
from dtorch.ir.params import CreateParam, OpParam
from dtorch.ir.placement import Partial, Replicate, normalize_placements
from dtorch.ir.rules.base import Inference, OutputMeta, Rule
from dtorch.ir.rules.ints import check_scalars
from dtorch.ir.rules.promotion import refusal, refused


def create_rule(name: str, param: OpParam, inputs: tuple[Operand, ...]) -> Inference:
    """Shape, dtype and (normalised) placements of a created tensor."""
    assert isinstance(param, CreateParam)
    shape = tuple(param.shape)
    if any(isinstance(s, bool) or not isinstance(s, int) or s < 0 for s in shape):
        raise ShapeError(f"{name}: sizes must be non-negative ints, got {list(param.shape)}")
    check_scalars(name, param.args)  # its sizes are checked with every param's ints
    if param.create is CreateKind.ARANGE:
        check_arange_dtype(name, param.dtype)
    placements = normalize_placements(param.placements, param.mesh.shape, len(shape))
    if param.create is CreateKind.EMPTY:
        placements = tuple(Replicate() if isinstance(p, Partial) else p for p in placements)
    return Inference((OutputMeta(shape, param.dtype, placements),))


def check_arange_dtype(name: str, dtype: torch.dtype) -> None:
    """torch's refusal of an arange of ``dtype`` (an UnsupportedDtypeError where it has no
    kernel: bool, complex, the unsigned dtypes wider than uint8).

    Example:
        >>> try:
        ...     check_arange_dtype("arange", torch.complex64)
        ... except NotImplementedError as error:
        ...     print(type(error).__name__)
        UnsupportedDtypeError
    """
    message = _arange_refusal(dtype)
    if message:
        refused(name, dtype, message)


@functools.cache
def _arange_refusal(dtype: torch.dtype) -> str:
    """torch's refusal of an arange of ``dtype`` ('' where it has a kernel: not for bool,
    complex or the unsigned dtypes wider than uint8).

    Example:
        >>> print(_arange_refusal(torch.bool))
        "arange_cpu" not implemented for 'Bool'
        >>> _arange_refusal(torch.uint8)
        ''
    """
    try:
        torch.arange(0, 1, dtype=dtype)
    except (RuntimeError, TypeError) as error:  # NotImplementedError is a RuntimeError
        return refusal(error, str(error).split("\n", 1)[0])
    return ""


RULES: dict[OpKind, Rule] = {OpKind.Create: create_rule}
