"""Shared-memory pieces (``dtorch.comm.shm``): a tensor over a mapping keeps the mapping,
whoever drops or evicts it meanwhile (a tensor over unmapped memory would crash the process);
a segment that is not this user's private file is refused (``/dev/shm`` is everyone's)."""

from __future__ import annotations

import mmap
import os
import stat
from pathlib import Path

import pytest
import torch

from dtorch.comm.namespace import SHM_DIR, CommNamespace
from dtorch.comm.shm import (
    PeerMaps,
    Segment,
    SegmentPool,
    map_peer,
    poll_ms,
    release_buffer,
    tensor_view,
)
from dtorch.comm.store.file import FileTensorStore
from dtorch.comm.store.file_control import CONTROL_SIZE
from dtorch.errors import CommError

pytestmark = pytest.mark.timeout(60)


def test_a_view_keeps_its_mapping_when_the_buffer_is_released() -> None:
    buffer = mmap.mmap(-1, 1 << 16)
    view = tensor_view(buffer, 64, torch.float32, (4, 8))
    view.copy_(torch.arange(32.0).view(4, 8))
    release_buffer(buffer)  # the view still reads it: the unmap waits for the view
    assert not buffer.closed
    assert torch.equal(view, torch.arange(32.0).view(4, 8))
    del view
    release_buffer(buffer)
    assert buffer.closed


def test_peer_maps_evict_mappings_whose_views_are_still_read() -> None:
    """More segments than the maps keep, every view alive: each still reads its own bytes."""
    segments = [Segment.create(4096) for _ in range(5)]
    maps = PeerMaps(capacity=2)
    try:
        views = []
        for i, segment in enumerate(segments):
            tensor_view(segment.buffer, 0, torch.int64, (8,)).fill_(i)
            views.append(tensor_view(maps.get(segment.locator()), 0, torch.int64, (8,)))
        for i, view in enumerate(views):
            assert view.tolist() == [i] * 8
    finally:
        maps.close()
        for segment in segments:
            segment.close()


def _mapped_segments() -> int:
    # this process's mappings of memfd segments (closed ones included: a mapping keeps them)
    with open("/proc/self/maps") as maps:
        return sum("dtorch-tensor" in line for line in maps)


def test_peer_maps_keep_at_most_their_bytes_of_closed_segments() -> None:
    """A reader's mappings of segments their owner closed held the memory of all of them
    (32 mappings): the maps keep at most ``max_bytes``, the newest always."""
    before = _mapped_segments()
    maps = PeerMaps(max_bytes=3 << 16)
    try:
        for i in range(8):
            segment = Segment.create(1 << 16)
            maps.get(segment.locator())
            segment.close()  # the owner's pool did not keep it
            assert _mapped_segments() - before == min(i + 1, 3)
        big = Segment.create(1 << 18)  # larger than the bound: kept alone, as the newest
        maps.get(big.locator())
        big.close()
        assert _mapped_segments() - before == 1
    finally:
        maps.close()
    assert _mapped_segments() == before


def test_poll_timeouts_round_up_to_whole_milliseconds() -> None:
    assert [poll_ms(s) for s in (0.0, 1e-6, 0.001, 0.0015, 2.0, -3.0)] == [0, 1, 1, 2, 2000, 0]
    assert poll_ms(None) is None


def _planted(namespace: CommNamespace, key: str, mode: int) -> Path:
    """The file a store named ``key`` would open, created beforehand by someone else."""
    path = SHM_DIR / namespace.shm_name("store", key)
    path.touch(mode=mode)
    path.chmod(mode)  # touch's mode goes through the umask
    os.truncate(path, CONTROL_SIZE)
    return path


def test_a_store_refuses_a_control_segment_other_users_may_write() -> None:
    namespace = CommNamespace.create()
    path = _planted(namespace, "planted", 0o666)
    try:
        with pytest.raises(CommError, match=r"mode 666: other users may read or write it"):
            FileTensorStore.open("planted", 2, 1, namespace)
    finally:
        path.unlink()


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
def test_a_store_refuses_a_control_segment_of_another_user() -> None:
    namespace = CommNamespace.create()
    path = _planted(namespace, "foreign", 0o600)
    os.chown(path, 65534, 65534)
    try:
        with pytest.raises(CommError, match=r"belongs to user id 65534, not to this process"):
            FileTensorStore.open("foreign", 2, 1, namespace)
    finally:
        path.unlink()


def test_segments_are_private_and_peers_check_it() -> None:
    segment = Segment.create(1 << 16)
    try:
        assert stat.S_IMODE(os.fstat(segment.fd).st_mode) == 0o600
        os.fchmod(segment.fd, 0o644)
        with pytest.raises(CommError, match=r"mode 644: other users may read"):
            map_peer(segment.locator())
    finally:
        segment.close()


def test_a_segment_pool_keeps_few_bytes_once_idle() -> None:
    pool = SegmentPool(max_free=4, max_bytes=3 << 20)
    made = [pool.acquire(1 << 20) for _ in range(3)] + [pool.acquire(2 << 20)]
    for segment in made:
        pool.release(segment)  # the 2 MiB one would pass 3 MiB in all: closed
    assert made[-1].buffer.closed and not any(s.buffer.closed for s in made[:3])
    again = pool.acquire(1 << 20)
    assert again in made[:3]
    pool.release(again)
    pool.close()
    assert all(s.buffer.closed for s in made[:3])


def test_the_process_namespace_is_not_predictable_from_the_pid() -> None:
    """Another user who knows a pid must not be able to create its segments first."""
    import re
    import subprocess
    import sys

    ours = CommNamespace.of_process().instance_id
    assert re.fullmatch(rf"p{os.getpid():x}_[0-9a-f]{{8}}", ours)
    assert CommNamespace.of_process().instance_id == ours  # one draw per process
    code = "from dtorch.comm.namespace import CommNamespace as C; print(C.of_process().instance_id)"
    others = {subprocess.check_output([sys.executable, "-c", code], text=True) for _ in range(2)}
    assert len(others) == 2 and ours not in others
