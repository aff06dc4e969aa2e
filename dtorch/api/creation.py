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
import operator
from typing import Any

import numpy as np
import torch

from dtorch.api.create import create as _create
from dtorch.api.create import distribute, float_dtype, from_data, placement_keywords
from dtorch.api.create import shape_of as _shape
from dtorch.api.dims import as_int
from dtorch.api.graph import Graph
from dtorch.api.ops.convert import checked_format
from dtorch.api.ops.random_fill import torch_refusals
from dtorch.api.ops.scalars import is_scalar, not_a_number, python_number
from dtorch.api.record import is_handle, not_a_tensor
from dtorch.api.redistribute import normalized
from dtorch.api.tensor import Tensor
from dtorch.errors import ParamError, ShapeError
from dtorch.ir.dtypes import as_dtype
from dtorch.ir.mesh import DeviceMesh
from dtorch.ir.opkind import CreateKind
from dtorch.ir.random_draw import snapshot
from dtorch.ir.rules.create import check_arange_dtype
from dtorch.ir.rules.ints import outside_int64
from dtorch.ir.subsplit import check_marks


def create(kind: CreateKind, shape: tuple[int, ...], dtype: torch.dtype, **kw: Any) -> Tensor:
    """Record a Create operator of a ``Tensor`` (``dtorch.api.create.create``, whose keywords
    it takes); every creation function here ends in it."""
    return _create(Tensor, kind, shape, dtype, **kw)


def zeros(*size: Any, dtype: torch.dtype | None = None, **kw: Any) -> Tensor:
    """``torch.zeros``: ``zeros(2, 3)``, ``zeros((2, 3))`` or ``zeros(size=(2, 3))``.

    Example:
        >>> import dtorch
        >>> dtorch.zeros(size=(2,)).tolist()
        [0.0, 0.0]
    """
    return _sized(CreateKind.ZEROS, size, dtype, kw)


def ones(*size: Any, dtype: torch.dtype | None = None, **kw: Any) -> Tensor:
    """``torch.ones``: ``ones(2, 3)``, ``ones((2, 3))`` or ``ones(size=(2, 3))``.

    Example:
        >>> import dtorch
        >>> dtorch.ones(size=[2], dtype=dtorch.int32).tolist()
        [1, 1]
    """
    return _sized(CreateKind.ONES, size, dtype, kw)


def empty(*size: Any, dtype: torch.dtype | None = None, **kw: Any) -> Tensor:
    """``torch.empty``: ``empty(2, 3)``, ``empty((2, 3))`` or ``empty(size=(2, 3))``.

    Example:
        >>> import dtorch
        >>> dtorch.empty(size=(2, 3)).shape
        torch.Size([2, 3])
    """
    return _sized(CreateKind.EMPTY, size, dtype, kw)


# zeros, ones, empty: the size checked first, then the graph's float dtype by default.
def _sized(kind: CreateKind, size: Any, dtype: torch.dtype | None, kw: dict[str, Any]) -> Tensor:
    shape = _sizes(kind.name.lower(), size, kw)
    dtype = float_dtype(kw.get("graph"), dtype)
    return create(kind, shape, dtype, **placement_keywords(kw))


def _sizes(name: str, size: tuple[Any, ...], kw: dict[str, Any]) -> tuple[int, ...]:
    """The shape of ``*size`` or of torch's keyword ``size=`` (popped from ``kw``), which
    like torch's takes one sequence of ints, never both forms."""
    if "size" not in kw:
        if not size:  # torch's TypeError: zeros() is no 0-d tensor (that is zeros(()))
            raise TypeError(f"{name}() missing 1 required positional argument: 'size'")
        return _named_shape(name, size)
    given = kw.pop("size")
    if size:
        raise TypeError(f"{name}() got multiple values for argument 'size'")
    return _named_shape(name, (_size_keyword(name, given),))


def _named_shape(name: str, size: tuple[Any, ...]) -> tuple[int, ...]:
    # ``shape_of``, its refusal naming the call
    try:
        return _shape(size)
    except (TypeError, ShapeError) as error:
        raise type(error)(f"{name}: {error}") from None


def _size_keyword(name: str, size: Any) -> Any:
    """torch's ``size=``: one sequence of ints (never a bare int, which torch refuses there)."""
    if not isinstance(size, (tuple, list, torch.Size)):
        raise TypeError(
            f"{name}(): argument 'size' must be a tuple of ints, not {type(size).__name__}"
        )
    return size


