"""Creation functions: ``zeros ones empty full arange rand randn randint uniform *_like
tensor from_torch``.

Every function takes the keywords ``device_mesh``, ``placements``, ``dtype``, ``graph`` and
``device`` (``device`` and ``device_mesh`` are mutually exclusive; without either the graph's
default mesh is used; without ``placements`` every mesh dimension is Replicate). Random
functions draw exactly the values torch draws for the same generator, however the result is
sharded: the operator carries a snapshot of the generator, the devices regenerate the full
tensor from it and keep their shard, and the caller's generator advances as torch's would.

These make ``Tensor`` handles; their core (``dtorch.api.create``) takes the handle class, so
that the operator modules and ``Tensor.__init__`` create without importing this module.

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
from typing import Any

import numpy as np
import torch

from dtorch.api.create import create as _create
from dtorch.api.create import distribute, float_dtype, from_data, placement_keywords
from dtorch.api.create import shape_of as _shape
from dtorch.api.graph import Graph
from dtorch.api.ops.scalars import is_scalar, python_number
from dtorch.api.tensor import Tensor
from dtorch.errors import ParamError
from dtorch.ir.opkind import CreateKind


def create(kind: CreateKind, shape: tuple[int, ...], dtype: torch.dtype, **kw: Any) -> Tensor:
    """Record a Create operator of a ``Tensor`` (``dtorch.api.create.create``, whose keywords
    it takes); every creation function here ends in it."""
    return _create(Tensor, kind, shape, dtype, **kw)


def zeros(*size: Any, dtype: torch.dtype | None = None, **kw: Any) -> Tensor:
    return _sized(CreateKind.ZEROS, size, dtype, kw)


def ones(*size: Any, dtype: torch.dtype | None = None, **kw: Any) -> Tensor:
    return _sized(CreateKind.ONES, size, dtype, kw)


def empty(*size: Any, dtype: torch.dtype | None = None, **kw: Any) -> Tensor:
    return _sized(CreateKind.EMPTY, size, dtype, kw)


# zeros, ones, empty: the size checked first, then the graph's float dtype by default.
def _sized(kind: CreateKind, size: Any, dtype: torch.dtype | None, kw: dict[str, Any]) -> Tensor:
    shape = _shape(size)
    dtype = float_dtype(kw.get("graph"), dtype)
    return create(kind, shape, dtype, **placement_keywords(kw))


def full(size: Any, fill_value: Any, *, dtype: torch.dtype | None = None, **kw: Any) -> Tensor:
    shape = _shape((size,))
    if not is_scalar(fill_value):
        raise TypeError(f"full: fill_value must be a number, got {type(fill_value).__name__}")
    fill = python_number(fill_value)
    if dtype is None:
        dtype = _full_dtype(kw.get("graph"), fill)
    return create(CreateKind.FULL, shape, dtype, args=(fill,), **placement_keywords(kw))


def _full_dtype(graph: Graph | None, fill: bool | int | float) -> torch.dtype:
    if isinstance(fill, bool):
        return torch.bool
    return torch.int64 if isinstance(fill, int) else float_dtype(graph, None)


def arange(
    start: Any, end: Any = None, step: Any = 1, *, dtype: torch.dtype | None = None, **kw: Any
) -> Tensor:
    """``torch.arange`` semantics: ``arange(end)`` or ``arange(start, end, step)``."""
    if end is None:
        start, end = 0, start
    bounds = tuple(python_number(v) for v in (start, end, step))
    if dtype is None:
        floating = any(isinstance(v, float) for v in bounds)
        dtype = float_dtype(kw.get("graph"), None) if floating else torch.int64
    shape = (arange_length(*bounds),)  # a bad step raises here, at the user's line
    return create(CreateKind.ARANGE, shape, dtype, args=bounds, **placement_keywords(kw))


def arange_length(start: Any, end: Any, step: Any) -> int:
    """torch.arange's length, with its errors. (Asking torch on the meta device would do, but
    it creates torch's inductor cache directory in the temp dir as a side effect.) The
    program loader checks a file's ARANGE operators with it.

    Example:
        >>> arange_length(0, 10, 3), arange_length(0.0, 1.0, 0.3)
        (4, 4)
    """
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
    return create(kind, shape, dtype, args=args, generator=snapshot, **placement_keywords(kw))


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
    if kind == CreateKind.UNIFORM:
        return torch.empty(shape, dtype=dtype).uniform_(*args, generator=generator)
    return torch.randint(args[0], args[1], shape, generator=generator, dtype=dtype)


def rand(
    *size: Any,
    generator: torch.Generator | None = None,
    dtype: torch.dtype | None = None,
    **kw: Any,
) -> Tensor:
    shape = _shape(size)
    return _random(CreateKind.RAND, shape, float_dtype(kw.get("graph"), dtype), generator, (), kw)


def randn(
    *size: Any,
    generator: torch.Generator | None = None,
    dtype: torch.dtype | None = None,
    **kw: Any,
) -> Tensor:
    shape = _shape(size)
    return _random(CreateKind.RANDN, shape, float_dtype(kw.get("graph"), dtype), generator, (), kw)


def uniform(
    size: Any,
    low: float = 0.0,
    high: float = 1.0,
    *,
    generator: torch.Generator | None = None,
    dtype: torch.dtype | None = None,
    **kw: Any,
) -> Tensor:
    """``torch.empty(size).uniform_(low, high)``: the values ``torch.nn.init.uniform_`` draws
    for the same generator, in one operator (layers initialise their weights with it).

    Example:
        >>> import torch, dtorch
        >>> _ = torch.manual_seed(3)
        >>> t = dtorch.api.creation.uniform((2, 3), -0.5, 0.5)
        >>> _ = torch.manual_seed(3)
        >>> torch.equal(t.to_torch(), torch.nn.init.uniform_(torch.empty(2, 3), -0.5, 0.5))
        True
    """
    shape = _shape((size,))
    if not float(low) <= float(high):
        raise ParamError(f"uniform: low must be at most high, got low={low}, high={high}")
    dtype = float_dtype(kw.get("graph"), dtype)
    return _random(CreateKind.UNIFORM, shape, dtype, generator, (float(low), float(high)), kw)


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
    if not int(low) < int(high):
        raise ParamError(f"randint: low must be less than high, got low={low}, high={high}")
    shape = _shape((size,))
    return _random(
        CreateKind.RANDINT, shape, dtype or torch.int64, generator, (int(low), int(high)), kw
    )


def from_torch(data: torch.Tensor, *, dtype: torch.dtype | None = None, **kw: Any) -> Tensor:
    """Distribute a full torch tensor: Shard chunks it, Replicate copies it, Partial puts the
    value on the first rank of that mesh dimension and zeros elsewhere."""
    return distribute(Tensor, data, dtype=dtype, **kw)


def tensor(data: Any, *, dtype: torch.dtype | None = None, **kw: Any) -> Tensor:
    """``torch.tensor(data)`` distributed like ``from_torch`` (floats take the graph's
    default dtype)."""
    return from_data(Tensor, data, dtype=dtype, **kw)


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


def from_numpy(array: np.ndarray, **kw: Any) -> Tensor:
    """``torch.from_numpy(array)`` distributed like ``from_torch`` (a copy: the devices hold
    their own shards).

    Example:
        >>> import numpy as np, dtorch
        >>> dtorch.from_numpy(np.arange(3)).tolist()
        [0, 1, 2]
    """
    return from_torch(torch.from_numpy(array), **kw)
