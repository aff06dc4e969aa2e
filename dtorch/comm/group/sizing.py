"""How the same-device backend sizes a collective: when an all-reduce splits into
reduce-scatter + all-gather, and when threads meet in one ``combine`` instead of the
publish/read/release handshake. Every caller of a group decides alike from what it knows
alike (the group's callers, the collective's whole tensor).

Example:
    >>> import torch
    >>> whole_bytes(torch.zeros(64, 1024)) * 2 <= COMBINE_MAX_BYTES
    True
"""

from __future__ import annotations

import math

import torch

#: all-reduce may become reduce-scatter + all-gather from this many elements on (one more
#: handshake, worth it only for large tensors).
SPLIT_MIN_NUMEL = 1 << 18

#: Threads meet in one ``combine`` (the last to arrive computes every rank's output alone)
#: while the collective's whole tensor times its ranks is at most this many bytes: 256 KiB on
#: 2 ranks, 128 KiB on 4. Above it, each caller computing its own outputs in parallel paid for
#: the handshake's extra waits (benchmarks/collectives.py, 4 threads from [64, 1024] floats).
#: Every caller decides the same.
COMBINE_MAX_BYTES = 1 << 19


def split_all_reduce_pays(callers: tuple[tuple[int, ...], ...]) -> bool:
    """Whether reduce-scatter + all-gather moves fewer bytes than a direct all-reduce on the
    busiest caller (``k`` ranks of ``w``; costs in tensor sizes read + written, copies for the
    caller's other ranks included): direct ``2w - 1 + 2(k - 1)``, split ``k + k(w - 1)/w`` to
    reduce the caller's chunks plus ``2k`` to gather. Every caller decides the same.

    Example:
        >>> split_all_reduce_pays(((0,), (1,))), split_all_reduce_pays(((0, 2), (1, 3)))
        (False, True)
    """
    if len(callers) < 2:
        return False
    world, k = sum(len(c) for c in callers), max(len(c) for c in callers)
    direct = 2 * world - 1 + 2 * (k - 1)
    return k + k * (world - 1) / world + 2 * k < direct


def whole_bytes(tensor: torch.Tensor, dim: int | None = None, sizes: tuple[int, ...] = ()) -> int:
    """Bytes of a collective's whole tensor: ``tensor``'s, or, when ranks differ in length
    along ``dim``, with ``dim`` as long as all ``sizes`` together (alike on every caller).

    Example:
        >>> whole_bytes(torch.zeros(2, 3)), whole_bytes(torch.zeros(2, 3), 0, (2, 1))
        (24, 36)
    """
    if dim is None:
        return tensor.numel() * tensor.element_size()
    rest = math.prod(n for i, n in enumerate(tensor.shape) if i != dim)
    return rest * sum(sizes) * tensor.element_size()
