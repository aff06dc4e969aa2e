"""A loaded body checked against the rules: every output is what its operator makes.

A program file says, for every body operand, its shape, dtype, mesh and placements; the
kernels and the redistribution planner trust that metadata. A file is data from anywhere, so
``dtorch.load_program`` does not: it runs each body operator's shape rule
(``dtorch.ir.rules.infer``, the one the recording client runs) on the metadata of its inputs,
and refuses the file (DeserializationError) unless the rule accepts the inputs as they are
(no implicit redistribution: the recorded operator came after its own) and gives exactly the
file's outputs. A redistribution (Convert) must keep its input's shape and dtype and make the
mesh and placements its param names. The other kinds without a rule go unchecked: those a
program may not hold are refused before this check; Fuse, Nvtx and Nonzero (whose output
shape depends on the data) have no rule to check them against.

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
    >>> mismatch(op, (x,), (Operand(3, (4,), torch.float32, mesh, (Shard(0),)),)) is None
    True
    >>> mismatch(op, (x,), (Operand(3, (8,), torch.float32, mesh, (Shard(0),)),))
    'makes float32[4] on (2,) (S(0),), not float32[8] on (2,) (S(0),)'
"""

from __future__ import annotations

import torch

from dtorch.ir.mesh import DeviceMesh
from dtorch.ir.operator import Operand, Operator
from dtorch.ir.params import ConvertParam
from dtorch.ir.placement import Placement
from dtorch.ir.rules.registry import RULES, infer

#: shape, dtype, mesh (None: the output's own) and placements an output must have.
Layout = tuple[tuple[int, ...], torch.dtype, DeviceMesh | None, tuple[Placement, ...]]


def mismatch(op: Operator, inputs: tuple[Operand, ...], outputs: tuple[Operand, ...]) -> str | None:
    """What is wrong with ``outputs`` as ``op``'s outputs from ``inputs`` (None: nothing)."""
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
        expected = [(o.shape, o.dtype, mesh, o.placements) for o in inference.outputs]
    else:
        return None
    return _compare(expected, outputs)


def _compare(expected: list[Layout], outputs: tuple[Operand, ...]) -> str | None:
    if len(expected) != len(outputs):
        return f"makes {len(expected)} outputs, not {len(outputs)}"
    for (shape, dtype, on, placements), out in zip(expected, outputs, strict=True):
        mesh = out.mesh if on is None else on  # a creation's mesh is its own
        if (shape, dtype, mesh, placements) != (out.shape, out.dtype, out.mesh, out.placements):
            made = Operand(out.id, shape, dtype, mesh, placements)
            return f"makes {made.describe()}, not {out.describe()}"
    return None
