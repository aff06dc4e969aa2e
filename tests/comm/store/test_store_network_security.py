"""The attacks of issue 11 on the network store, each refused: a local process that never
joined (no secret) cannot read, inject, finish or abort, even past the gate (with the PLAIN
password, which travels in the clear); a member cannot act as another rank; sizes declared
must match the bytes; what a store holds is bounded and freed. Every refusal is logged, and
the legitimate exchange that follows still matches torch. (Peers refused at the gate itself:
``test_store_network_gate``.)"""

from __future__ import annotations

import logging
import time

import ormsgpack
import pytest
import torch
from network_peers import ANY_PORT, STORE_LOGGER, RawPeer, SignedPeer, handover, two_ranks

from dtorch.comm.namespace import CommNamespace
from dtorch.comm.store import NetworkTensorStore, StoreKind, open_store
from dtorch.comm.store.base import Deadline
from dtorch.comm.store.network_auth import data_tag
from dtorch.comm.store.network_protocol import Op, Status
from dtorch.errors import CommError, CommTimeoutError
from dtorch.ir.dtypes import dtype_code
from dtorch.options import GlobalOption

pytestmark = pytest.mark.timeout(60)
F32 = dtype_code(torch.float32)


@pytest.fixture
def outsider():
    """Opens raw DEALERs (the attacker) and closes them after the test."""
    peers: list[RawPeer] = []

    def connect(endpoint: str, secret: bytes | None = None, gate: bytes | None = None) -> RawPeer:
        """A peer with ``secret`` (signed), or one that only passes the gate of ``gate``."""
        peer = RawPeer(endpoint, gate) if secret is None else SignedPeer(endpoint, secret)
        peers.append(peer)
        return peer

    yield connect
    for peer in peers:
        peer.close()


def _unsigned(header: list) -> list[bytes]:
    """A request as the store spoke before authentication: [request id, header]."""
    return [(1).to_bytes(8, "little"), ormsgpack.packb(header)]


#: What the coordinator logs for a message in no request format (the unsigned ones).
_NO_REQUEST = "is no request of a network store"


def test_an_outsider_cannot_read_a_tensor_set_for_rank_1(namespace, watch, outsider):
    tensor = torch.randn(5, 3)
    with two_ranks(namespace) as (rank0, rank1):
        rank0.src_set("k", tensor, 1)
        attacker = outsider(rank0.endpoint, gate=namespace.secret)
        attacker.send(_unsigned([Op.GET, 1, "k", 1.0]))
        watch.wait_for(_NO_REQUEST)
        wrong = outsider(rank0.endpoint, secret=b"guessed secret!!" * 2)
        assert not wrong.accepted  # refused at the gate: a wrong password
        wrong.send(wrong.sealed(ormsgpack.packb([Op.GET, 1, "k", 1.0])))
        watch.wait_for("wrong password")
        assert attacker.answer(0.2) is None and wrong.answer(0.2) is None
        got = rank1.dest_get("k").clone()
        rank1.dest_finish_get("k")
        rank0.src_wait_until_get_finished("k")
    torch.testing.assert_close(got, tensor)


def test_an_outsider_cannot_inject_a_tensor(namespace, watch, outsider):
    real = torch.arange(4.0)
    with two_ranks(namespace) as (rank0, rank1):
        attacker = outsider(rank0.endpoint, gate=namespace.secret)
        fake = torch.full((4,), 666.0).numpy().tobytes()
        attacker.send([*_unsigned([Op.SET, 0, "k", 1, [F32, [4]]]), fake])
        attacker.send([b"hello", b"n" * 16])  # even a session does not help without the key
        assert attacker.answer() is not None
        header = ormsgpack.packb([Op.SET, 0, "k", 1, [F32, [4]]])
        forged = [b"n" * 16, (1).to_bytes(8, "little"), b"\0" * 32, header, data_tag([fake]), fake]
        attacker.send(forged)
        watch.wait_for("bad MAC")
        assert watch.count(_NO_REQUEST) == 1
        got = handover(rank0, rank1, "k", real)
    torch.testing.assert_close(got, real)


def test_an_outsider_cannot_finish_a_get_for_rank_1(namespace, watch, outsider):
    with two_ranks(namespace) as (rank0, rank1):
        rank0.src_set("k", torch.ones(2), 1)
        outsider(rank0.endpoint, gate=namespace.secret).send(_unsigned([Op.FINISH, 1, "k"]))
        watch.wait_for("dropped a message")
        with GlobalOption.override(comm_timeout_second=0.3), pytest.raises(CommTimeoutError) as e:
            rank0.src_wait_until_get_finished("k")
        assert "0 of 1 consumers finished" in str(e.value)
        rank1.dest_get("k")
        rank1.dest_finish_get("k")
        rank0.src_wait_until_get_finished("k")


