"""ThreadRunner: devices as KernelStream threads of this process (thread mode).

One ``DeviceHost`` runs every party (device ``d`` on stream ``d % num_streams``); the report
channel is an in-process queue; collectives between streams use the same-device backend over
a memory store, in a namespace of the runner's own (two graphs of one process never share a
group store). A ``FlowWindow`` keeps the streams from falling unboundedly behind. The creating
thread's torch intra-op threads are divided among the streams (``torch_threads.share``: two
busy streams with a thread per core each would oversubscribe the cores).

Example:
    >>> runner = ThreadRunner(num_streams=2)
    >>> runner.parties
    2
    >>> runner.close(timeout=5.0)
"""

from __future__ import annotations

from collections.abc import Collection

import torch

import dtorch.kernels.convert
import dtorch.kernels.create  # noqa: F401 - registers the Create kernel
from dtorch.comm.group import CommTopology, ThreadGroupManager
from dtorch.comm.namespace import CommNamespace
from dtorch.errors import GraphError
from dtorch.ir.mesh import DeviceMesh
from dtorch.ir.operator import ExecuteBatch
from dtorch.options import GlobalOption
from dtorch.runtime.board import LocalFailureBoard
from dtorch.runtime.handlers import StreamServices
from dtorch.runtime.host import DeviceHost, PartyLayout
from dtorch.runtime.reports import END, ReportQueue
from dtorch.runtime.stream import KernelStream
from dtorch.runtime.torch_threads import keeping_default, share
from dtorch.runtime.window import FlowWindow, WindowedSource


class ThreadRunner:
    """Runs every device's kernels on ``num_streams`` threads of this process."""

    def __init__(self, num_streams: int = 2, name: str = "dtorch") -> None:
        if num_streams < 1:
            raise GraphError(f"a thread runner needs at least one stream, got {num_streams}")
        self._channel = channel = ReportQueue()
        self._window = FlowWindow(
            num_streams,
            stall_s=GlobalOption.get_comm_timeout_second(),
            waiting_on=self.waiting_on,  # a stall names the parties it waits for
        )
        self._groups = ThreadGroupManager(
            CommTopology.striped(num_streams), namespace=CommNamespace.create()
        )
        services = StreamServices(self._groups, LocalFailureBoard(), channel, _validate())
        layout = PartyLayout(num_streams, 0, num_streams)
        with keeping_default():  # the streams' set_num_threads also set torch's default
            self._host = DeviceHost(layout, services, name, threads=share(num_streams))
        self.reports = WindowedSource(channel, self._window)
        self._closing = False  # a close began (and may have been interrupted)
        self._closed = False  # a close finished

    @property
    def elsewhere(self) -> bool:
        """False: the devices are threads of this process, under its GIL."""
        return False

    @property
    def parties(self) -> int:
        """How many parties report to a Sync or Memory operator."""
        return self._host.layout.parties

    @property
    def streams(self) -> list[KernelStream]:
        return self._host.streams

    def satisfy(self, mesh: DeviceMesh) -> bool:
        return satisfy(mesh)

    def waiting_on(self, parties: Collection[int]) -> str:
        """The kernel streams of ``parties`` in words, for the message of a wait that timed
        out (a kernel that does not return holds its stream)."""
        layout = self._host.layout
        named = [f"kernel stream {p} ({layout.describe(p)})" for p in sorted(set(parties))]
        return f"waiting for {'; '.join(named)}" if named else ""

    def execute(self, batch: ExecuteBatch) -> None:
        progress = self._window.admit(len(batch.operators))
        self._host.execute(batch, progress)

    def close(self, timeout: float, discard: bool = False) -> None:
        if self._closed:
            return
        first = not self._closing  # else an interrupted close goes on (see DeviceHost.close)
        self._closing = True
        if first:
            self._window.fail(GraphError("the graph was closed"))
        try:
            self._host.close(timeout, discard)
        except BaseException:  # interrupted (Ctrl-C) or hung: a stream left in a collective
            self._groups.abandon("the graph's close was interrupted")  # must not wait 300 s
            raise
        finally:
            try:
                self._groups.close()
            finally:
                if first:  # the report reader stops at the first END
                    self._channel.put(END)
        self._closed = True


def satisfy(mesh: DeviceMesh) -> bool:
    """CPU meshes are logical (always runnable); CUDA ids must exist (or be emulated)."""
    if mesh.device_kind == "cpu":
        return True
    if not torch.cuda.is_available():
        return False
    if GlobalOption.get_dtensor_in_same_device():
        limit = GlobalOption.get_num_gpu_when_enable_dtensor_in_same_device()
    else:
        limit = torch.cuda.device_count()
    return max(mesh.device_ids) < limit


def _validate() -> bool:
    return GlobalOption.get_validate_kernel_input_output()
