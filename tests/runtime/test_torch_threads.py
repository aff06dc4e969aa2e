"""Thread mode divides the creating thread's torch intra-op threads among its kernel streams,
and leaves torch's own setting (that thread's, and what new threads start with) as it was."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import torch

import dtorch
from dtorch.api.record import emit
from dtorch.ir.opkind import OpKind
from dtorch.ir.params import NvtxParam
from dtorch.ir.rules import OutputMeta
from dtorch.kernels.table import LOCAL_KERNELS, register_local_kernel

pytestmark = pytest.mark.timeout(60)


@contextmanager
def _torch_threads(count: int) -> Iterator[None]:
    saved = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(saved)


def _threads_seen_by_kernels(graph: dtorch.Graph, devices: int) -> dict[int, int]:
    """Each device's ``torch.get_num_threads()`` inside a kernel on its stream."""
    seen: dict[int, int] = {}

    def probe(ctx: object, device: int, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        seen[device] = torch.get_num_threads()
        return [inputs[0]]

    register_local_kernel(OpKind.Nvtx, probe)  # a kind with no kernel of its own
    try:
        mesh = dtorch.init_device_mesh("cpu", devices)
        x = dtorch.ones(devices, device_mesh=mesh, placements=[dtorch.Shard(0)], graph=graph)
        meta = OutputMeta((devices,), torch.float32, (dtorch.Shard(0),))
        emit(x._result, graph, "probe", NvtxParam(), (x._operand,), (meta,), mesh)
        graph.sync()
    finally:
        del LOCAL_KERNELS[OpKind.Nvtx]
    return seen


def _in_new_thread() -> int:
    counts: list[int] = []
    thread = threading.Thread(target=lambda: counts.append(torch.get_num_threads()))
    thread.start()
    thread.join()
    return counts[0]


@pytest.mark.parametrize(("creator", "per_stream"), [(1, 1), (2, 1), (4, 2), (5, 2)])
def test_streams_share_the_creating_threads_torch_threads(creator: int, per_stream: int) -> None:
    with _torch_threads(creator):
        graph = dtorch.Graph(dtorch.GraphOption(per_device_per_process=False))
        try:
            assert torch.get_num_threads() == creator
            assert _in_new_thread() == creator  # torch's process default is left alone
            assert _threads_seen_by_kernels(graph, 4) == dict.fromkeys(range(4), per_stream)
        finally:
            graph.close()
