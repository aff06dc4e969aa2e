"""DeviceMesh: an N-D array of device ids of one device type, with optional dim names.

A mesh is an immutable value: two meshes with the same device type, shape, ids and names are
equal and hash alike. ``DeviceMesh("cpu")`` is the single default device (a (1,) mesh); CPU
meshes are logical, so a CPU mesh of 432 devices is legal and runs.

Example:
    >>> from dtorch.ir.mesh import DeviceMesh, init_device_mesh
    >>> mesh = init_device_mesh("cpu", (2, 3), mesh_dim_names=("dp", "tp"))
    >>> mesh.shape, mesh.ndim, mesh.dim_name_index("tp")
    ((2, 3), 2, 1)
    >>> [m.device_ids for m in mesh.unbind("dp")]
    [(0, 1, 2), (3, 4, 5)]
    >>> DeviceMesh("cpu", [[0, 1, 2], [3, 4, 5]], mesh_dim_names=["dp", "tp"]) == mesh
    True
"""

from __future__ import annotations

import itertools
import math
import operator
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar

import numpy as np
import torch

from dtorch.errors import MeshError
from dtorch.ir.device import TORCH_MAX_INDEX, Device, check_device_kind, parse_device
from dtorch.ir.sharding import capped_product

V = TypeVar("V")
#: Meshes of at most this many devices find a device by scanning their ids (no table).
_SCANNED = 16


def _flatten_nested(data: Any) -> tuple[tuple[int, ...], list[Any]]:
    """Shape and row-major leaves of a nested list of ids (rectangular or MeshError)."""
    if not isinstance(data, (list, tuple)):
        return (), [data]
    if not data:
        raise MeshError("a device mesh must hold at least one device")
    parts = [_flatten_nested(item) for item in data]
    inner = parts[0][0]
    if any(shape != inner for shape, _ in parts):
        raise MeshError(f"device mesh {data!r} is not rectangular")
    return (len(parts), *inner), [leaf for _, leaves in parts for leaf in leaves]


