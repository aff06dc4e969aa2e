# mypy: disable-error-code="misc"
# (``self: Tensor`` in a mixin of Tensor: mypy's [misc] asks a self-type to be a supertype)
"""The conversion methods of ``dtorch.Tensor``, as the mixin ``TensorConversions``: new
tensors on the same mesh (``new_zeros``, ``new_tensor``, ...), copies (``clone``,
``detach``, ``copy_``), moves and casts (``to``, ``type``, ``cpu``, ``cuda``, ``float``,
``long``, ...). The behaviour lives in ``dtorch.api.ops.convert`` and ``dtorch.api.ops.fill``.

Example:
    >>> import torch, dtorch
    >>> t = dtorch.arange(3)
    >>> t.float().dtype, t.to(torch.float64).dtype, t.new_ones(2).tolist()
    (torch.float32, torch.float64, [1, 1])
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from dtorch.api.dims import as_flag
from dtorch.api.ops import convert as _cv
from dtorch.api.ops import fill as _fl
from dtorch.api.ops import methods as _mk
from dtorch.ir.opkind import CreateKind as C

if TYPE_CHECKING:
    from dtorch.api.tensor import Tensor


class TensorConversions:
    """The conversion methods of ``dtorch.Tensor`` (a mixin: ``Tensor`` is its only user)."""

    __slots__ = ()

    # --- new tensors on this one's mesh, every mesh dim Replicate, in its dtype by default;
    # torch's keywords device= (that device instead), requires_grad, layout, pin_memory ---
    def new_zeros(self: Tensor, *size: Any, dtype: torch.dtype | None = None, **kw: Any) -> Tensor:
        """torch's ``new_zeros(*size)``: zeros in ``self``'s dtype unless ``dtype``, on
        ``self``'s mesh with every mesh dim Replicate (not ``self``'s placements).

        Example:
            >>> import dtorch
            >>> mesh = dtorch.init_device_mesh("cpu", 2)
            >>> z = dtorch.ones(4, device_mesh=mesh, placements=[dtorch.Shard(0)]).new_zeros(2, 3)
            >>> z.placements, z.tolist()
            ([Replicate()], [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
        """
        return _fl.new(self, C.ZEROS, size, dtype, kw)

    def new_ones(self: Tensor, *size: Any, dtype: torch.dtype | None = None, **kw: Any) -> Tensor:
        """torch's ``new_ones(*size)``: ones in ``self``'s dtype unless ``dtype``, on
        ``self``'s mesh with every mesh dim Replicate (as ``new_zeros``).

        Example:
            >>> import torch, dtorch
            >>> dtorch.zeros(2).new_ones((2,), dtype=torch.int64).tolist()
            [1, 1]
        """
        return _fl.new(self, C.ONES, size, dtype, kw)

    def new_empty(self: Tensor, *size: Any, dtype: torch.dtype | None = None, **kw: Any) -> Tensor:
        """torch's ``new_empty(*size)``: an uninitialized tensor in ``self``'s dtype unless
        ``dtype``, on ``self``'s mesh with every mesh dim Replicate (as ``new_zeros``).

        Example:
            >>> import torch, dtorch
            >>> e = dtorch.zeros(2, dtype=torch.int32).new_empty(2, 3)
            >>> e.shape, e.dtype
            (torch.Size([2, 3]), torch.int32)
        """
        return _fl.new(self, C.EMPTY, size, dtype, kw)

    def new_full(
        self: Tensor, size: Any, fill_value: Any, *, dtype: torch.dtype | None = None, **kw: Any
    ) -> Tensor:
        """torch's ``new_full(size, fill_value)``: ``size`` (a sequence) of ``fill_value`` in
        ``self``'s dtype unless ``dtype``, on ``self``'s mesh with every mesh dim Replicate.

        Example:
            >>> import dtorch
            >>> dtorch.zeros(1).new_full((2, 2), 7).tolist()
            [[7.0, 7.0], [7.0, 7.0]]
        """
        return _fl.new_full(self, size, fill_value, dtype, kw)

    def new_tensor(
        self: Tensor, data: Any, *, dtype: torch.dtype | None = None, **kw: Any
    ) -> Tensor:
        """torch's ``new_tensor(data)``: a copy of ``data`` (numbers, nested lists, a torch or
        dtorch tensor) in ``self``'s dtype unless ``dtype``, on ``self``'s mesh with every mesh
        dim Replicate.

        Example:
            >>> import dtorch
            >>> dtorch.zeros(1).new_tensor([1, 2]).tolist()
            [1.0, 2.0]
        """
        return _fl.new_tensor(self, data, dtype, kw)

    # --- copies and conversions -------------------------------------------------------------
    clone = _cv.clone
    copy_ = _fl.copy_  # a number fills, as in torch
    detach = _cv.detach

    def to(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        """torch's ``to``: ``to(dtype)``, ``to(device)``, ``to(mesh)``, ``to(device_or_mesh,
        dtype)``, ``to(other)`` (its mesh and dtype), or the keywords ``device``,
        ``device_mesh``, ``dtype`` (``non_blocking`` and ``copy`` too). A mesh of the same
        shape keeps the placements; one device gets the full value (Replicate); a mesh of
        another shape is refused (use ``redistribute``). ``self`` itself when nothing changes
        (unless ``copy=True``): ``to("cpu")`` of a CPU tensor, however distributed.

        Example:
            >>> import torch, dtorch
            >>> mesh = dtorch.init_device_mesh("cpu", 2)
            >>> t = dtorch.arange(4, device_mesh=mesh, placements=[dtorch.Shard(0)])
            >>> t.to(torch.float64).placements, t.to("cpu") is t, t.to("cpu:1").placements
            ([Shard(dim=0)], True, [Replicate()])
        """
        return _cv.to(self, *args, **kwargs)

    type_as = _cv.type_as

    def type(self: Tensor, dtype: Any = None, non_blocking: bool = False, **kwargs: Any) -> Any:
        """torch's ``type``: the legacy type name without ``dtype`` (``torch.cuda.`` on a CUDA
        mesh), else the tensor as that type - a ``torch.dtype``, a type name or a typed class
        (see ``dtorch.api.ops.convert.to_type``); ``self`` itself when nothing changes.

        Example:
            >>> import torch, dtorch
            >>> t = dtorch.zeros(2)
            >>> t.type(), t.type(torch.int32).type(), t.type("torch.DoubleTensor").dtype
            ('torch.FloatTensor', 'torch.IntTensor', torch.float64)
        """
        return _cv.to_type(self, dtype, non_blocking, **kwargs)

    def cpu(self: Tensor, *, memory_format: Any = torch.preserve_format) -> Tensor:
        """torch's ``cpu()``: ``to("cpu")``. ``self`` itself when its mesh is on the CPU,
        however distributed (its placements unchanged); else the full value on CPU device 0.
        ``memory_format``: torch's preserve or contiguous format (dtorch keeps no other).

        Example:
            >>> import dtorch
            >>> mesh = dtorch.init_device_mesh("cpu", 2)
            >>> t = dtorch.zeros(4, device_mesh=mesh, placements=[dtorch.Shard(0)])
            >>> t.cpu() is t, t.cpu().placements
            (True, [Shard(dim=0)])
        """
        _cv.checked_format("cpu", memory_format)
        return _cv.to(self, "cpu")

    def cuda(
        self: Tensor,
        device: Any = None,
        non_blocking: bool = False,
        memory_format: Any = torch.preserve_format,
    ) -> Tensor:
        """torch's ``cuda(device)``: ``to("cuda")`` or ``to("cuda:<device>")`` (``device``: an
        index, ``"cuda:1"`` or a CUDA ``torch.device``); ``self`` itself when it is there
        already, else the full value on that one GPU. Where the graph cannot run on it (no
        GPU), a MeshError at the call, as torch's ``cuda()`` raises. ``non_blocking`` and
        ``memory_format`` are torch's (every move is asynchronous here; preserve or
        contiguous format only).

        Example:
            >>> import torch, dtorch
            >>> t = dtorch.zeros(2)
            >>> t.cuda(0).device if torch.cuda.is_available() else torch.device("cuda", 0)
            device(type='cuda', index=0)
        """
        as_flag(non_blocking, "cuda", "non_blocking")
        _cv.checked_format("cuda", memory_format)
        return _cv.to(self, _cv.cuda_device(device))

    # --- dtype casts (last: their names shadow builtins in the class body) ------------
    half = _mk.cast(torch.float16, "half")
    bfloat16 = _mk.cast(torch.bfloat16, "bfloat16")
    float = _mk.cast(torch.float32, "float")
    double = _mk.cast(torch.float64, "double")
    bool = _mk.cast(torch.bool, "bool")
    byte = _mk.cast(torch.uint8, "byte")
    char = _mk.cast(torch.int8, "char")
    short = _mk.cast(torch.int16, "short")
    int = _mk.cast(torch.int32, "int")
    long = _mk.cast(torch.int64, "long")
