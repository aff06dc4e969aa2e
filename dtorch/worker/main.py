"""``python -m dtorch.worker`` (console script ``dtorch-worker``): a worker on any host.

Started by torchrun on each host::

    torchrun --nnodes 2 --nproc-per-node 2 --rdzv-backend c10d --rdzv-endpoint HOST:29400 \\
        -m dtorch.worker --main CONTROLLER:29500 --host THIS_HOST

(rank and world size come from torchrun's RANK and WORLD_SIZE, the GPU from LOCAL_RANK), or
by hand with ``--rank R --world-size W``. The token comes from ``DTORCH_CLUSTER_TOKEN`` or
``--token-file`` (a file of hex, readable by its owner only).

What it does: joins the controller's rendezvous store (``--main``), reads the signed program
record (refused if it names another store than ``--main``: copied from another controller's
store), derives the program secret, claims its rank (refused if another worker holds it),
registers itself (rank, host, pid, device kind), waits for the start record (every worker's
host; it exits at once if the controller wrote an abort record instead), connects to the
controller's sockets with CURVE, beats, and runs the same ``Worker`` loop as a worker of a
local pool, with parts for a cluster: collective groups (by default shared memory on a host and
network stores across hosts; Gloo if the controller asks for it), rendezvous in the store,
listeners bound to ``--host``, IPv4 only; the failure board in the store,
values inside the messages. It exits 0 after the controller's STOP, 2 once the controller is
gone (5 s without a heartbeat), 3 on a fatal error.

Example:
    >>> launch = Launch(cluster_token="00" * 32)  # as DTORCH_CLUSTER_TOKEN would give it
    >>> options = parse_arguments(["--main", "127.0.0.1:29500", "--rank", "1"], launch)
    Traceback (most recent call last):
    ...
    dtorch.errors.RendezvousError: a worker needs 0 <= rank < world size ...
    >>> parse_arguments(["--main", "h:1", "--rank", "1", "--world-size", "2"], launch).rank
    1
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import stat
import sys
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.distributed as dist

from dtorch.cluster.board import StoreFailureBoard
from dtorch.cluster.liveness import Beacon
from dtorch.cluster.records import (
    ProgramRecord,
    StartRecord,
    WorkerRecord,
    program_secret,
    record_key,
)
from dtorch.cluster.rendezvous import (
    GROUPS_PREFIX,
    MIN_TOKEN_BYTES,
    PROGRAM_KEY,
    SignedStore,
    check_ipv4_host,
    claim_key,
    connect_store,
    parse_address,
    store_address,
    wait_start,
    worker_key,
)
from dtorch.cluster.signed_values import SignedValues, group_key
from dtorch.comm.group import CommTopology, ThreadGroupManager
from dtorch.comm.namespace import CommNamespace
from dtorch.comm.promise.base import resolve_timeout
from dtorch.errors import DeserializationError, DTorchError, RendezvousError
from dtorch.options import Launch
from dtorch.runtime.daemon import DaemonThread
from dtorch.runtime.heap import allow_all_descriptors, keep_freed_memory
from dtorch.runtime.host import PartyLayout
from dtorch.runtime.process.values import PushSink
from dtorch.runtime.process.worker import EXIT_FATAL, EXIT_ORPHANED, Worker, WorkerParts
from dtorch.serialization.files import open_regular
from dtorch.transport import Pusher, Subscriber
from dtorch.transport.security import CurveKeys

_LOG = logging.getLogger("dtorch.worker")


@dataclass(frozen=True, slots=True)
class WorkerOptions:
    """A cluster worker's command line, resolved against torchrun's environment."""

    main: str
    host: str
    rank: int
    world_size: int
    device_type: str
    local_rank: int
    threads: int
    join_timeout: float
    token: bytes


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m dtorch.worker", description=__doc__)
    parser.add_argument("--main", required=True, help="the controller's HOST:PORT")
    parser.add_argument("--host", default="127.0.0.1", help="this host's address to bind")
    parser.add_argument("--rank", type=int, help="this worker's rank (default: RANK)")
    parser.add_argument("--world-size", type=int, help="workers in all (default: WORLD_SIZE)")
    parser.add_argument("--device-type", choices=("cpu", "cuda"), default=None)
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads")
    parser.add_argument("--join-timeout", type=float, default=300.0, help="seconds to join")
    parser.add_argument("--token-file", default=None, help="a file holding the token (hex)")
    return parser


def _read_token(path: str | None, launch: Launch) -> bytes:
    """The cluster token from ``path`` (owner-only file) or DTORCH_CLUSTER_TOKEN."""
    if path is not None:
        text = _token_file(path)
    elif launch.cluster_token is not None:
        text = launch.cluster_token
    else:
        raise RendezvousError("no cluster token: set DTORCH_CLUSTER_TOKEN or pass --token-file")
    try:
        token = bytes.fromhex(text.strip())
    except ValueError:
        raise RendezvousError("the cluster token is hex text") from None
    if len(token) < MIN_TOKEN_BYTES:
        raise RendezvousError(
            f"the cluster token is {len(token)} bytes; the controller's is at least "
            f"{MIN_TOKEN_BYTES} ({2 * MIN_TOKEN_BYTES} hex digits)"
        )
    return token


#: The most a token file may hold: a token is 64 hex digits; a larger file is not one.
TOKEN_FILE_LIMIT = 4096


def _token_file(path: str) -> str:
    """The text of an owner-only token file (RendezvousError saying what is wrong). Opened
    without blocking (a named pipe would wait for a writer for ever) and read up to
    ``TOKEN_FILE_LIMIT`` bytes."""
    try:
        with open_regular(path, "a token file") as file:
            if os.fstat(file.fileno()).st_mode & (stat.S_IRWXG | stat.S_IRWXO):
                raise RendezvousError(f"the token file {path} is readable by others: chmod 600 it")
            data = file.read(TOKEN_FILE_LIMIT + 1)
    except DeserializationError as error:
        raise RendezvousError(f"cannot read the token file: {error}") from None
    except OSError as error:
        raise RendezvousError(f"cannot read the token file {path}: {error.strerror}") from None
    if len(data) > TOKEN_FILE_LIMIT:
        raise RendezvousError(
            f"the token file {path} holds more than {TOKEN_FILE_LIMIT} bytes; it should hold "
            "the token's hex digits only"
        )
    try:
        return data.decode("ascii")
    except UnicodeError:
        raise RendezvousError(f"the token file {path} is not hex text") from None


def parse_arguments(argv: list[str], launch: Launch | None = None) -> WorkerOptions:
    """The worker's options from ``argv`` and torchrun's environment (``launch``)."""
    launch = launch or Launch.from_environ()
    args = _parser().parse_args(argv)
    rank = args.rank if args.rank is not None else launch.rank
    world = args.world_size if args.world_size is not None else launch.world_size
    if rank is None or world is None or not 0 <= rank < world:
        raise RendezvousError(
            f"a worker needs 0 <= rank < world size (--rank/--world-size, or torchrun's RANK "
            f"and WORLD_SIZE), got rank={rank}, world size={world}"
        )
    parse_address(args.main)  # refused now (e.g. IPv6), not at the first connection
    check_ipv4_host(args.host, "--host")
    device = args.device_type or ("cuda" if torch.cuda.is_available() else "cpu")
    if args.threads is not None and args.threads < 1:
        raise RendezvousError(f"--threads must be at least 1, got {args.threads}")
    threads = args.threads or max(1, (os.cpu_count() or 1) // max(1, world))
    try:  # inf waits as long as dtorch waits at all (MAX_WAIT_SECOND)
        join_timeout = resolve_timeout(args.join_timeout)
    except ValueError as error:
        raise RendezvousError(f"--join-timeout: {error}") from None
    token = b"" if argv and "--help" in argv else _read_token(args.token_file, launch)
    local = launch.local_rank if launch.local_rank is not None else rank
    return WorkerOptions(
        args.main, args.host, rank, world, device, local, threads, join_timeout, token
    )


def _join(options: WorkerOptions) -> tuple[SignedStore, ProgramRecord, StartRecord]:
    """Register with the controller's store and wait for the start record."""
    host, port = parse_address(options.main)
    try:  # a name that does not resolve fails here, at once
        reached = store_address(host, port)
    except RendezvousError as error:
        raise RendezvousError(f"--main {options.main}: {error}") from None
    client = connect_store(
        host, port, options.token, timeout_s=options.join_timeout, on_wait=_waiting(options)
    )
    program = SignedStore(client, record_key(options.token)).wait(
        PROGRAM_KEY, ProgramRecord, options.join_timeout
    )
    _check_store(program, reached)
    # this program's records are signed with its own key (ClusterNode's ``records``)
    store = SignedStore(client, record_key(program_secret(options.token, program.nonce)))
    _claim(client, options.rank)
    record = WorkerRecord(
        options.rank,
        options.world_size,
        options.host,
        os.getpid(),
        options.device_type,
        options.local_rank,
    )
    store.put(worker_key(options.rank), record)
    start = wait_start(store, options.join_timeout)
    if len(start.hosts) != options.world_size:
        raise RendezvousError(
            f"the controller started {len(start.hosts)} workers; this one expected "
            f"{options.world_size}"
        )
    return store, program, start


