"""A network store whose rank 0 cannot serve it: the other ranks fail at once with rank 0's
reason (they used to wait the whole comm timeout for its endpoint)."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
import torch.distributed as dist

from dtorch.cluster.signed_values import SignedValues, group_key
from dtorch.comm.group import rendezvous
from dtorch.comm.group.rendezvous import GroupRendezvous, open_network_store
from dtorch.comm.namespace import CommNamespace
from dtorch.errors import CommError, RendezvousError

pytestmark = pytest.mark.timeout(60)


def test_the_peers_of_a_failed_rank_0_fail_at_once_with_its_reason(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def cannot_serve(*_: object, **__: object) -> None:
        raise CommError("cannot bind 127.0.0.9:0")

    monkeypatch.setattr(rendezvous, "open_store", cannot_serve)
    shared = SignedValues(dist.HashStore(), group_key(bytes(32)))
    meeting = GroupRendezvous.in_store("g", shared, "127.0.0.2")
    namespace = CommNamespace("failed_rank0")
    timeout = timedelta(seconds=30)
    with pytest.raises(CommError, match="cannot bind"):
        open_network_store(meeting, "s", namespace, 2, 0, timeout)
    start = time.monotonic()
    with pytest.raises(CommError, match=r"rank 0 of network store 's' could not serve it: .*bind"):
        open_network_store(meeting, "s", namespace, 2, 1, timeout)
    assert time.monotonic() - start < 5.0


def test_a_forged_failure_is_refused_like_a_forged_endpoint() -> None:
    inner = dist.HashStore()
    meeting = GroupRendezvous.in_store("g", SignedValues(inner, group_key(bytes(32))))
    inner.set("g/" + rendezvous.ENDPOINT_KEY, rendezvous.FAILED_PREFIX + b"forged")
    with pytest.raises(RendezvousError, match="not signed"):
        open_network_store(meeting, "s", CommNamespace("forged"), 2, 1, timedelta(seconds=5))
