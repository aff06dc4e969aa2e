"""Nothing a peer sends stops a network store's coordinator (a fuzz of unsigned and signed
garbage, then a legitimate round that matches torch); rank 0's calls fail in bounded time when
its coordinator thread died; and a client checks what comes back: a listener without the
secret is never taken for the coordinator, and a reply's declared tensor must match its bytes."""

from __future__ import annotations

import random
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import ormsgpack
import pytest
import torch
import zmq
from network_peers import ANY_PORT, RawPeer, SignedPeer, gated_router, two_ranks
from store_scenarios import free_port

from dtorch.comm.store import NetworkTensorStore
from dtorch.comm.store.network_auth import Hello, SessionTable, data_tag, derive_key
from dtorch.comm.store.network_protocol import Op, Status
from dtorch.errors import CommError, CommTimeoutError
from dtorch.ir.dtypes import dtype_code
from dtorch.options import GlobalOption
from dtorch.transport.handshakes import SUMMARY_SECONDS

pytestmark = pytest.mark.timeout(60)
F32 = dtype_code(torch.float32)

#: Headers a buggy or hostile member may send: each must get an ERROR reply.
MALFORMED: list[bytes] = [
    b"",
    b"\xc1",  # never valid MessagePack
    b"\x93\x01",  # a truncated array
    ormsgpack.packb({"op": 2}),
    ormsgpack.packb([]),
    ormsgpack.packb(["GET"]),
    ormsgpack.packb([99, 1]),
    ormsgpack.packb([Op.GET]),
    ormsgpack.packb([Op.GET, 1, "k"]),  # arity
    ormsgpack.packb([Op.GET, 1, "k", 1.0, 0]),
    ormsgpack.packb([Op.GET, 1, 5, 1.0]),  # a key that is no str
    ormsgpack.packb([Op.GET, 1, b"k", 1.0]),
    ormsgpack.packb([Op.GET, 1, "k" * 5000, 1.0]),
    ormsgpack.packb([Op.GET, 1, "k", "soon"]),
    ormsgpack.packb([Op.GET, 1, "k", float("nan")]),
    ormsgpack.packb([Op.GET, 1, "k", float("inf")]),
    ormsgpack.packb([Op.GET, 1, "k", -1.0]),
    ormsgpack.packb([Op.GET, 2**64 - 1, "k", 1.0]),  # a huge int
    ormsgpack.packb([Op.GET, -(2**63), "k", 1.0]),
    ormsgpack.packb([Op.GET, True, "k", 1.0]),
    ormsgpack.packb([Op.GET, None, "k", 1.0]),
    ormsgpack.packb([Op.SET, 1, "k", 1, [F32, [1]]]),  # no data
    ormsgpack.packb([Op.SET, 1, "k", 0, [F32, [1]]]),
    ormsgpack.packb([Op.SET, 1, "k", 1, [F32, "1"]]),
    ormsgpack.packb([Op.SET, 1, "k", 1, {"dtype": 0}]),
    ormsgpack.packb([Op.JOIN, 1, ["x"], 2]),
    ormsgpack.packb([Op.BARRIER, 1, [1.0]]),
    ormsgpack.packb([Op.FINISH, 1, "never-set"]),
    ormsgpack.packb([Op.WAIT, 1, "never-set", 1.0]),
    ormsgpack.packb([Op.JOIN, 1, "other/store", 2]),  # joined already
    b"\x91" * 2000 + b"\x01",  # deeply nested lists
]


def _random_value(rng: random.Random, depth: int = 0) -> Any:
    choices = [
        lambda: rng.randint(-(2**63), 2**64 - 1),
        lambda: rng.random() * 10 ** rng.randint(-5, 30),
        lambda: "".join(chr(rng.randint(0, 0x2FF)) for _ in range(rng.randint(0, 12))),
        lambda: rng.randbytes(rng.randint(0, 12)),
        lambda: None,
        lambda: rng.random() < 0.5,
    ]
    if depth < 3:
        choices.append(lambda: [_random_value(rng, depth + 1) for _ in range(rng.randint(0, 4))])
        choices.append(lambda: {str(rng.random()): _random_value(rng, depth + 1)})
    return rng.choice(choices)()


def _random_header(rng: random.Random) -> bytes:
    """A random header: a real op code (or not) followed by random fields."""
    op = rng.choice([*list(Op), rng.randint(-5, 300)])
    fields = [_random_value(rng) for _ in range(rng.randint(0, 5))]
    return ormsgpack.packb([int(op), *fields])


def _random_frames(rng: random.Random) -> list[bytes]:
    frames = [rng.randbytes(rng.randint(0, 40)) for _ in range(rng.randint(1, 6))]
    if rng.random() < 0.2:
        frames[0] = b"hello"
    return frames


