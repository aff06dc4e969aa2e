"""Local kernels of the elementwise kinds: BroadcastBinary, BaseMath, Activation.

Dispatch is data: ``dtorch.ir.rules.torch_ops`` maps each BinaryKind/MathKind/ActivationKind
to its torch function (the same table the rules probe for dtypes). A Python scalar operand
goes through the Python operator (``t + 2``, ``2 - t``: torch's own number handling), or as
a 0-d CPU tensor to the functions that take tensors only (``maximum``, ``logical_and``).

Example:
    >>> import torch
    >>> from dtorch.ir.mesh import DeviceMesh
    >>> from dtorch.ir.operator import Operand, Operator
    >>> from dtorch.ir.opkind import BinaryKind
    >>> from dtorch.ir.params import BroadcastBinaryParam
    >>> from dtorch.ir.scalar import Scalar
    >>> from dtorch.ir.span import Span
    >>> from dtorch.kernels.base import KernelContext
    >>> x = Operand(1, (2,), torch.float32, DeviceMesh("cpu"), ())
    >>> param = BroadcastBinaryParam(BinaryKind.SUB, Scalar.of(1), scalar_first=True)
    >>> op = Operator(3, "rsub_3", param, (1,), (2,), Span.unknown())
    >>> ctx = KernelContext(op, (x,), (x,), (0,))
    >>> binary_kernel(ctx, 0, [torch.tensor([1.0, 5.0])])
    [tensor([ 0., -4.])]
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from dtorch.ir.opkind import ActivationKind, BinaryKind, OpKind
from dtorch.ir.params import ActivationParam, BaseMathParam, BroadcastBinaryParam
from dtorch.ir.rules.torch_ops import (
    ACTIVATION,
    BINARY,
    MATH,
    NUMBERED,
    binary_with_alpha,
    binary_with_scalar,
)
from dtorch.ir.scalar import ScalarKind
from dtorch.kernels.base import KernelContext, LocalKernel, Shards
from dtorch.kernels.local.copy import same_memory, written_into


def floated(shards: Shards, dtype: torch.dtype) -> Shards:
    """``shards`` with the integer and bool ones cast to ``dtype``, a floating output dtype
    (complex ones stay complex: ``abs`` of complex is the modulus, not the real part's).

    torch's default dtype decides what an integer becomes in a float result (``int / 2``,
    ``sqrt(int)``, ``where(c, int, 0.1)``); the rules used the recording process's default
    when they inferred the output dtype, and a worker process, or a stream running after
    the program changed the default, has its own: casting first to the recorded dtype is
    torch's computation (its common dtype) whatever the default here."""
    for shard in shards:
        if not _inexact(shard):
            return [s if _inexact(s) else s.to(dtype) for s in shards]
    return shards


def _inexact(shard: torch.Tensor) -> bool:
    return shard.is_floating_point() or shard.is_complex()


def _exact(param: BroadcastBinaryParam, inputs: Shards) -> bool:
    """Whether ``ldexp``'s base is a float: torch then reads an integer exponent exactly
    (``ldexp(0.0, 200)`` is 0), where a float one goes through ``0 * 2 ** 200.0`` (NaN), so
    the exponent is not cast to the float result."""
    if param.scalar is not None and param.scalar_first:
        return param.scalar.kind is ScalarKind.FLOAT
    return inputs[0].is_floating_point()


def binary_kernel(
    ctx: KernelContext, device: int, inputs: Shards, computed: bool = False
) -> Shards:
    """``a <op> b`` on the local shards, or one shard with the param's scalar; in place, the
    result written into ``a``'s shard, which is returned (``_binary_in_place``; it asks for
    the result itself with ``computed``: one body, and no extra call on the hot path)."""
    param: BroadcastBinaryParam = ctx.operator.param  # type: ignore[assignment]  # hottest
    if param.in_place and not computed:
        return [_binary_in_place(ctx, device, param, inputs)]
    out = ctx.outputs[0].dtype
    cast = None
    if out.is_floating_point and not (param.binary is BinaryKind.LDEXP and _exact(param, inputs)):
        if param.scalar is not None and not inputs[0].is_floating_point():
            cast = out  # the 0-d tensor of the scalar follows x (only the scalar path reads it)
        inputs = floated(inputs, out)
    if param.scalar is None:
        if param.alpha is not None:
            return [binary_with_alpha(param.binary, inputs[0], inputs[1], param.alpha)]
        return [BINARY[param.binary](inputs[0], inputs[1])]
    return [binary_with_scalar(param.binary, inputs[0], param.scalar, param.scalar_first, cast)]


#: torch's in-place forms of the binary operators that have one: ``fn(shard, other)``.
IN_PLACE_BINARY: dict[BinaryKind, Callable[..., object]] = {
    BinaryKind.ADD: torch.Tensor.add_,
    BinaryKind.SUB: torch.Tensor.sub_,
    BinaryKind.MUL: torch.Tensor.mul_,
    BinaryKind.DIV: torch.Tensor.div_,
}


