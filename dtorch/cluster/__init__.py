"""dtorch.cluster: one controller, workers on several hosts (started by torchrun or by hand).

``MainNode`` is DTorch's cluster API on the controller; ``python -m dtorch.worker`` is the
worker side. See ``docs/multi_host.md`` for the whole picture and the security model.
"""

from dtorch.cluster.main_node import MainNode
from dtorch.cluster.pool import ClusterPool

__all__ = ["ClusterPool", "MainNode"]
