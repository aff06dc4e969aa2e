"""Addressing batches: which workers a batch concerns, so the others need not decode it.

A batch goes to every worker (one send for all: PUB-SUB), but a worker whose devices no
operator of a batch touches has nothing to run, and decoding costs as much as a small kernel.
So the controller sends, beside the encoded batch, a bitmap of the parties that must decode
it and the batch's no-hold ids as raw integers (every worker frees what it holds of them,
decoded or not). A batch that only one worker runs and frees (a one-device mesh, say) is
addressed to that worker alone (``Publisher.send(to=)``), so the others are not even woken.
To let a worker run a batch after skipping the earlier ones, every batch carries the
metadata of all the operands its operators read: those made by earlier batches (the external
inputs) as well as its own outputs.

Example:
    >>> import torch
    >>> from dtorch.ir.mesh import DeviceMesh
    >>> from dtorch.ir.operator import ExecuteBatch, Operand, Operator
    >>> from dtorch.ir.params import ContiguousParam
    >>> from dtorch.ir.span import Span
    >>> a = Operand(1, (2,), torch.float32, DeviceMesh("cpu", [1]), ())
    >>> b = Operand(2, (2,), torch.float32, DeviceMesh("cpu", [1]), ())
    >>> addresser = BatchAddresser(workers=3)
    >>> _ = addresser.address(ExecuteBatch((), (a,)))
    >>> op = Operator(3, "contiguous_3", ContiguousParam(), (1,), (2,), Span.unknown())
    >>> batch, parties, to = addresser.address(ExecuteBatch((op,), (b,), (1,)))
    >>> [o.id for o in batch.operands], batch.no_hold, concerns(parties, 1), concerns(parties, 0)
    ([2, 1], (), True, False)
    >>> to                      # only worker 1 runs it, and holds what it frees
    1
    >>> unpack_ids(pack_ids((5, 7)))
    (5, 7)
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable

from dtorch.errors import WorkerError
from dtorch.ir.mesh import DeviceMesh
from dtorch.ir.operator import ExecuteBatch, Operand
from dtorch.runtime.handlers import EVERY_STREAM_KINDS
from dtorch.runtime.host import forget_oldest
from dtorch.transport.wire import EVERYONE

#: Meshes whose party masks are kept by object id (each entry keeps its mesh alive).
MESH_MASKS_LIMIT = 1024


def pack_ids(ids: tuple[int, ...]) -> bytes:
    """Operand ids as little-endian int64s."""
    return array("q", ids).tobytes()


def unpack_ids(part: bytes | memoryview) -> tuple[int, ...]:
    if len(part) % 8:
        raise WorkerError(f"an id list is a multiple of 8 bytes, got {len(part)}")
    ids = array("q")
    ids.frombytes(part)
    return tuple(ids)


def readers(parties: bytes | memoryview) -> int:
    """How many parties the bitmap ``parties`` names (the workers that decode the batch)."""
    return int.from_bytes(parties, "little").bit_count()


def _only(mask: int) -> int:
    """The one party of ``mask``, or EVERYONE when it names none or several."""
    return mask.bit_length() - 1 if mask and not mask & (mask - 1) else EVERYONE


def concerns(parties: bytes | memoryview, party: int) -> bool:
    """Whether the bitmap ``parties`` names ``party``."""
    byte = party >> 3
    return byte < len(parties) and bool(parties[byte] & (1 << (party & 7)))


class BatchAddresser:
    """The controller's side: the live operands' metadata and the meshes' party masks."""

    def __init__(self, workers: int) -> None:
        self._workers = workers
        self._every = (1 << workers) - 1
        self._width = (workers + 7) // 8
        self._live: dict[int, Operand] = {}
        # the last released operands, oldest first: an operator another thread queued after
        # a rebind released its input carries its metadata, and its workers fail it
        self._released: dict[int, Operand] = {}
        # live operand id -> the parties that decoded a batch carrying its metadata (they
        # keep it until its free reaches them)
        self._readers: dict[int, int] = {}
        self._masks: dict[int, tuple[int, DeviceMesh]] = {}

    def address(self, batch: ExecuteBatch) -> tuple[ExecuteBatch, bytes, int]:
        """The batch to encode (its outputs and external inputs, no frees), the bitmap of
        the parties that must decode it, and its addressee: the one party that runs it and
        holds what it frees, or EVERYONE."""
        if self._workers == 1:  # the one worker sees every batch: nothing to address
            carried = ExecuteBatch(batch.operators, batch.operands)
            return carried, b"\x01" if batch.operators else b"\x00", EVERYONE
        live = self._live
        for operand in batch.operands:
            live[operand.id] = operand
        made = {operand.id for operand in batch.operands}
        external: dict[int, Operand] = {}
        # the meshes the operators touch, by object (few: the batch's operands share them);
        # a batch's own operands are its operators' outputs
        meshes = {id(o.mesh): o.mesh for o in batch.operands} if batch.operators else {}
        every = False
        for op in batch.operators:
            every = every or op.param.kind in EVERY_STREAM_KINDS
            for operand_id in op.inputs:
                if operand_id not in made and operand_id not in external:
                    operand = external[operand_id] = self._known(operand_id)
                    meshes[id(operand.mesh)] = operand.mesh
            for operand_id in op.outputs:
                if operand_id not in made:  # written in place: made by an earlier batch
                    mesh = self._known(operand_id).mesh
                    meshes[id(mesh)] = mesh
        mask = self._every if every else self._union(meshes.values())
        carried = ExecuteBatch(batch.operators, batch.operands + tuple(external.values()))
        if mask:
            readers = self._readers
            for operand in carried.operands:
                readers[operand.id] = readers.get(operand.id, 0) | mask
        return carried, mask.to_bytes(self._width, "little"), _only(mask | self._freed(batch))

    def _known(self, operand_id: int) -> Operand:
        """A live operand's metadata, or a recently released one's (its workers fail the
        operator that read it: ``DeviceHost.execute(carried=True)``)."""
        try:
            return self._live[operand_id]
        except KeyError:
            pass
        try:
            return self._released[operand_id]
        except KeyError:
            raise WorkerError(
                f"an operator reads operand {operand_id}, which was released long before it "
                f"came (another thread rebound the tensor it read: t.data = ...)"
            ) from None

    def _freed(self, batch: ExecuteBatch) -> int:
        """The parties holding a shard or the metadata of what ``batch`` frees (every party
        for an unknown id: a program's may be held anywhere); forgets those operands."""
        meshes: dict[int, DeviceMesh] = {}
        live, readers = self._live, self._readers
        holders, unknown = 0, False
        released = self._released
        for operand_id in batch.no_hold:
            freed = live.pop(operand_id, None)
            holders |= readers.pop(operand_id, 0)
            if freed is None:
                unknown = True
            else:
                meshes[id(freed.mesh)] = freed.mesh
                released[operand_id] = freed
        forget_oldest(released)
        return self._every if unknown else holders | self._union(meshes.values())

    def _union(self, meshes: Iterable[DeviceMesh]) -> int:
        mask = 0
        for mesh in meshes:
            mask |= self._mask(mesh)
        return mask

    def _mask(self, mesh: DeviceMesh) -> int:
        entry = self._masks.get(id(mesh))
        if entry is None:
            if len(self._masks) >= MESH_MASKS_LIMIT:  # meshes made in a loop
                self._masks.clear()
            mask = 0
            for device in mesh.device_ids:
                mask |= 1 << (device % self._workers)
            entry = self._masks[id(mesh)] = (mask, mesh)
        return entry[0]
