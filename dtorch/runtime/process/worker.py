"""The worker process: ``python -m dtorch.runtime.process.worker ARGS_JSON``.

One worker hosts one party of its pool's devices (device ``d`` when ``d % workers`` is its
index) on one kernel stream. Its main thread reads the controller's broadcast in order
(``Subscriber``: a gap in the message ids is fatal), decodes each batch once and hands it to
its ``DeviceHost``, which routes the operators of its own devices to its stream; its stream
sends reports back through a ``PushSink``. The stream runs in the main thread (inline): a
worker has nothing else to do meanwhile, and handing each batch to another thread would cost a
wake-up per batch. Collectives with the other workers go through
the comm library's backends (Gloo for one rank per process, the file store's shared memory
for several, direct compute inside one worker).

A fatal error (a lost message, a batch it cannot read) is reported as a
``WorkerFailureReport`` before the worker exits. A worker ignores SIGINT (its pool starts it
in a session of its own, away from the terminal): interrupting is the controller's business.

Cleanup has no gap: at every moment some live process is responsible for the pool's directory
and the shared memory of its program's namespace. While the controller lives, it is; a worker
watches the controller's pidfd (``ControllerWatch``: readable the moment it exits, no polling)
and, once it is gone, removes both and exits at once, whatever it was doing. On ``STOP`` a
worker closes everything, says so with a ``stopped-<index>`` file in the pool's directory
(``stop_marker``), and stays until the controller has removed that directory - its answer,
once every worker is done - or is gone (then the worker removes it). So a controller killed in
the middle of closing its pool still leaves nothing behind.

``Worker`` also runs inside a test process, on transport twins, without any of the process
set-up (``run`` returns the exit status instead of exiting). A worker on another host
(``dtorch.worker``) is the same ``Worker`` built from other ``WorkerParts``: a board in the
cluster's store, groups across hosts, values inside the messages.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import shutil
import signal
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

import dtorch.kernels.convert
import dtorch.kernels.create  # registers the Create kernel
import dtorch.runtime.process.unsent  # noqa: F401 - registers the Unsent kernel
from dtorch.comm.group import BackendKind, CommTopology, ThreadGroupManager
from dtorch.comm.namespace import CommNamespace
from dtorch.comm.shm import Locator, map_peer, poll_ms, release_buffer
from dtorch.errors import DTorchError, WorkerError
from dtorch.ir.mesh import DeviceMesh
from dtorch.ir.operator import ExecuteBatch, Operand
from dtorch.ir.params import CreateParam
from dtorch.ir.report import InputsDone, WorkerFailureReport
from dtorch.options import GlobalOption, Options
from dtorch.runtime.board import FailureBoard
from dtorch.runtime.handlers import StreamServices
from dtorch.runtime.heap import allow_all_descriptors, keep_freed_memory
from dtorch.runtime.host import DeviceHost, PartyLayout
from dtorch.runtime.process.addressing import concerns, unpack_ids
from dtorch.runtime.process.board import SharedFailureBoard
from dtorch.runtime.process.inputs import InputMaps
from dtorch.runtime.process.protocol import (
    EXECUTE,
    HAND_OVER_POLL_SECONDS,
    OPEN,
    READY,
    RELEASE,
    RESET,
    RESET_DONE,
    STOP,
    WorkerArgs,
    pack_u64,
    stop_marker,
    unpack_release,
    unpack_u64,
)
from dtorch.runtime.process.values import PushSink
from dtorch.serialization import decode_batch, deserialize
from dtorch.transport import Message, Pusher, PusherLike, Subscriber, SubscriberLike

_LOG = logging.getLogger(__name__)

#: How often the main loop looks up from an idle subscriber.
POLL_SECONDS = 1.0
#: Exit statuses: stopped, controller gone, fatal error.
EXIT_OK, EXIT_ORPHANED, EXIT_FATAL = 0, 2, 3


@dataclass(frozen=True, slots=True)
class WorkerParts:
    """What a worker's streams are built from: which party it is, how it reports, the board
    and the collective groups it shares with the other workers, and what it closes last."""

    layout: PartyLayout
    sink: PushSink
    board: FailureBoard
    groups: ThreadGroupManager
    close_last: Callable[[], None] = lambda: None


class Worker:
    """One worker's state and message loop (see the module docstring)."""

    def __init__(
        self,
        parts: WorkerParts,
        subscriber: SubscriberLike,
        pusher: PusherLike,
        name: str,
    ) -> None:
        self.index = parts.layout.first
        self.parts = parts
        self.layout = parts.layout
        self.subscriber = subscriber
        self.sink = parts.sink
        self.groups = parts.groups
        services = StreamServices(parts.groups, parts.board, parts.sink, validate=False)
        self.host = DeviceHost(parts.layout, services, name, inline=True)
        self._pusher = pusher
        self.meshes = MeshTable()
        self.inputs = InputMaps()
        self.session = 0

    @classmethod
    def of_pool(cls, args: WorkerArgs, subscriber: SubscriberLike, pusher: PusherLike) -> Worker:
        """A worker of a pool on this machine: the pool's shared board, its shared memory."""
        board_buffer = map_peer(
            Locator(args.controller_pid, args.board_fd, args.board_inode, args.board_size)
        )
        board = SharedFailureBoard(board_buffer, args.workers)
        groups = ThreadGroupManager(
            CommTopology.striped(args.workers, processes=True),
            namespace=CommNamespace(args.namespace),
            backend=_forced_backend(args),
            rendezvous_dir=args.directory,
        )

        def close_last() -> None:
            board.close()
            release_buffer(board_buffer)

        layout = PartyLayout(args.workers, args.index, 1)
        parts = WorkerParts(layout, PushSink(pusher, args.index), board, groups, close_last)
        return cls(parts, subscriber, pusher, f"dtorch-w{args.index}")

    def run(self) -> int:
        """Report ready, then handle messages until STOP; the exit status."""
        self._pusher.send(READY, [pack_u64(os.getpid())])
        try:
            while True:
                message = self.subscriber.poll(POLL_SECONDS)
                if message is None:
                    continue
                handler = _HANDLERS.get(message.kind)
                if handler is None:
                    raise WorkerError(f"unknown message kind {bytes(message.kind)!r}")
                if not handler(self, message):
                    return EXIT_OK
        except (DTorchError, ValueError, KeyError) as error:  # fatal: say why, then go
            self._report_fatal(error)
            return EXIT_FATAL
        finally:
            self.close()

    def _report_fatal(self, error: BaseException) -> None:
        index, devices = self.index, self.layout.describe(self.index)
        reason = f"worker {index} ({devices}) stopped: {type(error).__name__}: {error}"
        report = WorkerFailureReport(index, devices, reason)
        try:
            self.sink.put(report)
        except DTorchError:
            _LOG.exception("worker %d could not report its failure", self.index)

    def close(self) -> None:
        timeout = GlobalOption.get_zmq_timeout_second()
        try:
            self.host.close(timeout)
        finally:
            self.groups.close()
            self.sink.close()
            self.inputs.close()
            self.parts.close_last()

    # --- message handlers (True: go on) -----------------------------------------------------
    def open(self, message: Message) -> bool:
        session, options = message.parts
        self.session = unpack_u64(session)
        fields = deserialize(options)
        if not isinstance(fields, dict):
            raise WorkerError("the options of a session are not a dict")
        GlobalOption.install(Options(**fields))
        self.host.services.validate = GlobalOption.get_validate_kernel_input_output()
        return True

    def execute(self, message: Message) -> bool:
        progress, parties, frees, payload = message.parts
        no_hold = unpack_ids(frees)
        if not concerns(parties, self.index):  # nothing to run: free, report progress
            self.host.skip(no_hold, unpack_u64(progress))
            return True
        batch = decode_batch(payload)
        self.meshes.adopt(batch.operands)
        batch, tokens = self.inputs.resolve(batch, self._runs_here)
        batch = ExecuteBatch(batch.operators, batch.operands, no_hold)
        self.host.execute(batch, unpack_u64(progress), carried=True)  # inline: the kernels ran
        if tokens:
            self.sink.put(InputsDone(self.index, tokens))
        return True

    def _runs_here(self, param: CreateParam) -> bool:
        """Whether a device of this worker's parties is on ``param``'s mesh."""
        layout = self.layout
        first, end = layout.first, layout.first + layout.count
        return any(first <= layout.party_of(d) < end for d in param.mesh.device_ids)

    def release(self, message: Message) -> bool:
        worker, token = unpack_release(message.parts[0])
        if worker == self.index:
            self.sink.release(token)
        return True

    def reset(self, message: Message) -> bool:
        session = unpack_u64(message.parts[0])
        self.host.reset(GlobalOption.get_comm_timeout_second())
        self.inputs.close()  # the lease's controller closed its segments: unmap them
        self._pusher.send(RESET_DONE, [pack_u64(session)])
        return True

    def stop(self, message: Message) -> bool:
        return False


