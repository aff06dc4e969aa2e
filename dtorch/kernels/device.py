"""Which torch device holds a logical device's shards.

CPU devices are logical: every CPU device's shards live in this process's memory. A CUDA
device ``d`` is ``cuda:d``, except in the same-device mode of the spec
(DTORCH_DTENSOR_IN_SAME_DEVICE), where N logical devices share the one physical GPU 0.

Example:
    >>> torch_device_of("cpu", 7)
    device(type='cpu')
"""

from __future__ import annotations

import torch

from dtorch.options import GlobalOption


def torch_device_of(kind: str, device_id: int) -> torch.device:
    """The torch device that holds logical device ``device_id``'s shards."""
    if kind == "cpu":
        return _CPU
    if GlobalOption.get_dtensor_in_same_device():
        return torch.device(kind, 0)
    return torch.device(kind, device_id)


_CPU = torch.device("cpu")