def full(size: Any, fill_value: Any, *, dtype: torch.dtype | None = None, **kw: Any) -> Tensor:
    """``torch.full``: ``size`` filled with ``fill_value`` (a number or a 0-d torch tensor).
    Without ``dtype``, a bool fill gives bool, an int int64, a float the graph's
    ``default_dtype`` (float32 unless set there: ``torch.set_default_dtype`` does not change
    it); unlike torch, ``size`` may be a bare int.

    Example:
        >>> import dtorch
        >>> dtorch.full((2, 2), 7).tolist(), dtorch.full(3, 0.5).dtype
        ([[7, 7], [7, 7]], torch.float32)
    """
    shape = _shape((size,))
    if not is_scalar(fill_value):
        raise not_a_number("full: fill_value", fill_value)
    fill = python_number(fill_value)
    if dtype is None:
        dtype = _full_dtype(kw.get("graph"), fill)
    return create(CreateKind.FULL, shape, dtype, args=(fill,), **placement_keywords(kw))


def _full_dtype(graph: Graph | None, fill: bool | int | float) -> torch.dtype:
    if isinstance(fill, bool):
        return torch.bool
    return torch.int64 if isinstance(fill, int) else float_dtype(graph, None)


def arange(*args: Any, dtype: torch.dtype | None = None, **kw: Any) -> Tensor:
    """``torch.arange`` semantics: ``arange(end)`` or ``arange(start, end, step=1)``, each
    bound positional or by keyword (``arange(end=3)``, ``arange(start=1, end=5, step=2)``).
    An int64 arange truncates float bounds to ints first, as torch's does (a step of 0.5 is
    refused as 0); bool, complex and the unsigned dtypes wider than uint8 have none
    (an UnsupportedDtypeError, torch's NotImplementedError).

    Example:
        >>> import dtorch
        >>> dtorch.arange(end=3).tolist(), dtorch.arange(1, end=5, step=2).tolist()
        ([0, 1, 2], [1, 3])
    """
    bounds = tuple(_arange_bound(v) for v in _arange_bounds(args, kw))
    if dtype is None:
        floating = any(isinstance(v, float) for v in bounds)
        dtype = float_dtype(kw.get("graph"), None) if floating else torch.int64
    dtype = as_dtype("arange", dtype)
    check_arange_dtype("arange", dtype)  # at the call: the devices would fail
    if not dtype.is_floating_point:  # torch's integer arange reads its bounds as int64 first
        _check_int64_bounds(bounds)
    if dtype == torch.int64:
        bounds = tuple(int(v) if isinstance(v, float) and math.isfinite(v) else v for v in bounds)
    shape = (arange_length(*bounds),)  # a bad step raises here, at the user's line
    return create(CreateKind.ARANGE, shape, dtype, args=bounds, **placement_keywords(kw))


def _check_int64_bounds(bounds: tuple[Any, ...]) -> None:
    # torch's refusal, at the call (the devices would fail on it)
    bad = outside_int64(bounds)
    if bad is not None:
        raise ParamError(
            f"arange: value cannot be converted to type int64_t without overflow (the bound "
            f"{bad}); accepted: int64 bounds, or a floating-point dtype"
        )


def _arange_bound(value: Any, name: str = "arange") -> Any:
    # torch takes a 0-d tensor; a dtorch one holds its value on the devices, and the length
    # (the shape, known at the call) depends on it: reading it would be a hidden round trip
    if is_handle(value):
        raise TypeError(
            f"{name}: its bounds must be numbers (or 0-d torch tensors), got a "
            "dtorch.Tensor, whose value is on the devices; pass its value: t.item()"
        )
    if not is_scalar(value):
        raise not_a_number(f"{name}: a bound", value)
    return python_number(value)


def _arange_bounds(args: tuple[Any, ...], kw: dict[str, Any]) -> tuple[Any, Any, Any]:
    """(start, end, step) of torch's two forms, ``(end)`` and ``(start, end, step=1)``; the
    bound keywords are popped from ``kw``. Like torch, one bound is ``end``, and ``step`` or
    ``start`` selects the second form, so ``arange(5, step=2)`` lacks ``end``."""
    given: dict[str, Any] = {k: kw.pop(k) for k in ("start", "end", "step") if k in kw}
    if len(args) + len(given) <= 1 and "start" not in given and "step" not in given:
        (end,) = _bind("arange", ("end",), args, given)
        return 0, end, 1
    start, end, step = _bind("arange", ("start", "end", "step"), args, given, {"step": 1})
    return start, end, step


