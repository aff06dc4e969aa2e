# mypy: disable-error-code="misc"
# (``self: Tensor`` in a mixin of Tensor: mypy's [misc] asks a self-type to be a supertype)
"""The shape methods of ``dtorch.Tensor`` (``view``, ``reshape``, ``expand``, ``split``,
``repeat``, ...), as the mixin ``TensorShapes``: the behaviour lives in
``dtorch.api.ops.shape`` and ``dtorch.api.ops.basic_index``; these are the methods whose
signature differs from those functions' (torch's keywords, the ``*_as`` forms), and the
functions whose signature is the method's.

Example:
    >>> import dtorch
    >>> t = dtorch.arange(6)
    >>> t.view(2, 3).T.shape, t.reshape_as(dtorch.zeros(3, 2)).tolist()
    (torch.Size([3, 2]), [[0, 1], [2, 3], [4, 5]])
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from dtorch.api import redistribute as _redistribute
from dtorch.api.ops import basic_index as _bi
from dtorch.api.ops import repeats as _rp
from dtorch.api.ops import shape as _sh
from dtorch.api.ops import slices as _sl
from dtorch.api.record import tensor_arg
from dtorch.errors import ShapeError
from dtorch.ir.placement import Placement

if TYPE_CHECKING:
    from dtorch.api.tensor import Tensor


class TensorShapes:
    """The shape methods of ``dtorch.Tensor`` (a mixin: ``Tensor`` is its only user)."""

    __slots__ = ()

    def view(
        self: Tensor,
        *shape: Any,
        size: Any = None,
        dtype: torch.dtype | None = None,
        placements: Any = None,
    ) -> Tensor:
        """torch's ``view(*shape)``, ``view(size=...)``, ``view(dtype)``, and DTorch's
        ``view([placements])`` / ``view(placements=...)`` (the local shards read under other
        placements).

        Example:
            >>> import dtorch
            >>> dtorch.arange(6).view(size=(2, 3)).shape, dtorch.ones(2).view(dtorch.int32).dtype
            (torch.Size([2, 3]), torch.int32)
        """
        if placements is not None:
            if shape or size is not None or dtype is not None:
                raise TypeError("view: give sizes or placements=, not both (nor a dtype)")
            return _redistribute.view_placements(self, placements)
        if _placements(shape):
            return _redistribute.view_placements(self, shape[0])
        return _sh.view(self, *shape, size=size, dtype=dtype)

    def reshape(self: Tensor, *sizes: Any, shape: Any = None) -> Tensor:
        """torch's ``reshape(*shape)``, ``reshape(shape)`` or ``reshape(shape=...)`` (one -1 at
        most): a view where torch's would be one, else a copy. A shard is kept only where each
        device's piece stays its chunk of the result (else a PlacementError: redistribute).

        Example:
            >>> import dtorch
            >>> mesh = dtorch.init_device_mesh("cpu", 2)
            >>> t = dtorch.arange(8, device_mesh=mesh, placements=[dtorch.Shard(0)]).reshape(2, -1)
            >>> t.placements, t.tolist()
            ([Shard(dim=0)], [[0, 1, 2, 3], [4, 5, 6, 7]])
        """
        return _sh.reshape(self, *sizes, shape=shape)

    flatten = _sh.flatten
    squeeze = _sh.squeeze
    unsqueeze = _sh.unsqueeze
    transpose = _sh.transpose
    swapaxes = _sh.transpose
    swapdims = _sh.transpose

    # --- views in place: the handle becomes its own view (torch's ``unsqueeze_``, ``t_``) ---
    def _viewed(self: Tensor, view: Tensor) -> Tensor:
        """``self`` standing for ``view`` of its own value, as torch's in-place view methods
        change the tensor's shape and strides: the same object, the same memory (its other
        views and aliases keep theirs); returns ``self``."""
        if view is not self:
            self._rebind(view)
        return self

    def unsqueeze_(self: Tensor, dim: int) -> Tensor:
        """torch's ``unsqueeze_``: ``unsqueeze(dim)`` in place (see ``_viewed``).

        Example:
            >>> import dtorch
            >>> t = dtorch.arange(3)
            >>> t.unsqueeze_(0) is t, t.shape
            (True, torch.Size([1, 3]))
        """
        return self._viewed(_sh.unsqueeze(self, dim))

    def squeeze_(self: Tensor, dim: Any = None) -> Tensor:
        """torch's ``squeeze_``: ``squeeze(dim)`` in place (see ``_viewed``).

        Example:
            >>> import dtorch
            >>> t = dtorch.zeros(1, 3, 1)
            >>> t.squeeze_() is t, t.shape
            (True, torch.Size([3]))
        """
        return self._viewed(_sh.squeeze(self) if dim is None else _sh.squeeze(self, dim))

    def transpose_(self: Tensor, dim0: int, dim1: int) -> Tensor:
        """torch's ``transpose_`` (and ``swapdims_``, ``swapaxes_``): ``transpose`` in place
        (see ``_viewed``): the handle's dims swap, its memory stays.

        Example:
            >>> import dtorch
            >>> t = dtorch.arange(6).view(2, 3)
            >>> t.transpose_(0, 1) is t, t.tolist()
            (True, [[0, 3], [1, 4], [2, 5]])
        """
        return self._viewed(_sh.transpose(self, dim0, dim1))

    swapdims_ = transpose_
    swapaxes_ = transpose_

    def t_(self: Tensor) -> Tensor:
        """torch's ``t_``: ``t()`` in place (a 0-D or 1-D tensor stays as it is).

        Example:
            >>> import dtorch
            >>> t = dtorch.arange(6).view(2, 3)
            >>> t.t_() is t, t.shape
            (True, torch.Size([3, 2]))
        """
        return self._viewed(self.t())

    @property
    def T(self: Tensor) -> Tensor:
        return _sh.permute(self, *reversed(range(self.ndim)))

    @property
    def mT(self: Tensor) -> Tensor:
        return _sh.matrix_transpose(self, "mT")

    @property
    def mH(self: Tensor) -> Tensor:
        return _sh.matrix_transpose(self, "mH")

    @property
    def H(self: Tensor) -> Tensor:
        """torch's ``t.H``: the conjugate transpose of a matrix (a copy where complex); a 0-D
        tensor's ``conj()``, with torch's deprecation warning; other dims refused.

        Example:
            >>> import dtorch
            >>> dtorch.tensor([[1, 2]]).H.tolist()
            [[1], [2]]
        """
        if self.ndim not in (0, 2):
            batches = " For batches of matrices, consider using tensor.mH" if self.ndim > 2 else ""
            raise ShapeError(
                "tensor.H is only supported on matrices (2-D tensors). Got "
                f"{self.ndim}-D tensor.{batches}"
            )
        return _sh.matrix_transpose(self, "H")

    def adjoint(self: Tensor) -> Tensor:
        """torch's ``adjoint()``: ``mH``, the conjugate transpose of the last two dims."""
        return _sh.matrix_transpose(self, "adjoint")

    permute = _sh.permute

    def expand(self: Tensor, *sizes: Any, size: Any = None) -> Tensor:
        """torch's ``expand(*sizes)`` or ``expand(size=...)``: a view with dims of size 1
        broadcast to ``sizes`` (-1 keeps a dim) and new dims in front. A shard moves with its
        dim (``Shard(0)`` becomes ``Shard(1)`` under one new dim); a Partial stays Partial.

        Example:
            >>> import dtorch
            >>> mesh = dtorch.init_device_mesh("cpu", 2)
            >>> t = dtorch.arange(4, device_mesh=mesh, placements=[dtorch.Shard(0)]).expand(2, -1)
            >>> t.placements, t.tolist()
            ([Shard(dim=1)], [[0, 1, 2, 3], [0, 1, 2, 3]])
        """
        return _sh.expand(self, *(sizes if size is None else (size,)))

    def view_as(self: Tensor, other: Tensor) -> Tensor:
        """torch's ``view_as``: ``view(other.shape)``; only ``other``'s shape is read (not its
        mesh, dtype or placements).

        Example:
            >>> import dtorch
            >>> dtorch.arange(6).view_as(dtorch.zeros(2, 3)).tolist()
            [[0, 1, 2], [3, 4, 5]]
        """
        tensor_arg("view_as", other, "other")
        return _sh.view(self, other.shape)

    def reshape_as(self: Tensor, other: Tensor) -> Tensor:
        """torch's ``reshape_as``: ``reshape(other.shape)`` (its placement rules); only
        ``other``'s shape is read.

        Example:
            >>> import dtorch
            >>> dtorch.arange(6).reshape_as(dtorch.zeros(3, 2)).tolist()
            [[0, 1], [2, 3], [4, 5]]
        """
        tensor_arg("reshape_as", other, "other")
        return _sh.reshape(self, other.shape)

    def t(self: Tensor) -> Tensor:
        """torch's ``t()``: a 0-D or 1-D tensor as it is, a 2-D one transposed (a shard moves
        with its dim); more dims are refused.

        Example:
            >>> import dtorch
            >>> dtorch.t(dtorch.tensor([[1, 2, 3]])).tolist(), dtorch.t(dtorch.arange(2)).tolist()
            ([[1], [2], [3]], [0, 1])
        """
        tensor_arg("t", self)  # dtorch.t(x) is this method
        if self.ndim > 2:
            raise ShapeError(f"t() expects a tensor with <= 2 dimensions, but self is {self.ndim}D")
        return _sh.transpose(self, 0, -1) if self.ndim == 2 else self

    def expand_as(self: Tensor, other: Tensor) -> Tensor:
        """torch's ``expand_as``: ``expand(other.shape)`` (its placement rules); only
        ``other``'s shape is read.

        Example:
            >>> import dtorch
            >>> dtorch.tensor([[1], [2]]).expand_as(dtorch.zeros(2, 3)).tolist()
            [[1, 1, 1], [2, 2, 2]]
        """
        tensor_arg("expand_as", other, "other")
        return _sh.expand(self, other.shape)

    def broadcast_to(self: Tensor, size: Any) -> Tensor:
        """torch's ``broadcast_to``: ``expand(size)`` (its placement rules).

        Example:
            >>> import dtorch
            >>> dtorch.broadcast_to(dtorch.tensor([1, 2]), (2, 2)).tolist()
            [[1, 2], [1, 2]]
        """
        return _sh.expand(self, size)

    contiguous = _sh.contiguous
    chunk = _sh.chunk
    unbind = _sh.unbind

    def split(self: Tensor, split_size: Any, dim: int = 0) -> tuple[Tensor, ...]:
        """torch's ``split``: pieces of ``split_size`` along ``dim`` (the last one shorter when it
        does not divide), or one piece per size of a list. Each piece is a slice: a sharded
        ``dim`` is split only where every piece stays chunked over the same devices (else a
        PlacementError that says to redistribute). ``dtorch.split`` takes torch's keywords
        (``tensor``, ``split_size_or_sections``).

        Example:
            >>> import dtorch
            >>> [p.tolist() for p in dtorch.arange(5).split(2)]
            [[0, 1], [2, 3], [4]]
        """
        return _bi.split(self, split_size, dim)

    unsafe_chunk = _sh.chunk  # torch's chunk without its view checks: the same here

    def unsafe_split(self: Tensor, split_size: int, dim: int = 0) -> tuple[Tensor, ...]:
        """torch's ``unsafe_split``: ``split`` by one int size (torch's takes no list).

        Example:
            >>> import dtorch
            >>> [p.tolist() for p in dtorch.arange(3).unsafe_split(2)]
            [[0, 1], [2]]
        """
        if isinstance(split_size, bool) or not isinstance(split_size, int):
            raise TypeError(
                "unsafe_split(): argument 'split_size' must be int, not "
                f"{type(split_size).__name__}; accepted: an int (unsafe_split_with_sizes "
                "takes a list)"
            )
        return _bi.split(self, split_size, dim)

    narrow = _bi.narrow

    def narrow_copy(self: Tensor, dim: int, start: Any, length: int) -> Tensor:
        """torch's ``narrow_copy``: ``narrow`` as a copy of its own."""
        return _bi.narrow(self, dim, start, length).clone()

    def __reversed__(self: Tensor) -> Tensor:
        """torch's ``reversed(t)``: ``t.flip(0)`` (a 0-d tensor itself)."""
        return self if self.ndim == 0 else self.flip(0)

    select = _sl.select
    tensor_split = _sl.tensor_split
    diff = _sl.diff

    def repeat(self: Tensor, *repeats: Any, **kwargs: Any) -> Tensor:
        """torch's ``repeat(*repeats)`` or ``repeat(repeats=...)``: the tensor tiled
        ``repeats[i]`` times along dim ``i`` (extra counts add dims in front). A shard stays
        only on a dim repeated once (else a PlacementError: redistribute that dim to
        Replicate first, or use ``repeat_interleave``); a Partial stays Partial.

        Example:
            >>> import dtorch
            >>> dtorch.tensor([1, 2]).repeat(2, 2).tolist()
            [[1, 2, 1, 2], [1, 2, 1, 2]]
        """
        if "repeats" in kwargs:
            repeats = (kwargs.pop("repeats"),)
        if kwargs:
            raise TypeError(f"repeat: unexpected keyword(s) {sorted(kwargs)}; accepted: repeats")
        return _rp.repeat(self, *repeats)

    repeat_interleave = _rp.repeat_interleave
    tile = _rp.tile
    movedim = _sh.movedim
    moveaxis = _sh.movedim

    def unflatten(self: Tensor, dim: int, sizes: Any) -> Tensor:
        """torch's ``unflatten``: ``dim`` split into ``sizes`` (one -1 at most), a ``reshape``
        (its placement rules).

        Example:
            >>> import dtorch
            >>> dtorch.arange(6).unflatten(0, (2, -1)).tolist()
            [[0, 1, 2], [3, 4, 5]]
        """
        return _sh.unflatten(self, dim, sizes)


# ``view([Shard(0), ...])``: a list of placements, not sizes.
def _placements(shape: tuple[Any, ...]) -> bool:
    first = shape[0] if len(shape) == 1 else None
    return (
        isinstance(first, (list, tuple))
        and bool(first)
        and any(isinstance(p, Placement) for p in first)
    )