def _waiting(options: WorkerOptions) -> Callable[[float], None]:
    """Says, now and then, that the controller's store has not answered yet (a worker may
    start before its controller; one whose controller never comes is not silent)."""

    def say(waited: float) -> None:
        _LOG.warning(
            "no answer yet from the controller's rendezvous store at %s after %.0f s; "
            "waiting up to --join-timeout (%g s)",
            options.main,
            waited,
            options.join_timeout,
        )

    return say


def _check_store(program: ProgramRecord, reached: str) -> None:
    """RendezvousError unless ``program`` was published in the store this worker reached."""
    if program.store != reached:
        raise RendezvousError(
            f"the program record in the store at {reached} names the store at "
            f"{program.store}: it was copied from another controller's store (or --main "
            "names the controller by another address than the one it serves)"
        )


def _claim(client: dist.Store, rank: int) -> None:
    """Take ``rank`` in the controller's store; RendezvousError if a worker holds it."""
    if int(client.add(claim_key(rank), 1)) != 1:
        raise RendezvousError(
            f"rank {rank} is already registered with this controller: another worker joined "
            f"as rank {rank} first (two workers given rank {rank}, or a restart: a running "
            "cluster takes no new worker)"
        )


def _groups(
    options: WorkerOptions,
    store: SignedStore,
    namespace: CommNamespace,
    hosts: tuple[str, ...],
    cpu_collectives: str,
) -> ThreadGroupManager:
    """The collective groups of this worker, across hosts (rendezvous in the store)."""
    host_of = {h: i for i, h in enumerate(dict.fromkeys(hosts))}
    topology = CommTopology.striped(
        options.world_size,
        processes=True,
        hosts=tuple(host_of[h] for h in hosts),
        cpu_gloo=cpu_collectives == "gloo",  # the controller's choice, in its signed record
    )
    return ThreadGroupManager(
        topology,
        namespace=namespace,
        rendezvous_store=SignedValues(
            dist.PrefixStore(GROUPS_PREFIX, store.store), group_key(namespace.secret)
        ),
        host_address=options.host,
    )


