"""The two channels between real processes: workers in the shared pool subscribe, report ready,
receive one broadcast (large frames included) and report back."""

from __future__ import annotations

import hashlib
import os

import pytest

from dtorch.transport import Publisher, Puller
from tests.process_pool import Job
from tests.transport.transport_jobs import worker_loop

pytestmark = pytest.mark.timeout(90)


def payloads() -> list[list[bytes]]:
    big = os.urandom(8 << 20)
    return [[b"batch %d" % i] for i in range(200)] + [[big, b"tail"], [], [bytes(1 << 16)]]


def test_broadcast_to_worker_processes_and_reports_back(ipc, process_pool):
    workers = 3
    with Publisher(ipc.address("pub")) as publisher, Puller(ipc.address("pull")) as puller:
        args = (publisher.address, puller.address)
        run = process_pool.start([Job(worker_loop, (*args, rank, 30.0)) for rank in range(workers)])
        publisher.wait_subscribers(workers, timeout_s=60)
        ready = [puller.recv(timeout_s=60) for _ in range(workers)]
        assert sorted(envelope.sender for envelope in ready) == list(range(workers))
        assert {envelope.kind for envelope in ready} == {b"ready"}
        assert len({bytes(envelope.parts[0]) for envelope in ready}) == workers  # 3 processes
        digest = hashlib.sha256()
        for parts in payloads():
            publisher.send(b"execute", parts)
            for part in parts:
                digest.update(part)
        last = publisher.send(b"destroy")
        done = [puller.recv(timeout_s=60) for _ in range(workers)]
        assert {(envelope.kind, bytes(envelope.parts[0])) for envelope in done} == {
            (b"done", digest.digest())
        }
        assert run.results(timeout_s=60) == [list(range(last + 1))] * workers
