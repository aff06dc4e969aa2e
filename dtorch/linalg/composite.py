"""The decorator of ``dtorch.linalg``'s compositions: a refusal raised by one of the
operators a composition records names the function the user called and the placements of
the tensors the call was given (the refusing operator's operands may be intermediates).

Example:
    >>> import dtorch
    >>> @composite("linalg.twice")
    ... def twice(x):
    ...     return x.roll(1, 0) * 2
    >>> twice(dtorch.tensor([1, 2])).tolist()
    [4, 2]
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from dtorch.api.record import is_handle, named_as
from dtorch.errors import PlacementError
from dtorch.ir.placement import format_placements

_F = TypeVar("_F", bound=Callable[..., Any])
_CALLS = "the call's tensors:"


def composite(name: str) -> Callable[[_F], _F]:
    """``fn``'s refusals named ``name``, its placement refusals ending with the placements of
    the dtorch tensors among its arguments (in lists too, as ``multi_dot``'s)."""

    def wrap(fn: _F) -> _F:
        @functools.wraps(fn)
        def run(*args: Any, **kwargs: Any) -> Any:
            try:
                with named_as(name):
                    return fn(*args, **kwargs)
            except PlacementError as error:
                if _CALLS in str(error):  # an inner composition named them
                    raise
                raise PlacementError(f"{error} ({_CALLS} {_given(args, kwargs)})") from None

        return run  # type: ignore[return-value]

    return wrap


def _given(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    # the placements of every dtorch tensor among the arguments, lists flattened
    flat: list[Any] = []
    for value in (*args, *kwargs.values()):
        flat.extend(value if isinstance(value, (list, tuple)) else [value])
    return ", ".join(format_placements(t.placements) for t in flat if is_handle(t))