def run(options: WorkerOptions) -> int:
    """Join, then serve the controller until STOP; the exit status."""
    torch.set_num_threads(options.threads)
    keep_freed_memory()  # kernels reuse freed tensors' pages (dtorch.runtime.heap)
    allow_all_descriptors()  # a few per collective group: see dtorch.runtime.heap
    if options.device_type == "cuda":
        torch.cuda.set_device(options.local_rank)
    store, program, start = _join(options)
    secret = program_secret(options.token, program.nonce)
    keys = CurveKeys.from_secret(secret)
    namespace = CommNamespace(program.instance_id, secret=secret)
    groups = _groups(options, store, namespace, start.hosts, program.cpu_collectives)
    # beats first: a controller that dies while this worker connects is noticed in 5 s (the
    # subscriber waits up to the ZeroMQ timeout for its publisher)
    beacon = Beacon(
        program.beats_out,
        program.beats_in,
        options.rank,
        keys,
        _orphaned(namespace),
        on_peer_lost=_abandoning(groups),
    )
    try:
        return _serve(options, store, program, namespace, keys, groups)
    finally:
        beacon.stop(bye=True)
        store.store.close()


def _serve(
    options: WorkerOptions,
    store: SignedStore,
    program: ProgramRecord,
    namespace: CommNamespace,
    keys: CurveKeys,
    groups: ThreadGroupManager,
) -> int:
    """Connect to the controller's sockets and run its batches until STOP; the exit status."""
    with contextlib.ExitStack() as opened:
        subscriber = Subscriber(program.publisher, keys=keys, party=options.rank)
        opened.callback(subscriber.close)
        pusher = Pusher(program.puller, options.rank, keys=keys)
        opened.callback(pusher.close)
        board = StoreFailureBoard(store.store, namespace.secret)
        layout = PartyLayout(options.world_size, options.rank, 1)
        sink = PushSink(pusher, options.rank, shared_min=None)
        parts = WorkerParts(layout, sink, board, groups, lambda: None)
        return Worker(parts, subscriber, pusher, f"dtorch-w{options.rank}").run()


def _abandoning(groups: ThreadGroupManager) -> Callable[[int], None]:
    """What a worker does when the controller says another worker is lost: every collective
    in flight or to come fails at once, so a kernel waiting for the lost worker ends and the
    controller's STOP is read. A network store cannot see a peer on another host die: without
    this the wait would last until the comm timeout."""

    def lost(rank: int) -> None:
        _LOG.warning("the controller lost worker %d: abandoning every collective", rank)
        message = (
            f"worker {rank} of the cluster is lost (no heartbeat reached the controller, or "
            "another process beats as it)"
        )
        # on a thread of its own: telling a coordinator that is gone takes seconds, and the
        # beacon must go on beating meanwhile
        DaemonThread(groups.abandon, "dtorch-abandon", (message,))

    return lost


def _orphaned(namespace: CommNamespace) -> Callable[[], None]:
    """What a worker does once its controller is gone: clean up and exit at once."""

    def gone() -> None:
        _LOG.error("the controller is gone (no heartbeat): exiting")
        namespace.reclaim()
        os._exit(EXIT_ORPHANED)

    return gone


def main(argv: list[str] | None = None) -> int:
    """The console script's entry point."""
    logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s")
    try:
        options = parse_arguments(sys.argv[1:] if argv is None else argv)
        return run(options)
    except DTorchError as error:
        print(f"dtorch.worker: {error}", file=sys.stderr)
        return EXIT_FATAL
    except dist.DistStoreError as error:  # the rendezvous store's own (a lost connection)
        print(f"dtorch.worker: the rendezvous store failed: {error}", file=sys.stderr)
        return EXIT_FATAL
