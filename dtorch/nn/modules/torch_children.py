"""torch modules as children of dtorch modules: one without parameters or buffers (an
activation, a dropout, transformers' ``ACT2FN`` entries) is a child as a dtorch one is, and
runs on dtorch tensors through torch's own functions; one holding state is refused, when it is
assigned and, should it gain some later, when a walk reaches it.

Example:
    >>> import torch
    >>> holds_state(torch.nn.GELU()), holds_state(torch.nn.Linear(2, 2))
    (False, True)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Union

import torch

if TYPE_CHECKING:
    from dtorch.nn.modules.module import Module

#: A child module: a dtorch one, or a torch one without parameters or buffers.
Child = Union["Module", torch.nn.Module]


def holds_state(module: torch.nn.Module) -> bool:
    """Whether a torch module has parameters or buffers (its own or its children's)."""
    return next(module.parameters(), None) is not None or next(module.buffers(), None) is not None


def stateless(name: str, child: Child) -> Child:
    """``child``, refused if it is a torch module that has gained parameters or buffers since
    it was assigned (``m.act.register_buffer(...)``): the walks (parameters, state dicts,
    conversions) would hand out or skip torch tensors a dtorch module cannot hold.

    Example:
        >>> import torch
        >>> stateless("act", torch.nn.GELU())
        GELU(approximate='none')
    """
    if isinstance(child, torch.nn.Module) and holds_state(child):
        raise TypeError(
            f"child module '{name}' is a torch.nn.Module '{type(child).__name__}' that now "
            "holds parameters or buffers, which a dtorch module holds as dtorch tensors; build "
            "it from dtorch.nn layers (a torch child must stay without any)"
        )
    return child
