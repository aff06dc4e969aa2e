"""``dtorch.nn.common_types``: torch.nn.common_types' aliases, with dtorch's ``Tensor``.

Layer signatures use them as torch's do: an ``int`` or a tuple of ints (``_size_2_t`` is
``int | tuple[int, int]``), ratios of floats, tensors or tuples of tensors.

Example:
    >>> from dtorch.nn.common_types import _size_2_t
    >>> def kernel(size: _size_2_t) -> tuple[int, int]:
    ...     return (size, size) if isinstance(size, int) else size
    >>> kernel(3), kernel((1, 2))
    ((3, 3), (1, 2))
"""

from __future__ import annotations

from typing import TypeVar, Union

from dtorch.api.tensor import Tensor

T = TypeVar("T")
# Union, not ``|``: these aliases are subscripted at run time (``_scalar_or_tuple_2_t[int]``)
_scalar_or_tuple_any_t = Union[T, tuple[T, ...]]  # noqa: UP007
_scalar_or_tuple_1_t = Union[T, tuple[T]]  # noqa: UP007
_scalar_or_tuple_2_t = Union[T, tuple[T, T]]  # noqa: UP007
_scalar_or_tuple_3_t = Union[T, tuple[T, T, T]]  # noqa: UP007
_scalar_or_tuple_4_t = Union[T, tuple[T, T, T, T]]  # noqa: UP007
_scalar_or_tuple_5_t = Union[T, tuple[T, T, T, T, T]]  # noqa: UP007
_scalar_or_tuple_6_t = Union[T, tuple[T, T, T, T, T, T]]  # noqa: UP007

_size_any_t = _scalar_or_tuple_any_t[int]
_size_1_t = _scalar_or_tuple_1_t[int]
_size_2_t = _scalar_or_tuple_2_t[int]
_size_3_t = _scalar_or_tuple_3_t[int]
_size_4_t = _scalar_or_tuple_4_t[int]
_size_5_t = _scalar_or_tuple_5_t[int]
_size_6_t = _scalar_or_tuple_6_t[int]

_size_any_opt_t = _scalar_or_tuple_any_t[Union[int, None]]  # noqa: UP007
_size_2_opt_t = _scalar_or_tuple_2_t[Union[int, None]]  # noqa: UP007
_size_3_opt_t = _scalar_or_tuple_3_t[Union[int, None]]  # noqa: UP007

_ratio_2_t = _scalar_or_tuple_2_t[float]
_ratio_3_t = _scalar_or_tuple_3_t[float]
_ratio_any_t = _scalar_or_tuple_any_t[float]

_tensor_list_t = _scalar_or_tuple_any_t[Tensor]

_maybe_indices_t = _scalar_or_tuple_2_t[Tensor]

__all__ = [
    "_maybe_indices_t",
    "_ratio_2_t",
    "_ratio_3_t",
    "_ratio_any_t",
    "_scalar_or_tuple_1_t",
    "_scalar_or_tuple_2_t",
    "_scalar_or_tuple_3_t",
    "_scalar_or_tuple_4_t",
    "_scalar_or_tuple_5_t",
    "_scalar_or_tuple_6_t",
    "_scalar_or_tuple_any_t",
    "_size_1_t",
    "_size_2_opt_t",
    "_size_2_t",
    "_size_3_opt_t",
    "_size_3_t",
    "_size_4_t",
    "_size_5_t",
    "_size_6_t",
    "_size_any_opt_t",
    "_size_any_t",
    "_tensor_list_t",
]
