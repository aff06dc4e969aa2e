"""The cluster the tests of this folder share: 4 workers on 2 simulated hosts, 127.0.0.2 and
127.0.0.3 (tests that kill workers start their own).

The ``test_api_*`` modules are the Tensor API suite's own tests, imported (``from
tests.api.test_X import *`` plus their autouse fixtures): their ``graph`` fixture is a graph on
the cluster here, so the same tests that compare with torch in thread and process mode run
with a 4-device mesh spanning both hosts (devices 0-1 on one, 2-3 on the other; meshes of 8
devices put two ranks on every worker). A default run runs a stable sample of the imported
tests' parametrized cases here (``tests/sampling.py``): tests/api runs every case in thread
mode, and what the cluster adds, the cross-host transports, each kept case exercises alike.
Tests without parameters, and this folder's own tests, always run.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import dtorch
from tests.cluster.cluster_setup import Cluster


@pytest.fixture(scope="package")
def cluster() -> Iterator[Cluster]:
    """Stopped when this folder's tests end: a ready MainNode serves every process-mode graph
    that names no pool, and the other folders' tests must not run there."""
    made = Cluster()
    try:
        made.wait_ready()
        yield made
    finally:
        codes = made.close()
        assert codes == [0] * len(codes), f"workers exited with {codes}"


@pytest.fixture
def graph(cluster: Cluster) -> Iterator[dtorch.Graph]:
    """A graph on the cluster, the test thread's default graph meanwhile: the API tests this
    folder imports run on it unchanged."""
    made = cluster.graph()
    try:
        with made.as_default() as g:
            yield g
    finally:
        made.close()
