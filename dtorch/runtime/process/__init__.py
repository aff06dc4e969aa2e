"""Process mode: worker processes fed over ZeroMQ (spec 004), behind the Runner seam.

``WorkerPool`` starts and watches the worker processes; ``ProcessRunner`` is one graph's
lease on a pool; ``dtorch.runtime.process.worker`` is a worker's main.
"""

from dtorch.runtime.process.pool import WorkerPool
from dtorch.runtime.process.runner import ProcessRunner

__all__ = ["ProcessRunner", "WorkerPool"]