def test_garbage_never_stops_the_coordinator(namespace, watch):
    rng = random.Random(11)
    tensor = torch.randn(7, 5)
    with two_ranks(namespace) as (rank0, rank1):
        raw = RawPeer(rank0.endpoint, gate=namespace.secret)  # past the gate, without the key
        signed = SignedPeer(rank0.endpoint, namespace.secret)
        try:
            for _ in range(300):
                raw.send(_random_frames(rng))
            rank1.close()  # the signed peer takes rank 1's place: its requests reach handlers
            watch.wait_for("rank 1 left")
            assert signed.request([Op.JOIN, 1, namespace.scoped_key("sec"), 2]) == [Status.OK]
            headers = MALFORMED + [_random_header(rng) for _ in range(300)]
            replies = [signed.request(header) for header in headers]
            for header, reply in zip(headers, replies, strict=True):
                assert reply is not None and reply[0] == Status.ERROR, (header[:40], reply)
            rank0.src_set("after", tensor, 2)
            got = signed.request([Op.GET, 1, "after", 5.0])
            assert got == [Status.OK, [F32, [7, 5]]]
            mine = rank0.dest_get("after").clone()
            assert signed.request([Op.FINISH, 1, "after"]) == [Status.OK]
            rank0.dest_finish_get("after")
            rank0.src_wait_until_get_finished("after")
        finally:
            raw.close()
            signed.close()
        assert rank0._coordinator is not None and rank0._coordinator.failure_text() is None
    torch.testing.assert_close(mine, tensor)
    assert watch.count("failed on a request") == 0  # no handler raised an unexpected error


def test_rank_0_fails_fast_when_its_coordinator_thread_died(namespace, watch):
    def injected_failure(frames: list) -> None:
        raise RuntimeError("injected failure")

    with GlobalOption.override(comm_timeout_second=60):
        store = NetworkTensorStore.open("dying", 1, 0, namespace, ANY_PORT)
        with store:
            assert store._coordinator is not None
            store._coordinator._dispatch = injected_failure  # type: ignore[method-assign]
            start = time.monotonic()
            with pytest.raises(CommError, match=r"thread failed: RuntimeError\('injected failure"):
                store.src_set("k", torch.ones(1), 1)  # its message kills the thread
            assert time.monotonic() - start < 2.0  # not the 60 s comm timeout
            with pytest.raises(CommError, match="injected failure"):
                store.barrier()
    watch.wait_for("stopped")


def test_a_remote_rank_times_out_when_the_coordinator_died(namespace):
    with two_ranks(namespace) as (rank0, rank1):
        assert rank0._coordinator is not None
        rank0._coordinator.stop()
        start = time.monotonic()
        with GlobalOption.override(comm_timeout_second=0.3), pytest.raises(CommTimeoutError):
            rank1.dest_get("k")
        assert time.monotonic() - start < 5.0
        # once silent, silent until the group is repaired: what follows a failure (its
        # abort, the end of the exchange) fails at once instead of waiting out one timeout
        # after another
        start = time.monotonic()
        with GlobalOption.override(comm_timeout_second=60):
            assert rank1.abort("op1", "failed") is False  # nobody to tell
            with pytest.raises(CommTimeoutError, match="did not answer"):
                rank1.end_exchange(["op1/k"], [])
        assert time.monotonic() - start < 1.0
        start = time.monotonic()  # a repair looks again, briefly: still silent
        with (
            GlobalOption.override(comm_timeout_second=60),
            pytest.raises(CommTimeoutError, match="did not answer"),
        ):
            rank1.discard()
        assert time.monotonic() - start < 5.0


def test_a_coordinator_that_was_only_slow_serves_again_after_a_repair(namespace):
    with two_ranks(namespace) as (rank0, rank1):
        rank1._live_client()._silent()  # as after an answer that came too late
        with pytest.raises(CommTimeoutError, match="did not answer"):
            rank1.dest_get("k")
        rank1.discard()  # the coordinator takes a hello: the store serves again
        rank0.src_set("k", torch.arange(3), 1)
        assert rank1.dest_get("k").tolist() == [0, 1, 2]
        rank1.dest_finish_get("k")
        rank0.src_wait_until_get_finished("k")


def test_an_abort_never_waits_the_comm_timeout_for_a_dead_coordinator(namespace):
    """fail_scope aborts through every group a caller holds, one after another: each abort
    to a coordinator that is gone gives up in seconds (and does not silence the store)."""
    with two_ranks(namespace) as (rank0, rank1):
        assert rank0._coordinator is not None
        rank0._coordinator.stop()
        start = time.monotonic()
        with (
            GlobalOption.override(comm_timeout_second=60),
            pytest.raises(CommTimeoutError, match="did not answer"),
        ):
            rank1.abort("op1", "failed")
        assert time.monotonic() - start < 5.0
        assert not rank1._live_client().silenced


def _fake_coordinator(router: zmq.Socket, key: bytes, replies: list[tuple[list, bytes | None]]):
    """Answer a hello and then one request per entry of ``replies`` (header, data)."""
    table = SessionTable(key)
    pending = list(replies)
    while pending:
        assert router.poll(10_000), "the client never asked"
        ident, *rest = router.recv_multipart()
        message = table.receive(ident, rest)
        if isinstance(message, Hello):
            router.send_multipart(message.reply)
            continue
        header, data = pending.pop(0)
        raw = ormsgpack.packb(header)
        chunks = None if data is None else [data]
        frames = table.seal(ident, message.counter, raw, chunks, data_tag(chunks))
        assert frames is not None
        router.send_multipart(frames)