def test_a_member_acts_only_as_the_rank_it_joined_as(namespace, watch, outsider):
    with two_ranks(namespace) as (rank0, rank1):
        rank0.src_set("k", torch.ones(2), 1)
        peer = outsider(rank0.endpoint, secret=namespace.secret)
        assert peer.accepted
        before_join = peer.request([Op.FINISH, 1, "k"])
        assert before_join[0] == Status.ERROR and "connection of rank None" in before_join[1]
        taken = peer.request([Op.JOIN, 1, namespace.scoped_key("sec"), 2])
        assert taken == [Status.ERROR, "rank 1 is already open"]
        outside = peer.request([Op.SET, 5, "x", 1, [F32, [1]]], b"\0" * 4)
        assert outside[0] == Status.ERROR and "outside [0, 2)" in outside[1]
        watch.wait_for("refused a request", times=2)
        with pytest.raises(CommError, match="FINISH as rank 0 from a connection of rank 1"):
            rank1._call("dest_finish_get", [Op.FINISH, 0, "k"], Deadline(5.0))
        got = handover(rank0, rank1, "k2", torch.tensor([3.0]))
        rank1.dest_get("k")
        rank1.dest_finish_get("k")
        rank0.src_wait_until_get_finished("k")
    assert got.tolist() == [3.0]


def test_only_the_program_aborts_and_an_abort_line_does_nothing_else(namespace, watch, outsider):
    with two_ranks(namespace) as (rank0, rank1):
        attacker = outsider(rank0.endpoint, gate=namespace.secret)
        attacker.send(_unsigned([Op.ABORT, 1, "op1", "forged"]))
        watch.wait_for(_NO_REQUEST)
        assert attacker.answer(0.2) is None and rank1.aborted("op1") is None
        line = outsider(rank0.endpoint, secret=namespace.secret)  # as a member's abort line
        refused = line.request([Op.ABORTED, 1, "op1"])
        assert refused[0] == Status.ERROR and "connection of rank None" in refused[1]
        assert line.request([Op.ABORT, 1, "op1", "rank 1 failed"]) == [Status.OK]
        assert line.request([Op.ABORT, 1, "op2", "again"], timeout_s=0.3) is None  # used once
        assert rank0.aborted("op1") == "rank 1 failed" and rank0.aborted("op2") is None


def test_a_member_drops_only_its_own_keys(namespace):
    with two_ranks(namespace) as (rank0, rank1):
        rank0.src_set("op1/k", torch.ones(2), 1)
        rank1._call("end_exchange", [Op.DROP, 1, ["op1/k"]], Deadline(5.0))
        assert rank1.dest_get("op1/k").tolist() == [1.0, 1.0]  # still there: rank 0 set it
        rank1.end_exchange(["op1/k"], [])
        rank0.end_exchange([], ["op1/k"])
        assert rank0._coordinator is not None and rank0._coordinator._slots == {}


def test_refusals_are_warnings_in_the_log(namespace, watch, caplog, outsider):
    caplog.set_level(logging.WARNING, logger=STORE_LOGGER)
    with two_ranks(namespace) as (rank0, _rank1):
        outsider(rank0.endpoint, gate=namespace.secret).send(_unsigned([Op.GET, 1, "k", 1.0]))
        watch.wait_for(_NO_REQUEST)
    # the coordinator's thread hands the record to ``watch`` (on the store's logger) before
    # the root logger's caplog: it may not have reached caplog yet
    deadline = time.monotonic() + 5
    while not (records := [r for r in caplog.records if _NO_REQUEST in r.getMessage()]):
        assert time.monotonic() < deadline, "the refusal never reached the root logger"
        time.sleep(0.01)
    assert len(records) == 1 and records[0].levelno == logging.WARNING
    assert records[0].name == "dtorch.comm.store.network_coordinator"


def test_a_replayed_request_is_refused(namespace, watch, outsider):
    with two_ranks(namespace) as (rank0, _rank1):
        peer = outsider(rank0.endpoint, secret=namespace.secret)
        frames = peer.sealed(ormsgpack.packb([Op.JOIN, 1, "nope", 2]))
        peer.send(frames)
        assert peer.answer() is not None  # an ERROR: rank 1 is taken
        peer.send(frames)
        watch.wait_for("replayed or reordered")
        other = outsider(rank0.endpoint, secret=namespace.secret)
        other.send(frames)  # the same frames in another session
        watch.wait_for("bad MAC")
        assert peer.answer(0.2) is None and other.answer(0.2) is None


