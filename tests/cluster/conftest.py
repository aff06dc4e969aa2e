"""The cluster the tests of this folder share: 4 workers on 2 simulated hosts, 127.0.0.2 and
127.0.0.3 (tests that kill workers start their own).

The ``test_api_*`` modules are the Tensor API suite's own tests, imported (``from
tests.api.test_X import *`` plus their autouse fixtures): their ``graph`` fixture is a graph on
the cluster here, so the same tests that compare with torch in thread and process mode run
with a 4-device mesh spanning both hosts (devices 0-1 on one, 2-3 on the other; meshes of 8
devices put two ranks on every worker). Of each imported test's parametrized cases this folder
runs one in ``SAMPLE_EVERY``, chosen by a stable hash of the case's id (the same cases in every
run): tests/api runs every case in thread and process mode, and what the cluster adds, the
cross-host transports, each kept case exercises alike. Tests without parameters, and this
folder's own tests, always run. Set ``SAMPLE_EVERY = 1`` to run every case here.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest

import dtorch
from tests.cluster.cluster_setup import Cluster

#: One parametrized case of an imported API test in this many runs here (see the docstring):
#: the suite's 20-minute budget.
SAMPLE_EVERY = 2

_HERE = Path(__file__).parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect the imported API tests' cases outside the sample (the hook sees every item of
    the session: only this folder's ``test_api_*`` cases are sampled)."""
    dropped = [item for item in items if _sampled_out(item)]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        gone = set(map(id, dropped))
        items[:] = [item for item in items if id(item) not in gone]


def _sampled_out(item: pytest.Item) -> bool:
    """Whether ``item`` is a parametrized case of an imported API test outside the sample."""
    path = Path(str(item.path))
    imported = path.parent == _HERE and path.name.startswith("test_api_")
    if not imported or not hasattr(item, "callspec"):
        return False
    return zlib.crc32(item.nodeid.encode()) % SAMPLE_EVERY != 0


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