def _bind(
    name: str,
    names: tuple[str, ...],
    args: tuple[Any, ...],
    given: dict[str, Any],
    defaults: dict[str, Any] | None = None,
) -> tuple[Any, ...]:
    """Positional ``args`` and keyword ``given`` bound to ``names`` as Python binds them
    (TypeError for too many, twice given or missing)."""
    if len(args) > len(names):
        raise TypeError(f"{name}() takes at most {len(names)} positional arguments here")
    bound = dict(zip(names, args, strict=False))
    for key, value in given.items():
        if key in bound:
            raise TypeError(f"{name}() got multiple values for argument '{key}'")
        bound[key] = value
    bound = {**(defaults or {}), **bound}
    missing = [n for n in names if n not in bound]
    if missing:
        raise TypeError(f"{name}() missing required argument(s): {', '.join(missing)}")
    return tuple(bound[n] for n in names)


def arange_length(start: Any, end: Any, step: Any) -> int:
    """torch.arange's length, with its errors. (Asking torch on the meta device would do, but
    it creates torch's inductor cache directory in the temp dir as a side effect.) The
    program loader checks a file's ARANGE operators with it.

    Example:
        >>> arange_length(0, 10, 3), arange_length(0.0, 1.0, 0.3)
        (4, 4)
    """
    if any(isinstance(v, float) and not math.isfinite(v) for v in (start, end, step)):
        raise ParamError(f"arange: unsupported range: {start} -> {end} (step {step})")
    if step == 0:
        raise ParamError("arange: step must be nonzero")
    if (step > 0 and start > end) or (step < 0 and start < end):
        raise ParamError(
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
    with torch_refusals(kind.name.lower()):  # torch's checks, as dtorch's error classes
        copy = snapshot(kind, shape, dtype, args, source)  # the caller's advanced as torch's
    return create(kind, shape, dtype, args=args, generator=copy, **placement_keywords(kw))


def rand(
    *size: Any,
    generator: torch.Generator | None = None,
    dtype: torch.dtype | None = None,
    **kw: Any,
) -> Tensor:
    """``torch.rand``: the values torch draws for the same generator, however sharded.

    Example:
        >>> import torch, dtorch
        >>> g, ref = torch.Generator().manual_seed(2), torch.Generator().manual_seed(2)
        >>> got = dtorch.rand(size=(3,), generator=g).to_torch()
        >>> torch.equal(got, torch.rand(3, generator=ref))
        True
    """
    shape = _sizes("rand", size, kw)
    return _random(CreateKind.RAND, shape, float_dtype(kw.get("graph"), dtype), generator, (), kw)


def randn(
    *size: Any,
    generator: torch.Generator | None = None,
    dtype: torch.dtype | None = None,
    **kw: Any,
) -> Tensor:
    """``torch.randn``: the values torch draws for the same generator, however sharded.

    Example:
        >>> import torch, dtorch
        >>> g, ref = torch.Generator().manual_seed(2), torch.Generator().manual_seed(2)
        >>> torch.equal(dtorch.randn(2, generator=g).to_torch(), torch.randn(2, generator=ref))
        True
    """
    shape = _sizes("randn", size, kw)
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
    """``torch.randint``: ``randint(high, size)`` or ``randint(low, high, size)``, each
    argument positional or by keyword (``randint(5, size=(3,))``, ``randint(low=2, high=5,
    size=(3,))``); the values torch draws for the same generator, however sharded.

    Example:
        >>> import torch, dtorch
        >>> g, ref = torch.Generator().manual_seed(4), torch.Generator().manual_seed(4)
        >>> got = dtorch.randint(low=2, high=9, size=(5,), generator=g).to_torch()
        >>> torch.equal(got, torch.randint(2, 9, (5,), generator=ref))
        True
    """
    low, high, size = _randint_form(args, kw)
    low, high = _int_bound("low", low), _int_bound("high", high)
    if not low < high:
        raise ParamError(f"randint: low must be less than high, got low={low}, high={high}")
    shape = _shape((size,))
    dtype = torch.int64 if dtype is None else dtype
    return _random(CreateKind.RANDINT, shape, dtype, generator, (low, high), kw)


def _randint_form(args: tuple[Any, ...], kw: dict[str, Any]) -> tuple[Any, Any, Any]:
    """(low, high, size) of torch's two forms, the bound keywords popped from ``kw``: three
    arguments in all are ``(low, high, size)``, fewer ``(high, size)`` with ``low=0``."""
    given: dict[str, Any] = {k: kw.pop(k) for k in ("low", "high", "size") if k in kw}
    if "size" in given:
        _size_keyword("randint", given["size"])
    if len(args) + len(given) >= 3 or "low" in given:
        low, high, size = _bind("randint", ("low", "high", "size"), args, given)
        return low, high, size
    high, size = _bind("randint", ("high", "size"), args, given)
    return 0, high, size


# A bound of randint: an int (or anything torch takes as one: a numpy or one-element integer
# tensor), never a bool or a float, which torch refuses too.
def _int_bound(name: str, value: Any) -> int:
    if not isinstance(value, bool):
        try:
            return operator.index(value)
        except TypeError:
            pass
    raise TypeError(f"randint(): argument '{name}' must be an int, not {type(value).__name__}")


def from_torch(data: torch.Tensor, *, dtype: torch.dtype | None = None, **kw: Any) -> Tensor:
    """Distribute a full torch tensor: Shard chunks it, Replicate copies it, Partial puts the
    value on the first rank of that mesh dimension and zeros elsewhere. The devices hold a copy
    (in ``dtype`` if given): later writes to ``data`` do not reach it.

    Example:
        >>> import torch, dtorch
        >>> mesh = dtorch.init_device_mesh("cpu", 2)
        >>> x = dtorch.from_torch(torch.arange(4.0), device_mesh=mesh, placements=[dtorch.Shard(0)])
        >>> x.placements, x.to_torch().tolist()
        ([Shard(dim=0)], [0.0, 1.0, 2.0, 3.0])
    """
    return distribute(Tensor, data, dtype=dtype, **kw)


def linspace(
    start: Any, end: Any, steps: int, *, dtype: torch.dtype | None = None, **kw: Any
) -> Tensor:
    """torch's ``linspace``: ``steps`` values evenly spaced from ``start`` to ``end`` (the
    graph's default dtype unless ``dtype``), computed by torch on the client and distributed
    as ``from_torch`` (the same values however sharded).

    Example:
        >>> import dtorch
        >>> dtorch.linspace(0, 1, 5).tolist()
        [0.0, 0.25, 0.5, 0.75, 1.0]
    """
    bounds = (_arange_bound(start, "linspace"), _arange_bound(end, "linspace"))
    dtype = float_dtype(kw.get("graph"), dtype)
    value = torch.linspace(*bounds, steps=as_int("linspace", "steps", steps), dtype=dtype)
    return distribute(Tensor, value, **kw)


def eye(n: int, m: int | None = None, *, dtype: torch.dtype | None = None, **kw: Any) -> Tensor:
    """torch's ``eye``: an ``n`` x ``m`` (``m=n`` when None) matrix of ones on the diagonal
    (the graph's default dtype unless ``dtype``), distributed as ``from_torch``.

    Example:
        >>> import dtorch
        >>> dtorch.eye(2, 3, dtype=dtorch.int64).tolist()
        [[1, 0, 0], [0, 1, 0]]
    """
    dtype = float_dtype(kw.get("graph"), dtype)
    rows = as_int("eye", "n", n)
    value = torch.eye(rows, rows if m is None else as_int("eye", "m", m), dtype=dtype)
    return distribute(Tensor, value, **kw)


def tensor(data: Any, *, dtype: torch.dtype | None = None, **kw: Any) -> Tensor:
    """``torch.tensor(data)`` distributed like ``from_torch`` (floats take the graph's
    default dtype). Of a dtorch tensor, as torch's of a torch tensor: a copy, with torch's
    warning, on the source's mesh and placements unless the keywords say otherwise.

    Example:
        >>> import warnings, dtorch
        >>> t = dtorch.ones(2)
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("ignore")
        ...     c = dtorch.tensor(t, dtype=dtorch.int64)
        >>> c.tolist(), c.dtype
        ([1, 1], torch.int64)
    """
    return from_data(Tensor, data, dtype=dtype, **kw)


def _like(name: str, input: Any, kw: dict[str, Any]) -> dict[str, Any]:
    """The keywords of a ``*_like`` creation: ``input``'s graph, and its mesh and placements
    unless ``device``, ``device_mesh`` or ``placements`` say otherwise (another mesh named
    without placements is Replicate on every dim, as every creation makes it; ``input``'s
    own mesh named keeps its placements)."""
    if not isinstance(input, Tensor):
        raise not_a_tensor(name, "input", input)
    if "memory_format" in kw:  # the preserve and contiguous formats are both row-major here
        checked_format(name, kw.pop("memory_format"))
    kw.setdefault("graph", input.graph)
    if kw.get("device") is None and kw.get("device_mesh") in (None, input.device_mesh):
        kw["device_mesh"] = input.device_mesh
        kw.setdefault("placements", input.placements)
    mesh, placements = kw.get("device_mesh"), kw.get("placements")
    if kw.get("device") is None and isinstance(mesh, DeviceMesh) and placements is not None:
        # refusals name the call (zeros_like), not the creation it makes
        check_marks(name, tuple(input.shape), normalized(name, placements, mesh, input.ndim))
    return kw


def zeros_like(input: Tensor, *, dtype: torch.dtype | None = None, **kw: Any) -> Tensor:
    """``torch.zeros_like``: zeros of ``input``'s shape, dtype, mesh and placements. Every
    ``*_like`` refuses a torch tensor (TypeError): it names no mesh to build on (``dtorch.zeros(
    t.shape, dtype=t.dtype)`` builds on the default one).

    Example:
        >>> import dtorch
        >>> dtorch.zeros_like(input=dtorch.ones(2, dtype=dtorch.int32)).tolist()
        [0, 0]
    """
    kw = _like("zeros_like", input, kw)
    return zeros(input.shape, dtype=input.dtype if dtype is None else dtype, **kw)


def ones_like(input: Tensor, *, dtype: torch.dtype | None = None, **kw: Any) -> Tensor:
    """``torch.ones_like``: ones of ``input``'s shape, dtype, mesh and placements.

    Example:
        >>> import dtorch
        >>> dtorch.ones_like(input=dtorch.zeros(2)).tolist()
        [1.0, 1.0]
    """
    kw = _like("ones_like", input, kw)
    return ones(input.shape, dtype=input.dtype if dtype is None else dtype, **kw)


def empty_like(input: Tensor, *, dtype: torch.dtype | None = None, **kw: Any) -> Tensor:
    """``torch.empty_like``: an uninitialised tensor of ``input``'s shape, dtype, mesh and
    placements.

    Example:
        >>> import dtorch
        >>> dtorch.empty_like(input=dtorch.zeros(2, 3)).shape
        torch.Size([2, 3])
    """
    kw = _like("empty_like", input, kw)
    return empty(input.shape, dtype=input.dtype if dtype is None else dtype, **kw)


def full_like(
    input: Tensor, fill_value: Any, *, dtype: torch.dtype | None = None, **kw: Any
) -> Tensor:
    """``torch.full_like``: ``fill_value`` in ``input``'s shape, dtype, mesh and placements.

    Example:
        >>> import dtorch
        >>> dtorch.full_like(input=dtorch.zeros(2), fill_value=7).tolist()
        [7.0, 7.0]
    """
    kw = _like("full_like", input, kw)
    return full(input.shape, fill_value, dtype=input.dtype if dtype is None else dtype, **kw)


def rand_like(input: Tensor, *, dtype: torch.dtype | None = None, **kw: Any) -> Tensor:
    """``torch.rand_like``: ``rand`` of ``input``'s shape, dtype, mesh and placements.

    Example:
        >>> import dtorch
        >>> dtorch.rand_like(input=dtorch.zeros(2, dtype=dtorch.float64)).dtype
        torch.float64
    """
    kw = _like("rand_like", input, kw)
    return rand(input.shape, dtype=input.dtype if dtype is None else dtype, **kw)


def randn_like(input: Tensor, *, dtype: torch.dtype | None = None, **kw: Any) -> Tensor:
    """``torch.randn_like``: ``randn`` of ``input``'s shape, dtype, mesh and placements.

    Example:
        >>> import dtorch
        >>> dtorch.randn_like(input=dtorch.zeros(2, 3)).shape
        torch.Size([2, 3])
    """
    kw = _like("randn_like", input, kw)
    return randn(input.shape, dtype=input.dtype if dtype is None else dtype, **kw)


def from_numpy(array: np.ndarray, **kw: Any) -> Tensor:
    """``torch.from_numpy(array)`` distributed like ``from_torch`` (a copy: the devices hold
    their own shards).

    Example:
        >>> import numpy as np, dtorch
        >>> dtorch.from_numpy(np.arange(3)).tolist()
        [0, 1, 2]
    """
    return from_torch(torch.from_numpy(array), **kw)
