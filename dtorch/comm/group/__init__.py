"""ThreadGroup collectives, their backends, and ThreadGroupManager (spec 002 section 2).

``ThreadGroupManager(topology, namespace=...)`` hands each caller its ``ThreadGroup`` for a
set of devices; the group's collectives take ``{rank: tensor}`` for the ranks the caller
holds. Backends are chosen by topology (``CommTopology``, ``choose_backend``): torch.distributed
(Gloo / NCCL) for one rank per process, the same-device backend over a TensorStore otherwise
(memory, file, or across hosts the network store); callers on several hosts meet through a
shared c10d store (``rendezvous_store``, ``GroupRendezvous``).

Example:
    >>> import torch
    >>> from dtorch.comm.group import CommTopology, ThreadGroupManager
    >>> with ThreadGroupManager(CommTopology.threads([[0, 1]])) as manager:
    ...     group = manager.get_group("cpu", [0, 1], [0, 1])
    ...     group.all_reduce({0: torch.ones(2), 1: torch.ones(2)}, op="avg")[1]
    tensor([1., 1.])
"""

from dtorch.comm.group.backend import GroupBackend, GroupInfo
from dtorch.comm.group.group import ThreadGroup
from dtorch.comm.group.manager import GroupKey, ThreadGroupManager, group_name
from dtorch.comm.group.reduce_op import REDUCE_OP_NAMES, ReduceOp, parse_reduce_op
from dtorch.comm.group.rendezvous import GroupRendezvous
from dtorch.comm.group.same_device import SameDeviceBackend
from dtorch.comm.group.topology import BackendKind, CommTopology, choose_backend
from dtorch.comm.group.torch_dist import TorchDistBackend

__all__ = [
    "REDUCE_OP_NAMES",
    "BackendKind",
    "CommTopology",
    "GroupBackend",
    "GroupInfo",
    "GroupKey",
    "GroupRendezvous",
    "ReduceOp",
    "SameDeviceBackend",
    "ThreadGroup",
    "ThreadGroupManager",
    "TorchDistBackend",
    "choose_backend",
    "group_name",
    "parse_reduce_op",
]