class MeshTable:
    """One object per distinct mesh across batches. Each decoded batch brings new mesh
    objects, equal to earlier ones; an operator whose inputs came in earlier batches would then
    see its operands on "different" meshes and miss the host's route cache (keyed by the mesh
    object, since hashing a mesh costs a Python call per operator). Operands of a batch are
    the worker's own fresh objects: their mesh is swapped for the first equal one seen."""

    def __init__(self, limit: int = 1024) -> None:
        self._meshes: dict[DeviceMesh, DeviceMesh] = {}
        self._limit = limit

    def adopt(self, operands: tuple[Operand, ...]) -> None:
        seen: dict[int, DeviceMesh] = {}  # the batch's mesh objects (few: the codec shares)
        for operand in operands:
            mesh = operand.mesh
            canonical = seen.get(id(mesh))
            if canonical is None:
                canonical = seen[id(mesh)] = self._canonical(mesh)
            if canonical is not mesh:
                operand.mesh = canonical  # type: ignore[misc]  # a fresh decoded record

    def _canonical(self, mesh: DeviceMesh) -> DeviceMesh:
        if len(self._meshes) >= self._limit:  # meshes made in a loop
            self._meshes.clear()
        return self._meshes.setdefault(mesh, mesh)


_HANDLERS: dict[bytes, Callable[[Worker, Message], bool]] = {
    OPEN: Worker.open,
    EXECUTE: Worker.execute,
    RELEASE: Worker.release,
    RESET: Worker.reset,
    STOP: Worker.stop,
}


