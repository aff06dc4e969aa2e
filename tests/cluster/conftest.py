"""The cluster the tests of this folder share: 4 workers on 2 simulated hosts (tests that kill
workers start their own)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.cluster.cluster_setup import Cluster


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    made = Cluster()
    try:
        made.wait_ready()
        yield made
    finally:
        codes = made.close()
        assert codes == [0] * len(codes), f"workers exited with {codes}"
