"""A controller in a process of its own (``python -m tests.cluster.controller_job``): starts a
cluster of 2 workers on 2 simulated hosts, prints the workers' pids, then waits to be killed."""

from __future__ import annotations

import time

from tests.cluster.cluster_setup import Cluster

if __name__ == "__main__":
    cluster = Cluster(per_host=1, main_node=False)
    cluster.wait_ready()
    print(" ".join(str(p.pid) for p in cluster.processes), flush=True)
    time.sleep(600)
