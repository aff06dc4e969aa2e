"""``dtorch.graph``: the module path of ``Graph``, ``GraphOption`` and ``VoidFutureCollect``."""

from dtorch.api.future import VoidFutureCollect
from dtorch.api.graph import Graph, GraphOption

__all__ = ["Graph", "GraphOption", "VoidFutureCollect"]
