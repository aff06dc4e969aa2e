"""ShardTable: one stream's local shards by operand and device, with memory accounting.

Accounting counts each torch storage once however many views of it are held, so a view or a
reshape costs nothing and the bytes come back when the last operand using a storage is freed.
A storage is identified by its root tensor (``t._base`` for a torch view, else ``t``), which
every view keeps alive, and sized as the root's ``nbytes`` (its storage, for every fresh tensor
torch returns): asking torch for the storage object costs ~0.7 µs per fresh tensor, which is
too much on the per-operator path. A kernel output that shares memory without being a torch
view (``detach()``) would be counted twice; no dtorch kernel returns one.

Example:
    >>> import torch
    >>> table = ShardTable()
    >>> table.put(7, 0, torch.zeros(4))
    >>> table.put(8, 0, table.get(7, 0).view(2, 2))    # a view: same storage, no new bytes
    >>> table.stats(0)
    (16, 16)
    >>> table.free([7, 8]); table.stats(0)
    (0, 16)
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import torch

from dtorch.ir.operator import Operator
from dtorch.ir.opkind import OpKind
from dtorch.ir.params import ActivationParam, BroadcastBinaryParam, ClampParam, MaskedParam
from dtorch.ir.report import Failure

#: Kinds that change their first input in place and have no outputs: a failure poisons it.
IN_PLACE_KINDS = frozenset({OpKind.Copy, OpKind.SetItem, OpKind.IndexPut})

#: The params whose ``in_place`` form writes its first input and outputs that shard.
_WRITERS = (MaskedParam, ActivationParam, BroadcastBinaryParam, ClampParam)


def writes_first_input(op: Operator) -> bool:
    """Whether ``op`` changes its first input in place, so that a failure of ``op`` (its own,
    or a failed input passed on) fails that input too: an IN_PLACE_KINDS operator without
    outputs, or an in-place Masked (``masked_fill_``, ``masked_scatter_``), Activation
    (``relu_``), BroadcastBinary (``add_``) or Clamp (``clamp_``), whose one output is the
    changed input itself."""
    param = op.param
    if param.kind in IN_PLACE_KINDS:
        return not op.outputs
    return isinstance(param, _WRITERS) and param.in_place


@dataclass(frozen=True, slots=True)
class KernelFailure:
    """Stands in for the shards of an operator that failed; later kernels pass it on."""

    failure: Failure


def failure_of(operator: Operator, device: int, error: BaseException) -> KernelFailure:
    """The marker users eventually see: operator, user line, device, and the error."""
    return KernelFailure(Failure.of(operator.id, operator.describe(), device, error))


Shard = torch.Tensor | KernelFailure


class DeviceBytes:
    """Bytes held on one device: the bytes of each root tensor held, the total, and its peak.

    Most roots have one holder: ``roots`` maps them to their bytes (ints, no container to
    allocate per operator); ``shared`` counts the holders of the few held more than once.
    """

    __slots__ = ("allocated", "peak", "roots", "shared")

    def __init__(self) -> None:
        self.roots: dict[int, int] = {}  # id(root tensor) -> its bytes
        self.shared: dict[int, int] = {}  # id(root tensor) -> holders, where more than one
        self.allocated = 0
        self.peak = 0

    def release(self, tensor: torch.Tensor) -> None:
        key = id(tensor)
        if key not in self.roots:  # a view: its root holds the entry (a held view is no key)
            root = tensor._base
            if root is None or id(root) not in self.roots:
                return
            key = id(root)
        shared = self.shared
        if shared and key in shared:
            if shared[key] == 2:
                del shared[key]
            else:
                shared[key] -= 1
            return
        self.allocated -= self.roots.pop(key)


class ShardTable:
    """operand id -> {device id: tensor or KernelFailure}, plus bytes held per device."""

    __slots__ = ("_bytes", "_values", "failed")

    def __init__(self) -> None:
        self._values: dict[int, dict[int, Shard]] = {}
        self._bytes: dict[int, DeviceBytes] = {}
        self.failed: set[int] = set()  # operands with a KernelFailure on some device: kernels
        # check their inputs against it, which is free while nothing has failed

    @property
    def values(self) -> dict[int, dict[int, Shard]]:
        """operand id -> {device: shard}: read it, change it through ``put`` and ``free``."""
        return self._values

    def get(self, operand: int, device: int) -> Shard:
        return self._values[operand][device]

    def put(self, operand: int, device: int, value: Shard) -> None:
        shards = self._values.get(operand)
        old = None
        if shards is None:
            self._values[operand] = {device: value}
        else:
            old = shards.get(device)
            shards[device] = value
        if value.__class__ is KernelFailure:
            self.failed.add(operand)
        else:  # hold the root (inline: one call less on the per-operator path)
            account = self._bytes.get(device)
            if account is None:
                account = self._bytes[device] = DeviceBytes()
            root = value._base  # type: ignore[union-attr]
            key = id(value if root is None else root)
            if key not in account.roots:
                nbytes = (value if root is None else root).nbytes  # type: ignore[union-attr]
                account.roots[key] = nbytes
                account.allocated += nbytes
                if account.allocated > account.peak:  # noqa: PLR1730 - a max() call costs more
                    account.peak = account.allocated
            else:
                account.shared[key] = account.shared.get(key, 1) + 1
        if old is not None and old.__class__ is not KernelFailure:
            self._bytes[device].release(old)  # type: ignore[arg-type]

    def fail_write(self, operand: int, device: int, failure: KernelFailure) -> None:
        """``failure`` for ``operand`` on ``device``, whose in-place write failed, and for
        every operand whose shard there shares its storage (the tensor it views, its other
        views): what they hold is unknown now, and a read of any must raise, not return the
        old values. A scan of the device's shards: failures are rare."""
        shards = self._values.get(operand)
        old = None if shards is None else shards.get(device)
        self.put(operand, device, failure)
        if old is None or old.__class__ is KernelFailure:
            return
        root = old if old._base is None else old._base  # type: ignore[union-attr]
        for other, held in list(self._values.items()):
            value = held.get(device)
            if value is None or value.__class__ is KernelFailure:
                continue
            if value is root or value._base is root:  # type: ignore[union-attr]
                self.put(other, device, failure)

    def bind(self, pairs: Iterable[tuple[int, int]]) -> None:
        """For each ``(target, source)``: ``target`` holds what ``source`` holds, on every
        device (the same tensors, counted once per storage; ids never held are ignored)."""
        values = self._values
        for target, source in pairs:
            shards = values.get(source)
            if shards:
                for device, value in list(shards.items()):
                    self.put(target, device, value)

    def free(self, operands: Iterable[int]) -> None:
        """Drop every shard of ``operands`` (ids this stream never held are ignored)."""
        failed = self.failed
        values = self._values
        accounts = self._bytes
        for operand in operands:
            if failed:
                failed.discard(operand)
            shards = values.pop(operand, None)
            if shards:
                for device, value in shards.items():
                    if value.__class__ is not KernelFailure:
                        accounts[device].release(value)  # type: ignore[arg-type]

    def stats(self, device: int) -> tuple[int, int]:
        """(bytes held now, peak bytes since the last reset) on ``device``."""
        account = self._bytes.get(device)
        return (0, 0) if account is None else (account.allocated, account.peak)

    def devices(self) -> list[int]:
        """Devices that ever held a shard here."""
        return list(self._bytes)

    def note_peak(self, device: int, extra: int) -> None:
        """Raise ``device``'s peak to what it holds plus ``extra`` bytes held meanwhile (a
        program call's intermediates, which this table does not see)."""
        account = self._bytes.get(device)
        if account is None:
            account = self._bytes[device] = DeviceBytes()
        account.peak = max(account.peak, account.allocated + extra)

    def reset_peak(self, device: int) -> None:
        account = self._bytes.get(device)
        if account is not None:
            account.peak = account.allocated