def _ids_from(mesh: Any) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Shape and flat ids of a user's mesh argument: anything ``torch.tensor`` accepts.

    A 0-d value (an int ``k``) is the one-device mesh ``[k]`` of shape ``(1,)``.
    """
    if not isinstance(mesh, torch.Tensor):
        if isinstance(mesh, (list, tuple)):
            _flatten_nested(mesh)  # rectangular and non-empty, with dtorch's message
        try:
            mesh = torch.as_tensor(mesh)
        except (TypeError, ValueError, RuntimeError) as e:
            raise MeshError(f"mesh {mesh!r} is not a tensor of device ids: {e}") from None
    if mesh.numel() == 0:  # torch.as_tensor(range(0)) is an empty float tensor
        raise MeshError(
            f"the mesh is empty ({_short(tuple(mesh.shape))}); accepted: a non-empty "
            "(nested) list or tensor of integer device ids"
        )
    if mesh.is_floating_point() or mesh.is_complex() or mesh.dtype == torch.bool:
        raise MeshError(f"a mesh tensor must hold integer device ids, got dtype {mesh.dtype}")
    shape = tuple(mesh.shape) or (1,)
    return shape, tuple(int(v) for v in mesh.flatten().tolist())


_MAX_ID = 2**63 - 1


def _check_ids(shape: tuple[int, ...], ids: tuple[int, ...]) -> None:
    if shape and min(shape) <= 0:  # min, not a generator: decoding a graph builds many meshes
        raise MeshError(f"every mesh dimension needs at least one device, got {_short(shape)}")
    if capped_product(shape, len(ids)) != len(ids) or not ids:  # linear: shapes may be data
        raise MeshError(f"mesh {_short(shape)} does not hold {len(ids)} device ids")
    if min(ids) < 0:
        raise MeshError(f"device ids must be non-negative, got {sorted(set(ids))[:4]}")
    if max(ids) > _MAX_ID:  # a decoded mesh too: ids become int64 tensors and torch devices
        raise MeshError(f"device ids must fit in int64 (at most {_MAX_ID}), got {max(ids)}")
    if len(set(ids)) != len(ids):
        raise MeshError(f"device ids in a mesh must be unique, got {list(ids)}")


def _int_like(value: object) -> bool:
    return not isinstance(value, (bool, str, bytes)) and hasattr(value, "__index__")


def _size(value: object) -> int:
    """A mesh dimension: an int or an int-like (``numpy.int64``); TypeError otherwise."""
    if not _int_like(value):
        raise TypeError(value)
    return operator.index(value)  # type: ignore[arg-type]


def _short(shape: tuple[int, ...]) -> str:
    """``shape (2, 4)`` for messages; a long one (read from data) cut to its first dims."""
    if len(shape) <= 8:
        return f"shape {shape}"
    return f"shape ({', '.join(map(str, shape[:8]))}, ...: {len(shape)} dims)"


def _check_names(names: Sequence[str] | None, ndim: int) -> tuple[str, ...] | None:
    if names is None:
        return None
    if not isinstance(names, Iterable):
        raise MeshError(
            f"mesh_dim_names must be a sequence of strings (or one string), got {names!r}"
        )
    names = (names,) if isinstance(names, str) else tuple(names)  # "dp" is one name, not two
    if len(names) != ndim:
        raise MeshError(f"mesh_dim_names {names} has {len(names)} names for a {ndim}-D mesh")
    strings = all(map(isinstance, names, itertools.repeat(str)))
    if not strings or "" in names or len(set(names)) != ndim:
        raise MeshError(f"mesh_dim_names must be distinct non-empty strings, got {names}")
    return names


class DeviceMesh:
    """An N-D array of device ids of one type: ``DeviceMesh(device, mesh=None,
    mesh_dim_names=None)``.

    ``device`` is a device type (``"cpu"``, ``"cuda"``), a device with an index (``"cuda:1"``,
    ``torch.device("cpu", 0)``: the one-device mesh of that id when ``mesh`` is None) or a
    DeviceMesh (a copy). ``mesh`` is anything ``torch.tensor`` accepts (nested lists, a
    ``range``, an integer tensor or numpy array) of device ids; ``None`` means device 0 and an
    int ``k`` device ``k``. A single device is a 1-D mesh of shape ``(1,)``.

    Example:
        >>> DeviceMesh("cuda:1")
        DeviceMesh('cuda', [1])
        >>> DeviceMesh("cpu", range(4), ["tp"]).shape
        (4,)
        >>> DeviceMesh("cpu").shape, DeviceMesh("cpu").is_distributed
        ((1,), False)
    """

    __slots__ = ("_device_type", "_dim_names", "_first", "_hash", "_ids", "_positions", "_shape")
    _device_type: str
    _dim_names: tuple[str, ...] | None
    _hash: int
    _ids: tuple[int, ...]
    _positions: dict[int, int] | None  # device id -> flat index, built for large meshes
    _first: DeviceMesh | None  # first_device_mesh(), made once: caches key meshes by identity
    _shape: tuple[int, ...]

    def __init__(
        self,
        device_type: str | torch.device | DeviceMesh,
        mesh: Any = None,
        mesh_dim_names: Sequence[str] | None = None,
    ) -> None:
        if isinstance(device_type, DeviceMesh):
            self._init_copy(device_type, mesh, mesh_dim_names)
            return
        kind, index = parse_device(device_type)
        if index is not None and mesh is not None:
            raise MeshError(
                f"DeviceMesh: device {device_type!r} names one device and mesh {mesh!r} others; "
                f"give a device type with a mesh, or an indexed device alone"
            )
        shape, ids = _ids_from((index or 0) if mesh is None else mesh)
        self._init(kind, shape, ids, mesh_dim_names)

    def _init_copy(self, other: DeviceMesh, mesh: Any, names: Sequence[str] | None) -> None:
        # DeviceMesh(mesh): a copy (equal, and its own object); nothing else may be given.
        if mesh is not None or names is not None:
            raise MeshError("DeviceMesh(a DeviceMesh) copies it; it takes no mesh or names")
        self._init(other._device_type, other._shape, other._ids, other._dim_names)

    def _init(
        self, kind: str, shape: tuple[int, ...], ids: tuple[int, ...], names: Sequence[str] | None
    ) -> None:
        _check_ids(shape, ids)
        names = _check_names(names, len(shape))
        # The slot descriptors directly: __setattr__ refuses every write (immutability), and
        # decoding a graph builds many meshes.
        _set_kind(self, kind)
        _set_shape(self, shape)
        _set_ids(self, ids)
        _set_names(self, names)
        _set_hash(self, hash((kind, shape, ids, names)))
        _set_positions(self, None)
        _set_first(self, None)

    @classmethod
    def from_ids(
        cls,
        device_type: str,
        shape: Sequence[int],
        ids: Sequence[int],
        dim_names: Sequence[str] | None = None,
    ) -> DeviceMesh:
        """Build a mesh from its shape and row-major ids (the codec's constructor)."""
        mesh = cls.__new__(cls)
        mesh._init(check_device_kind(device_type), tuple(shape), tuple(ids), dim_names)
        return mesh

    # --- metadata -------------------------------------------------------------------------
    @property
    def device_type(self) -> torch.device:
        """The device type as a ``torch.device`` without index, e.g. ``torch.device("cpu")``."""
        return torch.device(self._device_type)

    @property
    def device_kind(self) -> str:
        """The device type as text (``"cpu"``, ``"cuda"``)."""
        return self._device_type

    @property
    def shape(self) -> tuple[int, ...]:
        return self._shape

    @property
    def ndim(self) -> int:
        return len(self._shape)

    @property
    def device_ids(self) -> tuple[int, ...]:
        """Every device id, row-major."""
        return self._ids

    @property
    def dim_names(self) -> list[str]:
        """The dimension names, a list (empty when the mesh is unnamed)."""
        return list(self._dim_names or ())

    @property
    def mesh_dim_names(self) -> tuple[str, ...] | None:
        """The names as PyTorch DeviceMesh gives them: a tuple, or None when unnamed."""
        return self._dim_names

    @property
    def mesh(self) -> torch.Tensor:
        """The device ids as an int64 tensor of the mesh's shape."""
        return torch.tensor(self._ids, dtype=torch.int64).reshape(self._shape)

    def size(self, dim: int | str | None = None) -> int:
        """Number of devices in the mesh, or along one dimension."""
        if dim is None:
            return len(self._ids)
        return self._shape[self._dim_index(dim)]

    def numel(self) -> int:
        return len(self._ids)

    def has_dim_name(self, name: str) -> bool:
        return self._dim_names is not None and name in self._dim_names

    def dim_name_index(self, name: str, default_value: int | None = None) -> int | None:
        """Index of the dimension called ``name``, or ``default_value`` if there is none."""
        if self.has_dim_name(name):
            assert self._dim_names is not None
            return self._dim_names.index(name)
        return default_value

    @property
    def is_distributed(self) -> bool:
        """True when the mesh holds more than one device (a property, not a method)."""
        return len(self._ids) > 1

    def first_device(self) -> torch.device:
        """The mesh's first device; CPU device 0 is ``torch.device("cpu")``."""
        return _torch_device(self._device_type, self._ids[0])

    def to_device(self) -> torch.device:
        """The device of a one-device mesh (MeshError for a distributed one).

        Example:
            >>> DeviceMesh("cuda:1").to_device(), DeviceMesh("cpu").to_device()
            (device(type='cuda', index=1), device(type='cpu'))
        """
        if self.is_distributed:
            raise MeshError(f"to_device: {self!r} holds {self.numel()} devices; accepted: one")
        return self.first_device()

    def check_all_dim_names_in_set(self, names: Iterable[str]) -> None:
        """Raise MeshError unless every dim name is in ``names`` (an unnamed distributed mesh
        is refused; an unnamed one-device mesh passes).

        Example:
            >>> mesh = init_device_mesh("cpu", (2, 2), ("dp", "tp"))
            >>> mesh.check_all_dim_names_in_set(["dp", "tp", "pp"])
        """
        if not isinstance(names, Iterable):
            raise MeshError(
                f"check_all_dim_names_in_set: names must be a name or an iterable of names, got "
                f"{names!r} ({type(names).__name__})"
            )
        allowed = {names} if isinstance(names, str) else set(names)  # "dp" is one name
        if self._dim_names is None:
            if self.is_distributed:
                raise MeshError(f"{self!r} has no dim names; accepted names: {sorted(allowed)}")
            return
        outside = [n for n in self._dim_names if n not in allowed]
        if outside:
            raise MeshError(f"dim names {outside} of {self!r} are not in {sorted(allowed)}")

    def first_device_mesh(self) -> DeviceMesh:
        """The one-device mesh of the first device (any id: no ``torch.device`` on the way).

        Example:
            >>> DeviceMesh("cpu", [300, 301]).first_device_mesh()
            DeviceMesh('cpu', [300])
        """
        first = self._first
        if first is None:  # one object per mesh: a fetch per value would miss every cache
            first = DeviceMesh.from_ids(self._device_type, (1,), (self._ids[0],))
            _set_first(self, first)
        return first

    def first_device_id(self) -> Device:
        """The first device as a dtorch Device (kind and index)."""
        return Device(self._device_type, self._ids[0])

    def devices(self) -> list[Device]:
        return [Device(self._device_type, i) for i in self._ids]

    def __contains__(self, device_id: object) -> bool:
        return self._flat(device_id) is not None

    # --- coordinates ----------------------------------------------------------------------
    def coordinate_of(self, device_id: int) -> tuple[int, ...]:
        """Mesh coordinate of ``device_id`` (MeshError if it is not in the mesh)."""
        flat = self._flat(device_id)
        if flat is None:
            raise MeshError(f"device {device_id} is not in {self!r}")
        return tuple(int(c) for c in _unravel(flat, self._shape))

    def _flat(self, device_id: object) -> int | None:
        """``device_id``'s position in the row-major ids (None: not in the mesh)."""
        try:
            if len(self._ids) <= _SCANNED:  # a scan of a few ids beats a table
                return self._ids.index(device_id)
            # one lookup, where a scan per device made large meshes quadratic
            return self._position_table()[device_id]  # type: ignore[index]
        except (ValueError, KeyError, TypeError):  # TypeError: unhashable, no device id
            return None

    def _position_table(self) -> dict[int, int]:
        positions = self._positions
        if positions is None:
            positions = {device: flat for flat, device in enumerate(self._ids)}
            _set_positions(self, positions)
        return positions

    def device_at(self, coordinate: Sequence[int]) -> int:
        """Device id at a mesh coordinate."""
        flat = 0
        for c, s in zip(coordinate, self._shape, strict=True):
            flat = flat * s + c
        return self._ids[flat]

    def _dim_index(self, dim: int | str) -> int:
        if isinstance(dim, str):
            index = self.dim_name_index(dim)
            if index is None:
                raise MeshError(f"{self!r} has no dimension named {dim!r}")
            return index
        if isinstance(dim, bool) or not hasattr(dim, "__index__"):
            raise MeshError(
                f"a mesh dimension is a name or an int, got {dim!r} ({type(dim).__name__})"
            )
        dim = operator.index(dim)  # a numpy integer or a 0-d integer tensor as an int
        if not -self.ndim <= dim < self.ndim:
            raise MeshError(f"mesh dimension {dim} is out of range for a {self.ndim}-D mesh")
        return dim % self.ndim

    def unbind(self, dims: int | str | Iterable[int | str]) -> list[DeviceMesh]:
        """Sub-meshes that remove ``dims`` (names or ints; names the mesh lacks are ignored),
        in the order ``torch.unbind`` of the id tensor gives them; ``[self]`` when no listed dim
        is present. With several dims the removed dims' indices run row-major (nested unbind).

        Example:
            >>> mesh = init_device_mesh("cpu", (2, 3), ("dp", "tp"))
            >>> [m.device_ids for m in mesh.unbind("dp")]
            [(0, 1, 2), (3, 4, 5)]
            >>> [m.dim_names for m in mesh.unbind(["tp", "pp"])][:1], len(mesh.unbind("pp"))
            ([['dp']], 1)
        """
        if isinstance(dims, (bool, float)) or not isinstance(dims, (int, str, Iterable)):
            raise MeshError(
                f"unbind: dims must be a mesh dim (a name or an int) or a list of them, got "
                f"{dims!r} ({type(dims).__name__})"
            )
        listed = [dims] if isinstance(dims, (int, str)) else list(dims)
        present = [d for d in listed if not isinstance(d, str) or self.has_dim_name(d)]
        removed = sorted({self._dim_index(d) for d in present})
        if not removed:
            return [self]
        keep = [d for d in range(self.ndim) if d not in removed]
        return [
            self._sub_mesh(keep, dict(zip(removed, point, strict=True)))
            for point in itertools.product(*(range(self._shape[d]) for d in removed))
        ]

    def _sub_mesh(self, keep: list[int], fixed: dict[int, int]) -> DeviceMesh:
        ids = []
        for kept in itertools.product(*(range(self._shape[d]) for d in keep)):
            coordinate = dict(fixed) | dict(zip(keep, kept, strict=True))
            ids.append(self.device_at([coordinate[d] for d in range(self.ndim)]))
        names = None if self._dim_names is None else [self._dim_names[d] for d in keep]
        if not keep:  # every dim removed: the one device, a (1,) mesh without names
            return DeviceMesh.from_ids(self._device_type, (1,), ids)
        return DeviceMesh.from_ids(self._device_type, [self._shape[d] for d in keep], ids, names)

    def __getitem__(self, key: object) -> DeviceMesh:
        """Refused with what to do instead: DTensor's ``mesh["tp"]`` is the sub-mesh holding
        the calling rank, and a single controller has no calling rank.

        Example:
            >>> init_device_mesh("cpu", (2, 2), ("dp", "tp"))["tp"]
            Traceback (most recent call last):
            ...
            TypeError: DeviceMesh['tp']: ...
        """
        raise TypeError(
            f"DeviceMesh[{key!r}]: DTensor's sub-mesh of the calling rank has no meaning in a "
            "single controller, which drives every device; keep the whole mesh and name the "
            "dim (tensor-parallel layers find 'tp' by name, redistribute_by_dict takes names), "
            "or take the sub-meshes along it with mesh.unbind(<the other dims>)"
        )

    __iter__ = None  # not iterable (``__getitem__`` would make it a sequence to Python)

    def group_of(self, device_id: int, mesh_dim: int) -> tuple[int, ...]:
        """Device ids of the 1-D group along ``mesh_dim`` that contains ``device_id``."""
        coordinate = list(self.coordinate_of(device_id))
        group = []
        for i in range(self._shape[mesh_dim]):
            coordinate[mesh_dim] = i
            group.append(self.device_at(coordinate))
        return tuple(group)

    # --- value semantics ------------------------------------------------------------------
    def __eq__(self, other: object) -> bool:
        if not isinstance(other, DeviceMesh):
            return NotImplemented
        return self is other or (
            self._hash == other._hash
            and self._device_type == other._device_type
            and self._shape == other._shape
            and self._ids == other._ids
            and self._dim_names == other._dim_names
        )

    def __hash__(self) -> int:
        return self._hash

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("DeviceMesh is immutable")

    def __reduce__(self) -> tuple[Any, ...]:
        """Rebuild through ``from_ids`` (copy and pickle cannot set the immutable slots)."""
        return (DeviceMesh.from_ids, (self._device_type, self._shape, self._ids, self._dim_names))

    def __repr__(self) -> str:
        ids: Any = self.mesh.tolist()
        names = f", mesh_dim_names={self._dim_names}" if self._dim_names else ""
        return f"DeviceMesh({self._device_type!r}, {ids}{names})"


_set_kind, _set_shape, _set_ids, _set_names, _set_hash, _set_positions, _set_first = (
    DeviceMesh.__dict__[name].__set__
    for name in ("_device_type", "_shape", "_ids", "_dim_names", "_hash", "_positions", "_first")
)


def by_mesh_dim(name: str, mesh: DeviceMesh, given: Mapping[Any, V]) -> dict[int, V]:
    """``given`` keyed by mesh dim index: the one reading of ``{dim name or int: value}`` that
    ``redistribute_by_dict`` and ``get_placements_from_dict`` share. Names the mesh lacks are
    ignored (one dict serves meshes with and without a ``pp`` dim); an int is an explicit dim,
    so one out of range is refused (MeshError), as are two keys naming one dim; a key that is
    neither a str nor an int is a TypeError. ``name`` is the caller, named in the errors.

    Example:
        >>> mesh = init_device_mesh("cpu", (2, 2), ("dp", "tp"))
        >>> by_mesh_dim("f", mesh, {"tp": "a", "pp": "b", -2: "c"})
        {1: 'a', 0: 'c'}
    """
    out: dict[int, V] = {}
    keys: dict[int, Any] = {}
    for key, value in given.items():
        dim = _dim_of_key(name, mesh, key)
        if dim is None:
            continue
        if dim in keys:
            raise MeshError(f"{name}: keys {keys[dim]!r} and {key!r} name mesh dim {dim}")
        keys[dim], out[dim] = key, value
    return out


def _dim_of_key(name: str, mesh: DeviceMesh, key: Any) -> int | None:
    # One dict key as a mesh dim index (None: a name the mesh lacks).
    if isinstance(key, str):
        return mesh.dim_name_index(key)
    if isinstance(key, np.integer):  # as an int
        key = int(key)
    if isinstance(key, bool) or not isinstance(key, int):
        raise TypeError(f"{name}: key {key!r}; accepted: mesh dim names (str) and ints")
    if not -mesh.ndim <= key < mesh.ndim:
        raise MeshError(
            f"{name}: mesh dim {key} is out of range for a {mesh.ndim}-D mesh "
            f"(accepted: {-mesh.ndim} to {mesh.ndim - 1}, or a dim name)"
        )
    return key % mesh.ndim


def _unravel(flat: int, shape: tuple[int, ...]) -> list[int]:
    coordinate = []
    for size in reversed(shape):
        coordinate.append(flat % size)
        flat //= size
    return coordinate[::-1]


def _torch_device(kind: str, index: int) -> torch.device:
    # CPU device 0 is torch.device("cpu") (API.md); every other device keeps its index.
    if index > TORCH_MAX_INDEX:
        raise MeshError(
            f"device {kind}:{index} has no torch.device (torch's device indices stop at "
            f"{TORCH_MAX_INDEX}); use the mesh (device_mesh) or first_device_id() instead"
        )
    return torch.device(kind) if kind == "cpu" and index == 0 else torch.device(kind, index)


#: The most devices ``init_device_mesh`` makes a mesh of (its ids are listed one by one).
_MAX_MESH_DEVICES = 2**24


def init_device_mesh(
    device_type: str | torch.device,
    mesh_shape: int | Sequence[int | None],
    mesh_dim_names: Sequence[str] | None = None,
) -> DeviceMesh:
    """A mesh of ``mesh_shape`` with ids ``0..n-1`` in row-major order; ``None`` entries of
    the shape are dropped and an empty shape means ``(1,)``.

    Example:
        >>> init_device_mesh("cpu", 4).device_ids
        (0, 1, 2, 3)
        >>> init_device_mesh("cpu", (2, None, 3), ("dp", "tp")).shape
        (2, 3)
        >>> init_device_mesh("cpu", ()).shape
        (1,)
    """
    refusal = MeshError(
        f"init_device_mesh: mesh_shape must be a positive int or a tuple of them (None "
        f"entries are dropped), got {mesh_shape!r}"
    )
    if isinstance(mesh_shape, (set, frozenset, dict, str, bytes)):  # no order, or no sizes
        raise refusal
    try:  # an int-like (numpy's too) is a 1-D shape; anything else must be a sequence
        raw: Any = mesh_shape
        given: tuple[Any, ...] = (_size(raw),) if _int_like(raw) else tuple(raw)
        shape = tuple(_size(s) for s in given if s is not None) or (1,)
    except (TypeError, ValueError):
        raise refusal from None
    if min(shape) <= 0:
        raise refusal
    if capped_product(shape, _MAX_MESH_DEVICES) > _MAX_MESH_DEVICES:  # ids beyond memory
        raise MeshError(
            f"init_device_mesh: mesh_shape {shape} holds more than {_MAX_MESH_DEVICES} devices; "
            f"accepted: at most {_MAX_MESH_DEVICES}"
        )
    kind, index = parse_device(device_type)
    if index is not None:  # the ids are 0..n-1: an index would be silently dropped
        raise MeshError(
            f"init_device_mesh: device_type must be a device type without an index, got "
            f"{device_type!r}; accepted: 'cpu' or 'cuda' (for other ids, DeviceMesh(type, ids))"
        )
    return DeviceMesh.from_ids(kind, shape, range(math.prod(shape)), mesh_dim_names)