def test_a_listener_without_the_secret_is_not_taken_for_the_coordinator(namespace, watch):
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    # the impostor admits the client's password: PLAIN tells it to whoever listens
    with (
        gated_router(endpoint, derive_key(namespace.secret)) as router,
        GlobalOption.override(comm_timeout_second=0.3),
        ThreadPoolExecutor(1) as pool,
    ):
        opening = pool.submit(NetworkTensorStore.open, "fake", 2, 1, namespace, endpoint)
        impostor = derive_key(b"an impostor's own secret")
        assert router.poll(10_000)
        ident, hello, nonce = router.recv_multipart()
        forged = SessionTable(impostor).receive(ident, [hello, nonce])
        assert isinstance(forged, Hello)
        router.send_multipart(forged.reply)
        with pytest.raises(CommTimeoutError, match="did not answer"):
            opening.result(timeout=10)
    watch.wait_for("ignored a bad hello")


def test_a_reply_declaring_more_than_its_bytes_is_refused(namespace):
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    bool_code = dtype_code(torch.bool)
    replies: list[tuple[list, bytes | None]] = [
        ([Status.OK], None),  # JOIN
        ([Status.OK], None),  # the construction barrier
        ([Status.OK, [F32, [2**28]]], b"\1"),  # 1 GiB declared, 1 byte sent
        ([Status.OK, [bool_code, [2]]], b"\0\7"),  # a bool that is no bool
        ([Status.OK, [F32, [2]]], b"\0" * 8),  # a good one: the client still works
    ]
    key = derive_key(namespace.secret)
    with gated_router(endpoint, key) as router, ThreadPoolExecutor(1) as pool:

        def consumer() -> torch.Tensor:
            with NetworkTensorStore.open("fake", 2, 1, namespace, endpoint) as store:
                with pytest.raises(CommError, match="needs 1073741824 bytes; 1 came"):
                    store.dest_get("bomb")
                with pytest.raises(CommError, match="other than 0 and 1"):
                    store.dest_get("bool")
                return store.dest_get("good")

        result = pool.submit(consumer)
        _fake_coordinator(router, key, replies)
        assert torch.equal(result.result(timeout=10), torch.zeros(2))


def test_a_flood_of_garbage_is_not_a_flood_of_log_lines(namespace, watch):
    started = time.monotonic()
    with two_ranks(namespace) as (rank0, _rank1):
        raw = RawPeer(rank0.endpoint, gate=namespace.secret)
        try:
            for index in range(300):
                raw.send([b"garbage", index.to_bytes(2, "little")])
            refusals = rank0._coordinator._refusals
            deadline = time.monotonic() + 30
            while refusals.count < 300 and time.monotonic() < deadline:
                time.sleep(0.05)
        finally:
            raw.close()
    took = time.monotonic() - started
    assert refusals.count >= 300
    # the first 100, then a line per SUMMARY_SECONDS at most
    assert 100 <= watch.count("dropped a message") <= 101 + int(took / SUMMARY_SECONDS)


def test_tensor_descriptions_that_no_tensor_could_have_are_refused() -> None:
    """An empty shape with huge dims needs 0 bytes but overflows any stride: a CommError, not
    torch's RuntimeError; a negative dim likewise."""
    from dtorch.comm.store.network_protocol import tensor_meta
    from dtorch.ir.dtypes import dtype_code

    code = dtype_code(torch.float32)
    with pytest.raises(CommError, match="too large for any tensor"):
        tensor_meta([code, [0, 2**62, 2**62]], 0)
    with pytest.raises(CommError, match="negative dimension"):
        tensor_meta([code, [2, -1]], 0)
    assert tensor_meta([code, [0, 3]], 0) == (torch.float32, (0, 3))


def test_give_up_ends_a_wait_on_a_coordinator_that_is_gone(namespace):
    """A cluster that lost a worker abandons its groups (``ThreadGroupManager.abandon``): an
    abort cannot reach a coordinator that is gone, so the caller waiting there gives up
    instead of waiting out the comm timeout."""
    import threading

    with two_ranks(namespace) as (rank0, rank1):
        assert rank0._coordinator is not None
        rank0._coordinator.stop()
        failures: list[BaseException] = []

        def wait() -> None:
            try:
                rank1.dest_get("op1/k")
            except BaseException as error:
                failures.append(error)

        with GlobalOption.override(comm_timeout_second=60):
            waiter = threading.Thread(target=wait, daemon=True)
            waiter.start()
            time.sleep(0.5)
            start = time.monotonic()
            rank1.give_up()
            waiter.join(5.0)
        assert not waiter.is_alive() and time.monotonic() - start < 1.0
        assert isinstance(failures[0], CommTimeoutError), failures
        assert rank1._live_client().silenced  # later calls fail at once, until a repair
