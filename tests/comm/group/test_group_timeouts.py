"""A caller that never comes makes the others raise CommTimeoutError naming its ranks, in time."""

from __future__ import annotations

import threading
import time

import pytest
import torch

from dtorch.comm.group import CommTopology, ThreadGroupManager
from dtorch.comm.namespace import CommNamespace
from dtorch.errors import CommError, CommTimeoutError
from dtorch.options import GlobalOption
from tests.thread_runner import on_threads

pytestmark = pytest.mark.timeout(30)

TIMEOUT_S = 0.5
LAYOUT = [[0], [1, 2]]


def _run(present_fn, absent_fn):
    """Callers [[0], [1, 2]]: caller 0 runs ``present_fn``, caller 1 ``absent_fn``."""
    topology = CommTopology.threads(LAYOUT)
    with (
        GlobalOption.override(comm_timeout_second=TIMEOUT_S),
        ThreadGroupManager(topology, namespace=CommNamespace.create()) as manager,
    ):

        def caller(held):
            if held == [0]:
                start = time.monotonic()
                try:
                    return present_fn(manager, held), time.monotonic() - start
                except CommError as error:
                    return error, time.monotonic() - start
            return absent_fn(manager, held)

        return on_threads(LAYOUT, caller)


def _linger(release: threading.Event):
    def absent(manager, held):
        manager.get_group("cpu", [0, 1, 2], held)
        release.wait(10)  # joined the group, never calls the collective

    return absent


@pytest.mark.parametrize(
    "collective",
    [
        lambda g: g.all_reduce({0: torch.ones(2)}),
        lambda g: g.all_gather({0: torch.ones(2)}),
        lambda g: g.all_to_all({0: torch.ones(1, 3)}, 0, 1),
        lambda g: g.broadcast({0: torch.ones(2)}, src=2),
    ],
    ids=["all_reduce", "all_gather", "all_to_all", "broadcast"],
)
def test_a_collective_names_the_ranks_that_never_came(collective) -> None:
    release = threading.Event()

    def present(manager, held):
        try:
            return collective(manager.get_group("cpu", [0, 1, 2], held))
        finally:
            release.set()

    (error, elapsed), _ = _run(present, _linger(release))
    assert isinstance(error, CommTimeoutError), error
    assert "ranks [1, 2] (one caller) never came" in str(error)
    assert "cpu[0, 1, 2]" in str(error)
    assert elapsed < TIMEOUT_S + 2.0


def test_a_barrier_times_out_and_the_group_is_unusable_afterwards() -> None:
    release = threading.Event()

    def present(manager, held):
        group = manager.get_group("cpu", [0, 1, 2], held)
        try:
            group.barrier()
        except CommTimeoutError as error:
            first = error
        finally:
            release.set()
        with pytest.raises(CommError, match="unusable after an earlier failure"):
            group.all_reduce({0: torch.ones(1)})
        raise first

    (error, elapsed), _ = _run(present, _linger(release))
    assert isinstance(error, CommTimeoutError) and "barrier on group" in str(error)
    assert elapsed < TIMEOUT_S + 2.0


def test_a_caller_that_never_creates_the_group_times_out_its_creation() -> None:
    def present(manager, held):
        return manager.get_group("cpu", [0, 1, 2], held)

    (error, elapsed), _ = _run(present, lambda manager, held: None)
    assert isinstance(error, CommTimeoutError), error
    assert elapsed < TIMEOUT_S + 2.0