def test_declared_shape_must_match_the_bytes(namespace, watch, outsider):
    with two_ranks(namespace) as (rank0, rank1):
        peer = outsider(rank0.endpoint, secret=namespace.secret)
        rank1.close()  # the signed peer takes rank 1's place
        watch.wait_for("rank 1 left")
        assert peer.request([Op.JOIN, 1, namespace.scoped_key("sec"), 2]) == [Status.OK]
        bomb = peer.request([Op.SET, 1, "bomb", 1, [F32, [2**28]]], b"\1")
        assert bomb[0] == Status.ERROR and "needs 1073741824 bytes; 1 came" in bomb[1]
        for meta in ([999, [1]], [F32, [-1, -4]], [F32, [2**62, 4]], [F32, [1] * 65]):
            reply = peer.request([Op.SET, 1, "odd", 1, meta], b"\0" * 16)
            assert reply[0] == Status.ERROR, meta
        watch.wait_for("refused a request", times=5)
        with GlobalOption.override(comm_timeout_second=0.3), pytest.raises(CommTimeoutError):
            rank0.dest_get("bomb")  # nothing was stored


def test_bytes_changed_on_the_way_are_refused_by_the_consumer(namespace, watch, outsider):
    signed, changed = torch.ones(4).numpy().tobytes(), torch.zeros(4).numpy().tobytes()
    with two_ranks(namespace) as (rank0, rank1):
        peer = outsider(rank0.endpoint, secret=namespace.secret)
        rank1.close()  # the signed peer takes rank 1's place
        watch.wait_for("rank 1 left")
        assert peer.request([Op.JOIN, 1, namespace.scoped_key("sec"), 2]) == [Status.OK]
        frames = peer.sealed(ormsgpack.packb([Op.SET, 1, "k", 1, [F32, [4]]]), signed)
        peer.send([*frames[:-1], changed])  # the digest and MAC of ``signed``, other bytes
        assert ormsgpack.unpackb(peer.auth.open_reply(peer.counter, peer.answer())[0]) == [0]
        with pytest.raises(CommError, match="do not match the digest their producer signed"):
            rank0.dest_get("k")


def test_a_flood_of_hellos_evicts_no_session(namespace, outsider):
    """Hellos cost the coordinator no state (the session is made by the first request that
    proves the key): a peer that said hello and waits while outsiders flood hellos is served."""
    with two_ranks(namespace) as (rank0, _rank1):
        line = outsider(rank0.endpoint, secret=namespace.secret)  # hello done, no request yet
        assert line.accepted
        flood = outsider(rank0.endpoint, gate=namespace.secret)
        for index in range(500):
            flood.send([b"hello", index.to_bytes(16, "little")])
        answered = 0
        while flood.answer(1.0) is not None:
            answered += 1
        assert answered == 500
        assert rank0._coordinator is not None and len(rank0._coordinator._sessions._sessions) <= 3
        assert line.request([Op.ABORT, 1, "op1", "rank 1 failed"]) == [Status.OK]
        assert rank0.aborted("op1") == "rank 1 failed"


def test_an_outsider_cannot_pin_memory(namespace, watch, outsider, threads):
    chunk = b"\0" * (1 << 20)  # the largest frame a store takes
    room = torch.zeros(6 << 18)  # 6 MiB of the 8 MiB cap: it fits only if nothing is pinned
    with two_ranks(namespace, max_bytes=8 << 20) as (rank0, rank1):
        attacker = outsider(rank0.endpoint, gate=namespace.secret)
        for index in range(40):  # 40 MiB under a rank that does not exist
            attacker.send([*_unsigned([Op.SET, 7, f"pin{index}", 1, [F32, [1 << 18]]]), chunk])
        watch.wait_for(_NO_REQUEST, times=40)
        member = outsider(rank0.endpoint, secret=namespace.secret)
        reply = member.request([Op.SET, 7, "pin", 1, [F32, [1 << 20]]], chunk * 4)
        assert reply[0] == Status.ERROR and "outside [0, 2)" in reply[1]
        got = handover(rank1, rank0, "room", room)
        _reset_both(rank0, rank1, threads)
        again = handover(rank1, rank0, "room", room + 1)
    torch.testing.assert_close(got, room)
    torch.testing.assert_close(again, room + 1)


