"""What authenticating the network store costs: HMAC-SHA256 (what the store does) against
ZeroMQ CURVE and against no authentication, for 1 KiB and 64 MiB tensors over loopback TCP.

One *round* is one tensor from a producer to a consumer through a go-between that holds it,
producer and consumer both remote (TCP), driven from one thread in sequence:

* raw relay: a ROUTER thread that keeps the bytes of a SET and sends them to a GET (pyzmq
  DEALERs, no store); the baseline of every ratio;
* raw relay + CURVE: the same sockets with CURVE encryption and authentication on both hops;
* store, no MAC: the network store (ranks 1 and 2 remote, rank 0 hosting) with its MAC
  functions replaced by constants: the store without the cost of authentication;
* store, HMAC: the network store as it is: ``src_set``, ``dest_get`` plus a copy into a
  preallocated tensor, ``dest_finish_get``, ``src_wait_until_get_finished``;
* MACs alone: what the store's authentication computes in one round (four requests and their
  replies, two of them with the tensor bytes), without sockets.

Each cell is the best of three runs (ms per round) and its ratio to the raw relay.

Run: ``PYTHONPATH=. .venv/bin/python benchmarks/store_auth.py`` (``--quick``: fewer rounds).
"""

from __future__ import annotations

import argparse
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
import zmq

from dtorch.comm.namespace import CommNamespace
from dtorch.comm.store import NetworkTensorStore, network_auth
from dtorch.comm.store.network import tensor_bytes

SIZES = {"1 KiB": 1 << 10, "64 MiB": 64 << 20}
RESET_EVERY = 16
REPEATS = 3  # the best of three runs: the machine is shared, noise only adds time


def relay(router: zmq.Socket[Any], stop: threading.Event) -> None:
    """Hold the data of a SET (``[b"S", data]``) and send it to a GET (``[b"G"]``)."""
    held: Any = None
    while not stop.is_set():
        if not router.poll(100):
            continue
        ident, kind, *rest = router.recv_multipart(copy=False)
        if kind.bytes == b"S":
            held = rest[0]
            router.send_multipart([ident, b"ok"])
        else:
            router.send_multipart([ident, held], copy=False)


@contextmanager
def raw_pair(curve: bool) -> Iterator[tuple[zmq.Socket[Any], zmq.Socket[Any]]]:
    """A producer and a consumer DEALER connected to a relay thread over loopback TCP."""
    context: zmq.Context[Any] = zmq.Context.instance()
    router = context.socket(zmq.ROUTER)
    clients = [context.socket(zmq.DEALER) for _ in range(2)]
    if curve:
        server_public, server_secret = zmq.curve_keypair()
        router.curve_server = True
        router.curve_secretkey = server_secret
        for client in clients:
            public, secret = zmq.curve_keypair()
            client.curve_serverkey, client.curve_publickey = server_public, public
            client.curve_secretkey = secret
    router.bind("tcp://127.0.0.1:0")
    endpoint = router.getsockopt(zmq.LAST_ENDPOINT).decode()
    for client in clients:
        client.connect(endpoint)
    stop = threading.Event()
    thread = threading.Thread(target=relay, args=(router, stop), daemon=True)
    thread.start()
    try:
        yield clients[0], clients[1]
    finally:
        stop.set()
        thread.join(5)
        for socket in [router, *clients]:
            socket.close(0)


def raw_rounds(curve: bool, nbytes: int, count: int) -> float:
    """Seconds per round through the raw relay."""
    tensor, target = torch.ones(nbytes // 4), torch.empty(nbytes // 4)
    data = tensor_bytes(tensor)
    with raw_pair(curve) as (producer, consumer):
        for index in range(count + 1):
            if index == 1:
                start = time.perf_counter()  # the first round warms the connections
            producer.send_multipart([b"S", data], copy=False)
            producer.recv()
            consumer.send(b"G")
            frame = consumer.recv(copy=False)
            target.numpy().view("u1")[:] = memoryview(frame.buffer)
    return (time.perf_counter() - start) / count


def open_three(namespace: CommNamespace) -> list[NetworkTensorStore]:
    """Ranks 0, 1, 2 of one store; 1 and 2 connect over TCP."""
    first = NetworkTensorStore.open("bench", 3, 0, namespace, "tcp://127.0.0.1:0")
    others: dict[int, NetworkTensorStore] = {}

    def join(rank: int) -> None:
        others[rank] = NetworkTensorStore.open("bench", 3, rank, namespace, first.endpoint)

    on_threads(join, (1, 2))
    return [first, others[1], others[2]]


def on_threads(fn: Callable[[int], Any], ranks: tuple[int, ...]) -> None:
    threads = [threading.Thread(target=fn, args=(rank,)) for rank in ranks]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)