def _binary_in_place(
    ctx: KernelContext, device: int, param: BroadcastBinaryParam, inputs: Shards
) -> torch.Tensor:
    """The result written into the first shard (the rule has checked that it has the shard's
    dtype, shape and placements): torch's ``op_`` where there is one, else the result copied
    in. An other shard sharing the target's memory (``t[1:] += t[:-1]``, which torch refuses
    for the whole tensor) is read whole before the write, as the operator and copy read it.
    So is a shard whose elements share memory (an expanded view the record-time check did
    not see: a dtype view keeps no strides), where torch's ``op_`` refuses and copy_ writes."""
    target = inputs[0]
    fn = None if overlaps_itself(target) else IN_PLACE_BINARY.get(param.binary)
    if param.scalar is not None:
        if fn is None or param.scalar_first:
            return written_into(target, binary_kernel(ctx, device, inputs, True)[0])
        fn(target, param.scalar.value)
        return target
    other = inputs[1]
    if fn is None or same_memory(target, other):
        return written_into(target, binary_kernel(ctx, device, inputs, True)[0])
    if target.is_floating_point() and not _inexact(other):
        other = other.to(target.dtype)  # an integer beside a float result: ``floated``'s cast
    if param.alpha is None:
        fn(target, other)
    else:
        fn(target, other, alpha=param.alpha.value)
    return target


def overlaps_itself(shard: torch.Tensor) -> bool:
    """Whether elements of ``shard`` may share memory (a stride of 0: an expanded view),
    which torch's in-place kernels refuse to write.

    Example:
        >>> overlaps_itself(torch.zeros(3).expand(2, 3)), overlaps_itself(torch.zeros(2, 3).T)
        (True, False)
    """
    return 0 in shard.stride()


def math_kernel(ctx: KernelContext, device: int, inputs: Shards) -> Shards:
    """``neg``, ``exp``, ``isnan``, ... of the local shard."""
    param = ctx.param
    assert isinstance(param, BaseMathParam)
    out = ctx.outputs[0].dtype
    return [MATH[param.math](floated(inputs, out)[0] if out.is_floating_point else inputs[0])]


#: torch's in-place form of an activation, ``fn(shard, alpha, beta)``: the same kernel as
#: the out-of-place one, writing into the shard (the kinds without one compute and copy).
IN_PLACE: dict[ActivationKind, Callable[[torch.Tensor, float, float], object]] = {
    ActivationKind.RELU: lambda x, _a, _b: torch.relu_(x),
    ActivationKind.SILU: lambda x, _a, _b: F.silu(x, inplace=True),
    ActivationKind.SIGMOID: lambda x, _a, _b: torch.sigmoid_(x),
    ActivationKind.TANH: lambda x, _a, _b: torch.tanh_(x),
    ActivationKind.LEAKY_RELU: lambda x, a, _b: F.leaky_relu_(x, a),
    ActivationKind.ELU: lambda x, a, _b: F.elu_(x, a),
    ActivationKind.CELU: lambda x, a, _b: torch.celu_(x, a),
    ActivationKind.SELU: lambda x, _a, _b: torch.selu_(x),
    ActivationKind.HARDSWISH: lambda x, _a, _b: F.hardswish(x, inplace=True),
    ActivationKind.HARDSIGMOID: lambda x, _a, _b: F.hardsigmoid(x, inplace=True),
    ActivationKind.MISH: lambda x, _a, _b: F.mish(x, inplace=True),
    ActivationKind.THRESHOLD: torch.threshold_,
}


def activation_kernel(ctx: KernelContext, device: int, inputs: Shards) -> Shards:
    """``relu``, ``gelu``, ... of the local shard; an in-place one writes the shard (the rule
    has checked that the result keeps its dtype) and returns it."""
    param = ctx.param
    assert isinstance(param, ActivationParam)
    if param.in_place:
        return [_in_place(param, inputs[0])]
    if ctx.outputs[0].dtype.is_floating_point:
        inputs = floated(inputs, ctx.outputs[0].dtype)
    return [_activated(param, inputs[0])]


def _activated(param: ActivationParam, x: torch.Tensor) -> torch.Tensor:
    numbered = NUMBERED.get(param.activation)
    if numbered is not None:
        return numbered(x, param.alpha, param.beta)
    return ACTIVATION[param.activation](x, param.approximate)


def _in_place(param: ActivationParam, shard: torch.Tensor) -> torch.Tensor:
    """torch's in-place kernel on the shard; a kind without one, or a shard whose elements
    share memory (which torch's refuses), computes and writes as the Copy kernel does."""
    fn = IN_PLACE.get(param.activation)
    if fn is None or overlaps_itself(shard):
        return written_into(shard, _activated(param, shard))
    fn(shard, param.alpha, param.beta)
    return shard


KERNELS: dict[OpKind, LocalKernel] = {
    OpKind.BroadcastBinary: binary_kernel,
    OpKind.BaseMath: math_kernel,
    OpKind.Activation: activation_kernel,
}