def _forced_backend(args: WorkerArgs) -> BackendKind | None:
    """A CPU pool's workers share one machine: their CPU collectives take the pool's backend
    (by default the file store's shared memory, measured faster than Gloo's loopback TCP);
    a CUDA pool's groups are chosen by topology (NCCL between GPUs)."""
    if args.device_type != "cpu":
        return None
    try:
        return BackendKind(args.cpu_backend)
    except ValueError:
        raise WorkerError(f"unknown collective backend {args.cpu_backend!r}") from None


class ControllerWatch:
    """A worker's watch on its controller, and the cleanup that falls to it once it is gone."""

    def __init__(self, args: WorkerArgs) -> None:
        self._args = args
        try:
            fd = os.pidfd_open(args.controller_pid)
        except ProcessLookupError:
            fd = -1
        if fd >= 0 and os.getppid() != args.controller_pid:  # reparented: it died already
            os.close(fd)
            fd = -1
        self._fd = fd

    def gone(self, timeout_s: float | None) -> bool:
        """Whether the controller has exited, waiting up to ``timeout_s`` (None: for ever)."""
        if self._fd < 0:
            return True
        poller = select.poll()  # not select: the descriptor may be past its limit of 1024
        poller.register(self._fd, select.POLLIN)
        return bool(poller.poll(poll_ms(timeout_s)))

    def clean_up(self) -> None:
        """Remove what only the controller would have removed (idempotent)."""
        shutil.rmtree(self._args.directory, ignore_errors=True)
        CommNamespace(self._args.namespace).reclaim()

    def exit_when_gone(self) -> None:
        """The watch thread: clean up and exit the moment the controller is gone."""
        self.gone(None)
        self.clean_up()
        os._exit(EXIT_ORPHANED)

    def hand_over(self, status: int) -> None:
        """A worker that has closed everything: after STOP, say so and stay until the
        controller removed the pool's directory; if the controller is gone, clean up."""
        if status == EXIT_OK:
            with contextlib.suppress(FileNotFoundError):  # the directory is gone already
                Path(stop_marker(self._args.directory, self._args.index)).touch()
            while os.path.isdir(self._args.directory):
                if self.gone(HAND_OVER_POLL_SECONDS):
                    break
        if self.gone(0):
            self.clean_up()


def main(argv: list[str]) -> int:
    """The worker process's entry point."""
    if len(argv) != 2:
        print("usage: python -m dtorch.runtime.process.worker ARGS_JSON", file=sys.stderr)
        return EXIT_FATAL
    # Ctrl-C is the controller's to handle: a worker in a session of its own (the pool starts
    # it so) never gets the terminal's SIGINT, and one sent to it alone changes nothing either
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    args = WorkerArgs.from_json(argv[1])
    watch = ControllerWatch(args)
    threading.Thread(target=watch.exit_when_gone, name="watch", daemon=True).start()
    torch.set_num_threads(args.threads)
    keep_freed_memory()  # kernels reuse freed tensors' pages (dtorch.runtime.heap)
    allow_all_descriptors()  # a few per collective group: see dtorch.runtime.heap
    if args.device_type == "cuda":
        torch.cuda.set_device(args.index)
    status = EXIT_FATAL
    subscriber = Subscriber(args.publisher, party=args.index)
    pusher = Pusher(args.puller, args.index)
    try:
        status = Worker.of_pool(args, subscriber, pusher).run()
    finally:
        subscriber.close()
        pusher.close()
        watch.hand_over(status)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv))