def store_rounds(nbytes: int, count: int) -> float:
    """Seconds per round through the network store (rank 1 produces, rank 2 consumes)."""
    tensor, target = torch.ones(nbytes // 4), torch.empty(nbytes // 4)
    stores = open_three(CommNamespace.create())
    _, producer, consumer = stores
    try:
        for index in range(count + 1):
            if index == 1:
                start = time.perf_counter()
            key = f"k{index % RESET_EVERY}"
            producer.src_set(key, tensor, 1)
            target.copy_(consumer.dest_get(key))
            consumer.dest_finish_get(key)
            producer.src_wait_until_get_finished(key)
            if index % RESET_EVERY == RESET_EVERY - 1 or index == 0:
                on_threads(lambda rank: stores[rank].reset(), (0, 1, 2))
        return (time.perf_counter() - start) / count
    finally:
        for store in reversed(stores):
            store.close()


@contextmanager
def macs_disabled() -> Iterator[None]:
    """The store's MAC functions replaced by constants (measurement only)."""
    saved = network_auth._mac, network_auth.data_tag
    network_auth._mac = lambda *args: b"\0" * 32
    network_auth.data_tag = lambda data: b"\0" if data is None else b"\1" + b"\0" * 32
    try:
        yield
    finally:
        network_auth._mac, network_auth.data_tag = saved


def store_rounds_without_mac(nbytes: int, count: int) -> float:
    with macs_disabled():
        return store_rounds(nbytes, count)


def auth_alone(nbytes: int, count: int) -> float:
    """Seconds the MACs of one request with ``nbytes`` of data and its reply take, without
    any socket: seal, check, seal the reply, check it (both ends and the coordinator)."""
    key = network_auth.derive_key(b"s" * 32)
    client, table = network_auth.ClientAuth(key), network_auth.SessionTable(key)
    hello, nonce = client.hello()
    answer = table.receive(b"id", hello)
    assert isinstance(answer, network_auth.Hello) and client.accept_hello(nonce, answer.reply[1:])
    data: bytes | None = b"\0" * nbytes
    header = b"\x95\x01\x01\xa1k\x01\x92\x00\x91\x01"
    start = time.perf_counter()
    for counter in range(1, count * 4 + 1):  # four requests per round, as the store's
        request = table.receive(b"id", client.seal(counter, header, data))
        assert isinstance(request, network_auth.Request)
        reply = table.seal(b"id", counter, b"\x91\x00", request.data, request.tag)
        assert reply is not None and client.open_reply(counter, reply[1:]) is not None
        data = None if counter % 4 else b"\0" * nbytes
    return (time.perf_counter() - start) / count


ROWS: dict[str, Callable[[int, int], float]] = {
    "raw relay": lambda n, c: raw_rounds(False, n, c),
    "raw relay + CURVE": lambda n, c: raw_rounds(True, n, c),
    "store, no MAC": store_rounds_without_mac,
    "store, HMAC (this)": store_rounds,
    "MACs alone": auth_alone,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds")
    args = parser.parse_args()
    counts = {"1 KiB": 60 if args.quick else 400, "64 MiB": 3 if args.quick else 8}
    print(f"{'':22}" + "".join(f"{name:>22}" for name in SIZES))
    baseline: dict[str, float] = {}
    for row, measure in ROWS.items():
        cells = []
        for name, nbytes in SIZES.items():
            seconds = min(measure(nbytes, counts[name]) for _ in range(REPEATS))
            baseline.setdefault(name, seconds)
            cells.append(f"{seconds * 1e3:9.2f} ms ({seconds / baseline[name]:4.1f}x)")
        print(f"{row:22}" + "".join(f"{cell:>22}" for cell in cells))


if __name__ == "__main__":
    main()
