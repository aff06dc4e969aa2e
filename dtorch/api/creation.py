"""Creation functions: ``zeros ones empty full arange rand randn randint *_like tensor
from_torch``.

Every function takes the keywords ``device_mesh``, ``placements``, ``dtype``, ``graph`` and
``device`` (``device`` and ``device_mesh`` are mutually exclusive; without either the graph's
default mesh is used; without ``placements`` every mesh dimension is Replicate). Random
functions draw exactly the values torch draws for the same generator, however the result is
sharded: the operator carries a snapshot of the generator, the devices regenerate the full
tensor from it and keep their shard, and the caller's generator advances as torch's would.

Example:
    >>> import torch, dtorch
    >>> mesh = dtorch.init_device_mesh("cpu", (2, 2))
    >>> g = torch.Generator().manual_seed(7)
    >>> t = dtorch.randn(5, 3, generator=g, device_mesh=mesh,
    ...                  placements=[dtorch.Shard(0), dtorch.Shard(1)])
    >>> torch.equal(t.to_torch(), torch.randn(5, 3, generator=torch.Generator().manual_seed(7)))
    True
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from dtorch.api.graph import Graph, mesh_of
from dtorch.api.ops.scalars import is_scalar, python_number
from dtorch.api.record import emit_one
from dtorch.errors import MeshError, ShapeError
from dtorch.ir.mesh import DeviceMesh
from dtorch.ir.opkind import CreateKind
from dtorch.ir.params import CreateParam
from dtorch.ir.placement import Partial, Placement, Replicate, normalize_placements
from dtorch.ir.rules import OutputMeta
from dtorch.ir.subsplit import check_unmarked

if TYPE_CHECKING:
    from dtorch.api.tensor import Tensor


def _graph(graph: Graph | None) -> Graph:
    return Graph.default_graph() if graph is None else graph


def _mesh(graph: Graph, device_mesh: Any, device: Any) -> DeviceMesh:
    if device_mesh is not None and device is not None:
        raise MeshError("give device_mesh or device, not both")
    if device_mesh is not None:
        if not isinstance(device_mesh, DeviceMesh):
            raise MeshError(
                f"device_mesh must be a dtorch.DeviceMesh, got {type(device_mesh).__name__}"
            )
        return device_mesh
    return graph.default_device_mesh if device is None else mesh_of(device)


def _shape(size: Sequence[Any]) -> tuple[int, ...]:
    """torch's ``*size`` convention: ints, or one tuple/list/torch.Size of ints."""
    if len(size) == 1 and isinstance(size[0], (tuple, list, torch.Size)):
        size = tuple(size[0])
    for s in size:
        if isinstance(s, bool) or not isinstance(s, (int, np.integer)) or s < 0:
            raise ShapeError(
                f"sizes must be non-negative ints (or one tuple of them), got {tuple(size)!r}"
            )
    return tuple(int(s) for s in size)


def create(
    kind: CreateKind,
    shape: tuple[int, ...],
    dtype: torch.dtype,
    *,
    graph: Graph | None,
    device_mesh: Any,
    device: Any,
    placements: Sequence[Placement] | None,
    args: tuple[Any, ...] = (),
    generator: torch.Generator | None = None,
    value: torch.Tensor | None = None,
) -> Tensor:
    """Record a Create operator; every creation function ends here."""
    if not isinstance(dtype, torch.dtype):
        raise TypeError(f"dtype must be a torch.dtype (e.g. dtorch.float32), got {dtype!r}")
    g = _graph(graph)
    mesh = _mesh(g, device_mesh, device)
    if placements is None:
        placements = (Replicate(),) * mesh.ndim
    placed = normalize_placements(placements, mesh.shape, len(shape))
    check_unmarked(kind.name.lower(), placed, "a placement")  # only cat will make marks
    if kind == CreateKind.EMPTY:  # nothing to sum: an empty Partial is an empty Replicate
        placed = tuple(Replicate() if isinstance(p, Partial) else p for p in placed)
    param = CreateParam(kind, shape, dtype, mesh, placed, args, generator, value)
    return emit_one(g, kind.name.lower(), param, (), OutputMeta(shape, dtype, placed), mesh)


def _float_dtype(graph: Graph | None, dtype: torch.dtype | None) -> torch.dtype:
    return dtype if dtype is not None else _graph(graph).default_dtype


