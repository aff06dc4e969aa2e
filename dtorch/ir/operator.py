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
from typing import TYPE_CHECKING, TypeVar

import torch
from typing_extensions import dataclass_transform

from dtorch.ir.mesh import DeviceMesh
from dtorch.ir.placement import Placement, format_placements
from dtorch.ir.sharding import ShardSpec, device_shard, local_shape_and_offset
from dtorch.ir.span import Span

if TYPE_CHECKING:
    from dtorch.ir.opkind import OpKind
    from dtorch.ir.params import OpParam

_Record = TypeVar("_Record")


@dataclass_transform(frozen_default=True)
def ir_record(cls: type[_Record]) -> type[_Record]:
    """A slotted dataclass that type checkers treat as frozen (assigning a field is a mypy
    error) but that runs as a plain one: one Operand and one Operator are built per recorded
    operator, and a frozen dataclass, which must set its fields around its own guard, costs
    twice as much to build (6% of all the instructions an ``a + b`` costs, client to stream).
    Equality and hashing are the frozen dataclass's: by field values."""
    return dataclass(slots=True, unsafe_hash=True)(cls)


@ir_record
class Operand:
    """Metadata of one distributed tensor value; it never holds data."""

    id: int
    shape: tuple[int, ...]
    dtype: torch.dtype
    mesh: DeviceMesh
    placements: tuple[Placement, ...]

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def shard(self, device_id: int) -> ShardSpec:
        """Where ``device_id``'s shard lies in the full tensor."""
        return device_shard(self.shape, self.mesh, self.placements, device_id)

    def local_shape(self, device_id: int) -> tuple[int, ...]:
        coordinate = self.mesh.coordinate_of(device_id)  # marked shards too (not one box)
        return local_shape_and_offset(self.shape, self.mesh.shape, self.placements, coordinate)[0]

    def describe(self) -> str:
        """``float32[4, 8] on (2,) (S(0))`` style text for messages."""
        dtype = str(self.dtype).removeprefix("torch.")
        return (
            f"{dtype}{list(self.shape)} on {self.mesh.shape} {format_placements(self.placements)}"
        )


@ir_record
class Operator:
    """One recorded computation: ``param`` (which names the kind), input and output operand
    ids, a unique id, a readable name, and the span of the user code that recorded it."""

    id: int
    name: str
    param: OpParam
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    span: Span

    @property
    def kind(self) -> OpKind:
        return self.param.kind

    def describe(self) -> str:
        """``matmul_7 (Matmul) at model.py:3:1`` for error messages."""
        return f"{self.name} ({self.kind.name}) at {self.span!r}"


@dataclass(frozen=True, slots=True)
class ExecuteBatch:
    """The controller -> worker message of spec 000: a batch of operators, the metadata of the
    operands they produce, and the operand ids no handle holds any more (free after the batch).
    Encoded once, sent to any number of receivers."""

    operators: tuple[Operator, ...]
    operands: tuple[Operand, ...] = ()
    no_hold: tuple[int, ...] = ()
