"""The groups' rendezvous in the cluster's store: values signed with the program's secret
(``dtorch.cluster.signed_values``), which torch.distributed's own rendezvous (Gloo, from C++)
goes through unchanged, and which refuses what anyone else wrote."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
import torch
import torch.distributed as dist

from dtorch.cluster.signed_values import SignedValues, group_key
from dtorch.errors import RendezvousError

pytestmark = pytest.mark.timeout(60)

KEY = group_key(b"s" * 32)


def test_gloo_meets_through_signed_values() -> None:
    shared = dist.HashStore()
    sums: dict[int, list[float]] = {}

    def rank(r: int) -> None:
        store = SignedValues(dist.PrefixStore("g", shared), KEY)
        group = dist.ProcessGroupGloo(store, r, 2, timedelta(seconds=20))
        tensor = torch.full((4,), float(r + 1))
        group.allreduce([tensor]).wait()
        sums[r] = tensor.tolist()

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sums == {0: [3.0] * 4, 1: [3.0] * 4}


def test_values_written_outside_the_program_are_refused() -> None:
    inner = dist.HashStore()
    store = SignedValues(inner, KEY)
    store.set("addr", "10.0.0.1:5")
    assert store.get("addr") == b"10.0.0.1:5" and store.check(["addr"])
    for forged in (b"10.6.6.6:5", b"", store_of_another_program(inner)):
        inner.set("addr", forged)
        with pytest.raises(RendezvousError, match="not signed with this program's secret"):
            store.get("addr")
    assert store.add("count", 2) == 2 and store.add("count", 1) == 3
    with pytest.raises(RendezvousError, match="compare_set"):
        store.compare_set("addr", b"", b"x")


def store_of_another_program(inner: dist.Store) -> bytes:
    """What a rank of another program (another secret) writes: signed, with its own key."""
    SignedValues(inner, group_key(b"t" * 32)).set("addr", b"10.0.0.1:5")
    return bytes(inner.get("addr"))