def zeros(*size: Any, dtype: torch.dtype | None = None, **kw: Any) -> Tensor:
    shape = _shape(size)
    return create(CreateKind.ZEROS, shape, _float_dtype(kw.get("graph"), dtype), **_kw(kw))


def ones(*size: Any, dtype: torch.dtype | None = None, **kw: Any) -> Tensor:
    shape = _shape(size)
    return create(CreateKind.ONES, shape, _float_dtype(kw.get("graph"), dtype), **_kw(kw))


def empty(*size: Any, dtype: torch.dtype | None = None, **kw: Any) -> Tensor:
    shape = _shape(size)
    return create(CreateKind.EMPTY, shape, _float_dtype(kw.get("graph"), dtype), **_kw(kw))


def full(size: Any, fill_value: Any, *, dtype: torch.dtype | None = None, **kw: Any) -> Tensor:
    shape = _shape((size,))
    if not is_scalar(fill_value):
        raise TypeError(f"full: fill_value must be a number, got {type(fill_value).__name__}")
    fill = python_number(fill_value)
    if dtype is None:
        dtype = _full_dtype(kw.get("graph"), fill)
    return create(CreateKind.FULL, shape, dtype, args=(fill,), **_kw(kw))


def _full_dtype(graph: Graph | None, fill: bool | int | float) -> torch.dtype:
    if isinstance(fill, bool):
        return torch.bool
    return torch.int64 if isinstance(fill, int) else _float_dtype(graph, None)


def arange(
    start: Any, end: Any = None, step: Any = 1, *, dtype: torch.dtype | None = None, **kw: Any
) -> Tensor:
    """``torch.arange`` semantics: ``arange(end)`` or ``arange(start, end, step)``."""
    if end is None:
        start, end = 0, start
    bounds = tuple(python_number(v) for v in (start, end, step))
    if dtype is None:
        floating = any(isinstance(v, float) for v in bounds)
        dtype = _float_dtype(kw.get("graph"), None) if floating else torch.int64
    shape = (_arange_length(*bounds),)  # a bad step raises here, at the user's line
    return create(CreateKind.ARANGE, shape, dtype, args=bounds, **_kw(kw))


