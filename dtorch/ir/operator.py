"""Operand, Operator and the wire batch: the graph IR the client records and workers run.

Ids are integers allocated by the client, rising monotonically; they stay valid across
processes, across save/load, and after their objects are freed (never memory addresses).

Example:
    >>> import torch
    >>> from dtorch.ir.mesh import init_device_mesh
    >>> from dtorch.ir.placement import Shard
    >>> from dtorch.ir.params import MatmulParam
    >>> from dtorch.ir.span import Span
    >>> mesh = init_device_mesh("cpu", 2)
    >>> a = Operand(1, (4, 8), torch.float32, mesh, (Shard(0),))
    >>> op = Operator(7, "matmul_7", MatmulParam(), (1, 2), (3,), Span("m.py", 3, 1))
    >>> op.kind.name, a.local_shape(mesh.device_ids[1])
    ('Matmul', (2, 8))
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from dtorch.ir.mesh import DeviceMesh
from dtorch.ir.placement import Placement, format_placements
from dtorch.ir.sharding import ShardSpec, device_shard
from dtorch.ir.span import Span

if TYPE_CHECKING:
    from dtorch.ir.opkind import OpKind
    from dtorch.ir.params import OpParam


@dataclass(frozen=True, slots=True, init=False)
class Operand:
    """Metadata of one distributed tensor value; it never holds data."""

    id: int
    shape: tuple[int, ...]
    dtype: torch.dtype
    mesh: DeviceMesh
    placements: tuple[Placement, ...]

    def __init__(
        self,
        id: int,
        shape: tuple[int, ...],
        dtype: torch.dtype,
        mesh: DeviceMesh,
        placements: tuple[Placement, ...],
    ) -> None:
        # Slot descriptors instead of the frozen dataclass __init__'s object.__setattr__:
        # one Operand is built per recorded output, and this is 40% cheaper.
        _operand_id(self, id)
        _operand_shape(self, shape)
        _operand_dtype(self, dtype)
        _operand_mesh(self, mesh)
        _operand_placements(self, placements)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def shard(self, device_id: int) -> ShardSpec:
        """Where ``device_id``'s shard lies in the full tensor."""
        return device_shard(self.shape, self.mesh, self.placements, device_id)

    def local_shape(self, device_id: int) -> tuple[int, ...]:
        return self.shard(device_id).shape

    def describe(self) -> str:
        """``float32[4, 8] on (2,) (S(0))`` style text for messages."""
        dtype = str(self.dtype).removeprefix("torch.")
        return (
            f"{dtype}{list(self.shape)} on {self.mesh.shape} {format_placements(self.placements)}"
        )


@dataclass(frozen=True, slots=True, init=False)
class Operator:
    """One recorded computation: ``param`` (which names the kind), input and output operand
    ids, a unique id, a readable name, and the span of the user code that recorded it."""

    id: int
    name: str
    param: OpParam
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    span: Span

    def __init__(
        self,
        id: int,
        name: str,
        param: OpParam,
        inputs: tuple[int, ...],
        outputs: tuple[int, ...],
        span: Span,
    ) -> None:
        # As Operand: built once per recorded operator, so slot descriptors set the fields.
        _operator_id(self, id)
        _operator_name(self, name)
        _operator_param(self, param)
        _operator_inputs(self, inputs)
        _operator_outputs(self, outputs)
        _operator_span(self, span)

    @property
    def kind(self) -> OpKind:
        return self.param.kind

    def describe(self) -> str:
        """``matmul_7 (Matmul) at model.py:3:1`` for error messages."""
        return f"{self.name} ({self.kind.name}) at {self.span!r}"


def _setters(cls: type, names: str) -> list[Any]:
    """The slot descriptors' ``__set__`` of ``cls``'s fields (they bypass the frozen guard)."""
    return [cls.__dict__[name].__set__ for name in names.split()]


_operand_id, _operand_shape, _operand_dtype, _operand_mesh, _operand_placements = _setters(
    Operand, "id shape dtype mesh placements"
)
(
    _operator_id,
    _operator_name,
    _operator_param,
    _operator_inputs,
    _operator_outputs,
    _operator_span,
) = _setters(Operator, "id name param inputs outputs span")


@dataclass(frozen=True, slots=True)
class ExecuteBatch:
    """The controller -> worker message of spec 000: a batch of operators, the metadata of the
    operands they produce, and the operand ids no handle holds any more (free after the batch).
    Encoded once, sent to any number of receivers."""

    operators: tuple[Operator, ...]
    operands: tuple[Operand, ...] = ()
    no_hold: tuple[int, ...] = ()