def test_the_byte_cap_refuses_and_reset_releases(namespace, watch, threads):
    half = torch.arange(150_000.0)  # 600 kB of a 1 MiB cap
    with two_ranks(namespace, max_bytes=1 << 20) as (rank0, rank1):
        rank1.src_set("a1", half, 1)
        with pytest.raises(CommError, match="may hold at most 1048576"):
            rank0.src_set("a0", half, 1)
        watch.wait_for("may hold at most")
        small = handover(rank1, rank0, "small", torch.ones(3))  # what fits is still served
        first = rank0.dest_get("a1").clone()
        rank0.dest_finish_get("a1")
        rank1.src_wait_until_get_finished("a1")
        with pytest.raises(CommError, match="may hold at most"):
            rank0.src_set("a0", half, 1)  # a finished key is held until reset()
        _reset_both(rank0, rank1, threads)
        got = handover(rank0, rank1, "a0", half)
    assert small.tolist() == [1.0, 1.0, 1.0]
    torch.testing.assert_close(first, half)
    torch.testing.assert_close(got, half)


def _reset_both(rank0: NetworkTensorStore, rank1: NetworkTensorStore, threads) -> None:
    """reset() on both ranks at once (it holds two barriers)."""
    stores = [rank0, rank1]
    threads(2, lambda rank: stores[rank].reset())


def test_a_leaving_member_frees_its_slots(namespace, watch):
    with two_ranks(namespace, max_bytes=1 << 20) as (rank0, rank1):
        rank1.src_set("left-behind", torch.zeros(200_000), 1)  # 800 kB, never fetched
        rank1.close()
        # this store's line: a store of an earlier test may log its own "rank 1 left" late
        watch.wait_for(f"'{namespace.instance_id}/sec': rank 1 left")
        rank0.src_set("room-again", torch.zeros(200_000), 1)


def test_a_network_store_needs_the_program_secret():
    for namespace in (CommNamespace("nosecret"), CommNamespace.of_process()):
        with pytest.raises(CommError, match="needs the program's secret"):
            open_store(StoreKind.NETWORK, "k", 1, 0, namespace=namespace, endpoint=ANY_PORT)
    with pytest.raises(CommError, match="at least 16 bytes"):
        NetworkTensorStore.open("k", 1, 0, CommNamespace("short", b"tiny"), ANY_PORT)


def test_the_secret_is_compared_but_never_shown():
    a, b = CommNamespace("same", b"1" * 32), CommNamespace("same", b"2" * 32)
    assert a != b and a == CommNamespace("same", b"1" * 32)
    assert "1111" not in repr(a) and "same" in repr(a)
    assert len(CommNamespace.create().secret) == 32
    assert CommNamespace.create().secret != CommNamespace.create().secret
    with pytest.raises(ValueError, match="secret must be bytes"):
        CommNamespace("x", "not bytes")  # type: ignore[arg-type]


def test_rank_0_on_port_0_reports_the_endpoint_bound(namespace):
    with two_ranks(namespace) as (rank0, rank1):
        assert rank0.endpoint != ANY_PORT and rank0.endpoint.startswith("tcp://127.0.0.1:")
        assert rank1.endpoint == rank0.endpoint
        got = handover(rank1, rank0, "k", torch.tensor([1.5, 2.5]))
    assert got.tolist() == [1.5, 2.5]
    with pytest.raises(CommError, match="port 0 is for rank 0"):
        NetworkTensorStore.open("k", 2, 1, namespace, ANY_PORT)


def test_rank_0_binds_the_interface_it_is_given(namespace):
    first = NetworkTensorStore.open("host2", 2, 0, namespace, "tcp://127.0.0.2:0")
    with first:
        assert first.endpoint.startswith("tcp://127.0.0.2:")
        with NetworkTensorStore.open("host2", 2, 1, namespace, first.endpoint) as second:
            got = handover(first, second, "k", torch.arange(6).reshape(2, 3))
    assert torch.equal(got, torch.arange(6).reshape(2, 3))


def test_rank_0_on_port_0_alone_times_out_in_its_first_call(namespace):
    with GlobalOption.override(comm_timeout_second=0.3):
        store = NetworkTensorStore.open("alone", 2, 0, namespace, ANY_PORT)
        with store, pytest.raises(CommTimeoutError, match=r"barrier timed out.*\[1\] never"):
            store.src_set("k", torch.ones(1), 1)