def _arange_length(start: Any, end: Any, step: Any) -> int:
    """torch.arange's length, with its errors. (Asking torch on the meta device would do, but
    it creates torch's inductor cache directory in the temp dir as a side effect.)"""
    if step == 0:
        raise ValueError("arange: step must be nonzero")
    if (step > 0 and start > end) or (step < 0 and start < end):
        raise ValueError(
            f"arange: upper bound {end} and lower bound {start} inconsistent with step sign {step}"
        )
    if all(isinstance(v, int) for v in (start, end, step)):
        return -((start - end) // step)  # exact for any int
    return max(0, math.ceil((end - start) / step))


def _random(
    kind: CreateKind,
    shape: tuple[int, ...],
    dtype: torch.dtype,
    generator: torch.Generator | None,
    args: tuple[Any, ...],
    kw: dict[str, Any],
) -> Tensor:
    source = torch.default_generator if generator is None else generator
    if not isinstance(source, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator, got {type(source).__name__}")
    if source.device.type != "cpu":
        raise ValueError(f"generator must be a CPU torch.Generator, got one on {source.device}")
    snapshot = torch.Generator().set_state(source.get_state())
    draw(kind, shape, dtype, args, source)  # advance the caller's generator as torch would
    return create(kind, shape, dtype, args=args, generator=snapshot, **_kw(kw))


def draw(
    kind: CreateKind,
    shape: tuple[int, ...],
    dtype: torch.dtype,
    args: tuple[Any, ...],
    generator: torch.Generator,
) -> torch.Tensor:
    """The full random tensor torch draws (the Create kernel regenerates it the same way)."""
    if kind == CreateKind.RAND:
        return torch.rand(shape, generator=generator, dtype=dtype)
    if kind == CreateKind.RANDN:
        return torch.randn(shape, generator=generator, dtype=dtype)
    return torch.randint(args[0], args[1], shape, generator=generator, dtype=dtype)


def rand(
    *size: Any,
    generator: torch.Generator | None = None,
    dtype: torch.dtype | None = None,
    **kw: Any,
) -> Tensor:
    shape = _shape(size)
    return _random(CreateKind.RAND, shape, _float_dtype(kw.get("graph"), dtype), generator, (), kw)


def randn(
    *size: Any,
    generator: torch.Generator | None = None,
    dtype: torch.dtype | None = None,
    **kw: Any,
) -> Tensor:
    shape = _shape(size)
    return _random(CreateKind.RANDN, shape, _float_dtype(kw.get("graph"), dtype), generator, (), kw)


def randint(
    *args: Any,
    generator: torch.Generator | None = None,
    dtype: torch.dtype | None = None,
    **kw: Any,
) -> Tensor:
    """``randint(high, size)`` or ``randint(low, high, size)``, as torch."""
    if len(args) == 2:
        low, high, size = 0, args[0], args[1]
    elif len(args) == 3:
        low, high, size = args
    else:
        raise TypeError("randint takes (high, size) or (low, high, size)")
    shape = _shape((size,))
    return _random(
        CreateKind.RANDINT, shape, dtype or torch.int64, generator, (int(low), int(high)), kw
    )


def from_torch(data: torch.Tensor, *, dtype: torch.dtype | None = None, **kw: Any) -> Tensor:
    """Distribute a full torch tensor: Shard chunks it, Replicate copies it, Partial puts the
    value on the first rank of that mesh dimension and zeros elsewhere."""
    if not isinstance(data, torch.Tensor):
        raise TypeError(f"from_torch needs a torch.Tensor, got {type(data).__name__}")
    value = data.detach().to("cpu", dtype or data.dtype, copy=True).contiguous()
    return create(CreateKind.FROM_TENSOR, tuple(value.shape), value.dtype, value=value, **_kw(kw))


def tensor(data: Any, *, dtype: torch.dtype | None = None, **kw: Any) -> Tensor:
    """``torch.tensor(data)`` distributed like ``from_torch`` (floats take the graph's
    default dtype)."""
    if isinstance(data, torch.Tensor):
        return from_torch(data, dtype=dtype, **kw)
    value = torch.tensor(data, dtype=dtype)
    if dtype is None and value.dtype.is_floating_point:
        value = value.to(_float_dtype(kw.get("graph"), None))
    return from_torch(value, **kw)


def _like(t: Tensor, kw: dict[str, Any]) -> dict[str, Any]:
    kw.setdefault("graph", t.graph)
    if kw.get("device") is None:
        kw.setdefault("device_mesh", t.device_mesh)
        kw.setdefault("placements", t.placements)
    return kw


def zeros_like(t: Tensor, *, dtype: torch.dtype | None = None, **kw: Any) -> Tensor:
    return zeros(t.shape, dtype=dtype or t.dtype, **_like(t, kw))


def ones_like(t: Tensor, *, dtype: torch.dtype | None = None, **kw: Any) -> Tensor:
    return ones(t.shape, dtype=dtype or t.dtype, **_like(t, kw))


def empty_like(t: Tensor, *, dtype: torch.dtype | None = None, **kw: Any) -> Tensor:
    return empty(t.shape, dtype=dtype or t.dtype, **_like(t, kw))


def full_like(t: Tensor, fill_value: Any, *, dtype: torch.dtype | None = None, **kw: Any) -> Tensor:
    return full(t.shape, fill_value, dtype=dtype or t.dtype, **_like(t, kw))


def rand_like(t: Tensor, *, dtype: torch.dtype | None = None, **kw: Any) -> Tensor:
    return rand(t.shape, dtype=dtype or t.dtype, **_like(t, kw))


def randn_like(t: Tensor, *, dtype: torch.dtype | None = None, **kw: Any) -> Tensor:
    return randn(t.shape, dtype=dtype or t.dtype, **_like(t, kw))


_KEYWORDS = frozenset({"graph", "device_mesh", "device", "placements"})


def _kw(kw: dict[str, Any]) -> dict[str, Any]:
    """The placement keywords, with a clear error for anything else."""
    unknown = set(kw) - _KEYWORDS - {"requires_grad", "layout", "pin_memory"}
    if unknown:
        raise TypeError(
            f"unexpected keyword(s) {sorted(unknown)}; accepted: {sorted(_KEYWORDS)} and dtype"
        )
    if kw.get("requires_grad"):
        raise ValueError(
            "dtorch tensors do not record gradients; requires_grad=True is not supported"
        )
    return {k: kw.get(k) for k in _KEYWORDS}
