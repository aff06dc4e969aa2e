"""Shared-memory pieces (``dtorch.comm.shm``): a tensor over a mapping keeps the mapping,
whoever drops or evicts it meanwhile (a tensor over unmapped memory would crash the process)."""

from __future__ import annotations

import mmap

import pytest
import torch

from dtorch.comm.shm import PeerMaps, Segment, poll_ms, release_buffer, tensor_view

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


def test_poll_timeouts_round_up_to_whole_milliseconds() -> None:
    assert [poll_ms(s) for s in (0.0, 1e-6, 0.001, 0.0015, 2.0, -3.0)] == [0, 1, 1, 2, 2000, 0]
    assert poll_ms(None) is None
