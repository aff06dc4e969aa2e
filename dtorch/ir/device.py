"""Device: one device of a mesh, ``(kind, index)``; kind is a torch device type.

Example:
    >>> from dtorch.ir.device import Device
    >>> Device("cpu", 3)
    Device(cpu:3)
    >>> Device.parse("cuda:1") == Device("cuda", 1)
    True
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from dtorch.errors import MeshError

#: The device kinds a mesh may hold; CPU meshes are logical and may have any size.
DEVICE_KINDS: tuple[str, ...] = ("cpu", "cuda")
#: The largest index a ``torch.device`` holds (torch stores it in 8 bits and wraps larger
#: ones: ``torch.device("cpu", 300)`` is ``cpu:44``); logical CPU ids go beyond it.
TORCH_MAX_INDEX = 127


def check_device_kind(kind: object) -> str:
    """Return ``kind`` if it is a supported device type, else raise MeshError."""
    if isinstance(kind, torch.device):
        kind = kind.type
    if kind not in DEVICE_KINDS:
        raise MeshError(
            f"device type {kind!r} is not supported; accepted: {', '.join(DEVICE_KINDS)}"
        )
    return str(kind)


def parse_device(spec: object) -> tuple[str, int | None]:
    """Kind and index (None when not given) of ``"cuda"``, ``"cuda:1"`` or a ``torch.device``.

    Example:
        >>> parse_device("cuda:1"), parse_device(torch.device("cpu"))
        (('cuda', 1), ('cpu', None))
    """
    if isinstance(spec, str):
        kind, colon, index = spec.partition(":")
        if colon and index.isascii() and index.isdigit():  # torch would wrap ids past 127
            return check_device_kind(kind), int(index)
        try:
            spec = torch.device(spec)
        except RuntimeError:
            raise MeshError(
                f"device {spec!r} is not supported; accepted: a type ({', '.join(DEVICE_KINDS)}) "
                f"optionally with an index, e.g. 'cuda:1'"
            ) from None
    if not isinstance(spec, torch.device):
        raise MeshError(
            f"device {spec!r} is not a device; accepted: a str such as 'cpu' or 'cuda:1', "
            f"a torch.device or a DeviceMesh"
        )
    return check_device_kind(spec.type), spec.index


@dataclass(frozen=True, slots=True)
class Device:
    """One device: a torch device type and a non-negative index (a logical id on CPU)."""

    kind: str
    index: int

    def __post_init__(self) -> None:
        check_device_kind(self.kind)
        if isinstance(self.index, bool) or not isinstance(self.index, int) or self.index < 0:
            raise MeshError(f"device index must be a non-negative int, got {self.index!r}")

    @classmethod
    def parse(cls, spec: str | torch.device | Device) -> Device:
        """Build a Device from ``"cpu"``, ``"cuda:1"``, a ``torch.device`` or a Device."""
        if isinstance(spec, Device):
            return spec
        kind, index = parse_device(spec)
        return cls(kind, index or 0)

    def __repr__(self) -> str:
        return f"Device({self.kind}:{self.index})"
