"""A loaded body checked against the rules: every output is what its operator makes.

A program file says, for every body operand, its shape, dtype, mesh and placements; the
kernels and the redistribution planner trust that metadata. A file is data from anywhere, so
``dtorch.load_program`` does not. First ``arity`` checks how many inputs and outputs each
operator has (a routed operator reads or makes something; each kind reads the number its
kernel takes), before any rule looks at them. Then ``mismatch`` runs each body operator's
shape rule (``dtorch.ir.rules.infer``, the one the recording client runs) on the metadata of
its inputs, and refuses the file (DeserializationError) unless the rule accepts the inputs as
they are (no implicit redistribution: the recorded operator came after its own) and gives
exactly the file's outputs. A redistribution (Convert) must keep its input's shape and dtype
and make the mesh and placements its param names. A creation's own data (the value of
``from_torch``, the bounds of ``arange``, the fill of ``full``), which its kernel builds the
values from where the rule reads the shape and dtype alone, must make exactly that shape and
dtype (``create_problem``): else a small file could make a call allocate any amount.

Example:
    >>> import torch
    >>> from dtorch.ir.mesh import init_device_mesh
    >>> from dtorch.ir.operator import Operand, Operator
    >>> from dtorch.ir.opkind import MathKind
    >>> from dtorch.ir.params import BaseMathParam
    >>> from dtorch.ir.placement import Shard
    >>> from dtorch.ir.span import Span
    >>> mesh = init_device_mesh("cpu", 2)
    >>> x = Operand(1, (4,), torch.float32, mesh, (Shard(0),))
    >>> op = Operator(2, "neg_2", BaseMathParam(MathKind.NEG), (1,), (3,), Span.unknown())
    >>> arity(op), mismatch(op, (x,), (Operand(3, (4,), torch.float32, mesh, (Shard(0),)),))
    (None, None)
    >>> mismatch(op, (x,), (Operand(3, (8,), torch.float32, mesh, (Shard(0),)),))
    'makes float32[4] on (2,) (S(0),), not float32[8] on (2,) (S(0),)'
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from dtorch.api.creation import arange_length
from dtorch.ir.mesh import DeviceMesh
from dtorch.ir.operator import Operand, Operator
from dtorch.ir.opkind import CreateKind, OpKind
from dtorch.ir.params import ConvertParam, CreateParam
from dtorch.ir.placement import Placement
from dtorch.ir.rules.registry import RULES, infer
from dtorch.ir.scalar import Scalar

#: shape, dtype, mesh and placements an output must have.
Layout = tuple[tuple[int, ...], torch.dtype, DeviceMesh, tuple[Placement, ...]]

#: (fewest, most) inputs of the kinds that do not read exactly one (None: no most).
INPUTS: dict[OpKind, tuple[int, int | None]] = {
    OpKind.Create: (0, 0),
    OpKind.Linear: (2, 3),
    OpKind.Conv: (2, 3),
    OpKind.ConvTranspose: (2, 3),
    OpKind.Sdpa: (3, 4),
    OpKind.BatchNorm: (1, 5),
    OpKind.Normalization: (1, 3),
    OpKind.Concat: (1, None),
    OpKind.Einsum: (1, None),
    OpKind.Embedding: (2, 2),
    OpKind.GridSample: (2, 2),
    OpKind.Copy: (2, 2),
    OpKind.Matmul: (2, 2),
    OpKind.Outer: (2, 2),
    OpKind.IndexSelect: (2, 2),
    OpKind.Gather: (2, 2),
    OpKind.IndexAdd: (3, 3),
    OpKind.SiluLinearChunk: (2, 2),
    OpKind.ApplyRotaryEmb: (3, 3),
    OpKind.LayerNormMulAdd: (3, 3),
}

#: Inputs of the kinds whose param says how many: a number the param holds stands for the
#: tensor input of that place (``t * 2`` reads one; a kernel given both fails on the devices),
#: or flags name the optional inputs (EmbeddingBag's offsets and per-sample weights).
EXACT_INPUTS: dict[OpKind, Callable[[Any], int]] = {
    OpKind.BroadcastBinary: lambda p: 2 - _held(p.scalar),
    OpKind.Where: lambda p: 3 - _held(p.x) - _held(p.y),
    OpKind.Masked: lambda p: 3 - _held(p.value),
    OpKind.IndexPut: lambda p: 3 - _held(p.scalar),
    OpKind.Scatter: lambda p: 3 - _held(p.value),
    OpKind.SetItem: lambda p: 2 - _held(p.scalar),
    OpKind.EmbeddingBag: lambda p: 2 + int(p.offsets) + int(p.weighted),
}


def _held(number: Scalar | None) -> int:
    return int(number is not None)


#: Outputs of the kinds without a rule to count them.
OUTPUTS: dict[OpKind, int] = {OpKind.Convert: 1}


def arity(op: Operator) -> str | None:
    """What is wrong with the number of ``op``'s inputs and outputs (None: nothing)."""
    if not op.inputs and not op.outputs:
        return "reads and makes nothing (every operator a body runs has an operand)"
    exact = EXACT_INPUTS.get(op.kind)
    fewest, most = (exact(op.param),) * 2 if exact is not None else INPUTS.get(op.kind, (1, 1))
    count = len(op.inputs)
    if count < fewest or (most is not None and count > most):
        wanted = f"{fewest} to {most}" if most != fewest else f"{fewest}"
        return f"reads {count} inputs; a {op.kind.name} reads {wanted}"
    outputs = OUTPUTS.get(op.kind)
    if outputs is not None and len(op.outputs) != outputs:
        return f"makes {len(op.outputs)} outputs; a {op.kind.name} makes {outputs}"
    return None


