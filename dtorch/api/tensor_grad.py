"""torch's autograd attributes of a ``dtorch.Tensor``, as the mixin ``TensorGrad``: dtorch
records no gradients, so a tensor is a leaf that requires none (``requires_grad`` False,
``grad`` and ``grad_fn`` None, ``is_leaf`` True), the answers torch gives for a tensor made
under ``torch.no_grad()``; code that reads them, or turns gradients off, runs unchanged.
Turning them on is refused: nothing would compute them. ``dtorch.nn.Parameter`` keeps its
own ``requires_grad`` flag (torch's module conventions read it).

Example:
    >>> import dtorch
    >>> t = dtorch.ones(2)
    >>> t.requires_grad, t.grad, t.is_leaf, t.requires_grad_(False) is t
    (False, None, True, True)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dtorch.errors import ParamError

if TYPE_CHECKING:
    from dtorch.api.tensor import Tensor


class TensorGrad:
    """The autograd attributes: a leaf that requires no gradient."""

    __slots__ = ()

    @property
    def requires_grad(self) -> bool:
        return False

    @property
    def grad(self) -> Tensor | None:  # a Parameter's may be set (torch's optimisers' reads)
        return None

    @property
    def grad_fn(self) -> None:
        return None

    @property
    def is_leaf(self) -> bool:
        return True

    def requires_grad_(self: Any, requires_grad: bool = True) -> Tensor:
        """``requires_grad_(False)`` returns the tensor; ``True`` is refused (dtorch computes
        no gradients).

        Example:
            >>> import dtorch
            >>> dtorch.ones(2).requires_grad_(True)
            Traceback (most recent call last):
            ...
            dtorch.errors.ParamError: requires_grad_(True): dtorch computes no gradients ...
        """
        if requires_grad:
            raise ParamError(
                "requires_grad_(True): dtorch computes no gradients (no autograd); accepted: "
                "requires_grad_(False). A dtorch.nn.Parameter keeps the flag for torch's "
                "module conventions"
            )
        return self

    def detach_(self: Any) -> Tensor:
        """The tensor itself: it has no autograd history to cut (``detach()`` makes a new
        handle of the same value).

        Example:
            >>> import dtorch
            >>> t = dtorch.ones(2)
            >>> t.detach_() is t
            True
        """
        return self