def mismatch(op: Operator, inputs: tuple[Operand, ...], outputs: tuple[Operand, ...]) -> str | None:
    """What is wrong with ``outputs`` as ``op``'s outputs from ``inputs`` (None: nothing);
    ``op`` has passed ``arity``."""
    param = op.param
    if isinstance(param, ConvertParam):
        source = inputs[0]
        expected: list[Layout] = [(source.shape, source.dtype, param.mesh, param.placements)]
    elif param.kind in RULES:
        try:
            inference = infer(op.name, param, inputs)
        except Exception as exc:  # any failure of a rule on a file's data refuses the file
            return f"is refused by its rule: {type(exc).__name__}: {exc}"
        if any(p is not None for p in inference.input_placements):
            return "would need its inputs redistributed first"
        mesh = inputs[0].mesh if inputs else None
        if isinstance(param, CreateParam):  # the one kind without inputs
            mesh = param.mesh
            wrong = create_problem(param)
            if wrong is not None:
                return wrong
        assert mesh is not None  # arity: every other kind reads an input
        expected = [(o.shape, o.dtype, mesh, o.placements) for o in inference.outputs]
    else:
        return None
    return _compare(expected, outputs)


def _compare(expected: list[Layout], outputs: tuple[Operand, ...]) -> str | None:
    if len(expected) != len(outputs):
        return f"makes {len(expected)} outputs, not {len(outputs)}"
    for (shape, dtype, mesh, placements), out in zip(expected, outputs, strict=True):
        if (shape, dtype, mesh, placements) != (out.shape, out.dtype, out.mesh, out.placements):
            made = Operand(out.id, shape, dtype, mesh, placements)
            return f"makes {made.describe()}, not {out.describe()}"
    return None


# --- a creation's own data ------------------------------------------------------------------
def create_problem(param: CreateParam) -> str | None:
    """What keeps ``param``'s data from making exactly ``param.shape`` of ``param.dtype``
    (None: nothing). Random kinds are refused before (a program may not hold them).

    Example:
        >>> import torch
        >>> from dtorch.ir.mesh import init_device_mesh
        >>> mesh = init_device_mesh("cpu", 1)
        >>> short = CreateParam(CreateKind.ARANGE, (4,), torch.float32, mesh, (), (0.0, 1.0, 1.0))
        >>> create_problem(short)
        'makes 1 values (arange of (0.0, 1.0, 1.0)), not its shape [4]'
    """
    if param.generator is not None or param.shared is not None:
        return "carries a generator or a shared segment (a program file holds neither)"
    check = _CREATE_DATA.get(param.create)
    return None if check is None else check(param)


def _no_data(param: CreateParam) -> str | None:
    if param.args or param.value is not None:
        return f"carries data a {param.create.name.lower()} creation does not take"
    return None


def _full_data(param: CreateParam) -> str | None:
    if len(param.args) != 1 or param.value is not None:
        return f"fills with {len(param.args)} values; full takes one"
    try:
        torch.full((), param.args[0], dtype=param.dtype)
    except (RuntimeError, TypeError, OverflowError) as exc:
        return f"cannot fill {param.dtype} with {param.args[0]!r}: {exc}"
    return None


def _arange_data(param: CreateParam) -> str | None:
    if len(param.args) != 3 or param.value is not None:
        return f"has {len(param.args)} bounds; arange takes (start, end, step)"
    try:
        length = arange_length(*param.args)
    except (ArithmeticError, ValueError) as exc:  # a zero step, inf or NaN bounds
        return f"has bounds {param.args} arange refuses: {exc}"
    if (length,) != tuple(param.shape):
        return f"makes {length} values (arange of {param.args}), not its shape {list(param.shape)}"
    return None


def _tensor_data(param: CreateParam) -> str | None:
    value = param.value
    if value is None or param.args:
        return "from_torch without its value"
    if tuple(value.shape) != tuple(param.shape) or value.dtype != param.dtype:
        return (
            f"holds a value of {value.dtype}{list(value.shape)}, not the "
            f"{param.dtype}{list(param.shape)} it declares"
        )
    return None


#: Each non-random creation's check of its data.
_CREATE_DATA: dict[CreateKind, Callable[[CreateParam], str | None]] = {
    CreateKind.ZEROS: _no_data,
    CreateKind.ONES: _no_data,
    CreateKind.EMPTY: _no_data,
    CreateKind.FULL: _full_data,
    CreateKind.ARANGE: _arange_data,
    CreateKind.FROM_TENSOR: _tensor_data,
}
