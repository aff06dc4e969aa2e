"""Transport throughput: ``Publisher``/``Subscriber`` beside raw pyzmq PUB/SUB, in the same run.

Every subscriber is a spawned process (as a worker is); this process publishes over ipc.

* small messages (``[8-byte id, b"execute", 100-byte payload]``) to 1 and to 4 subscribers, in
  messages per second; baseline: a raw pyzmq PUB (``SNDHWM=0``) sending the same three frames
  with ``send_multipart`` to raw SUB sockets receiving with ``recv_multipart()`` (copies).
* 16 MiB frames to 1 subscriber, in GB/s; baseline: raw PUB/SUB with ``copy=False`` on both
  sides (the best raw pyzmq does).

A round is ``count`` messages; its time runs from just before the first send to the moment the
last subscriber received the last message (``time.monotonic`` is one clock for every process
on Linux). Each figure is the best of the rounds after a warm-up round; ``send`` is the
publisher's loop alone. The
raw baseline cannot know when a subscription has arrived, so it sleeps 0.5 s after its
subscribers connected; dtorch's publisher uses ``wait_subscribers``.

Run: ``PYTHONPATH=. .venv/bin/python benchmarks/transport.py`` (``--quick`` for fewer rounds).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import time
from dataclasses import dataclass
from functools import partial
from typing import Any

import zmq

from dtorch.transport import IpcDirectory, Publisher, Subscriber

SMALL = b"p" * 100
BIG = 16 << 20
SUBSCRIBERS = 4
KIND = b"execute"


@dataclass(frozen=True)
class Case:
    """One measurement: what to send, to how many subscribers, how often."""

    name: str
    subscribers: int
    size: int
    count: int
    rounds: int


def _receive_dtorch(address: str, count: int, rounds: int, index: int, results: Any) -> None:
    with Subscriber(address, timeout_s=60) as subscriber:
        results.put(("ready", index))
        for _ in range(rounds):
            for _ in range(count):
                subscriber.recv(60)
            results.put(("round", index, time.monotonic()))


def _receive_raw(
    address: str, count: int, rounds: int, index: int, results: Any, *, copy: bool
) -> None:
    context: zmq.Context[Any] = zmq.Context()
    socket = context.socket(zmq.SUB)
    socket.setsockopt(zmq.RCVHWM, 0)
    socket.setsockopt(zmq.SUBSCRIBE, b"")
    socket.connect(address)
    results.put(("ready", index))
    for _ in range(rounds):
        for _ in range(count):
            socket.recv_multipart(copy=copy)
        results.put(("round", index, time.monotonic()))
    socket.close(0)
    context.term()


RECEIVERS = {
    "dtorch": _receive_dtorch,
    "raw": partial(_receive_raw, copy=True),
    "raw-zero-copy": partial(_receive_raw, copy=False),
}


def child_main(tasks: Any, results: Any, index: int) -> None:
    """A subscriber process: runs each task it is given until it gets None."""
    while (task := tasks.get()) is not None:
        receiver, address, count, rounds = task
        RECEIVERS[receiver](address, count, rounds, index, results)
        results.put(("finished", index))


class Children:
    """``SUBSCRIBERS`` spawned subscriber processes, reused by every case."""

    def __init__(self) -> None:
        context = mp.get_context("spawn")
        self.results = context.Queue()
        self.tasks = [context.Queue() for _ in range(SUBSCRIBERS)]
        self.procs = [
            context.Process(target=child_main, args=(q, self.results, i), daemon=True)
            for i, q in enumerate(self.tasks)
        ]
        for proc in self.procs:
            proc.start()
        self.pending: list[tuple[Any, ...]] = []

    def start(self, receiver: str, address: str, case: Case) -> None:
        for task_queue in self.tasks[: case.subscribers]:
            task_queue.put((receiver, address, case.count, case.rounds))

    def expect(self, what: str, count: int) -> list[tuple[Any, ...]]:
        """The next ``count`` answers of kind ``what`` (a fast child may answer the next step
        before a slow one answers this one: those wait in ``pending``)."""
        answers = [answer for answer in self.pending if answer[0] == what][:count]
        for answer in answers:
            self.pending.remove(answer)
        while len(answers) < count:
            answer = self.results.get(timeout=120)
            (answers if answer[0] == what else self.pending).append(answer)
        return answers

    def close(self) -> None:
        for task_queue in self.tasks:
            task_queue.put(None)
        for proc in self.procs:
            proc.join(10)


def _rounds(children: Children, case: Case, send: Any) -> tuple[float, float]:
    """Best delivered rate and best send-loop rate, in messages per second."""
    payload = SMALL if case.size <= len(SMALL) else bytes(case.size)
    delivered, sending = 0.0, 0.0
    for round_number in range(case.rounds):
        start = time.monotonic()
        for _ in range(case.count):
            send(payload)
        sent = time.monotonic()
        ends = children.expect("round", case.subscribers)
        if round_number == 0:
            continue  # warm-up: the first large frames also pay for growing the heap
        last = max(answer[2] for answer in ends)
        delivered = max(delivered, case.count / (last - start))
        sending = max(sending, case.count / (sent - start))
    return delivered, sending


def measure_dtorch(children: Children, ipc: IpcDirectory, case: Case) -> tuple[float, float]:
    with Publisher(ipc.address("bench")) as publisher:
        children.start("dtorch", publisher.address, case)
        children.expect("ready", case.subscribers)
        publisher.wait_subscribers(case.subscribers, timeout_s=60)
        rates = _rounds(children, case, lambda payload: publisher.send(KIND, [payload]))
        children.expect("finished", case.subscribers)
    return rates


def measure_raw(children: Children, ipc: IpcDirectory, case: Case) -> tuple[float, float]:
    context: zmq.Context[Any] = zmq.Context()
    socket = context.socket(zmq.PUB)
    socket.setsockopt(zmq.SNDHWM, 0)
    socket.setsockopt(zmq.LINGER, 0)
    address = ipc.address("raw")
    socket.bind(address)
    large = case.size > len(SMALL)
    children.start("raw-zero-copy" if large else "raw", address, case)
    children.expect("ready", case.subscribers)
    time.sleep(0.5)  # the raw way around the subscription race
    ids = iter(range(1 << 62))

    def send(payload: bytes) -> None:
        frames = [next(ids).to_bytes(8, "little"), KIND, payload]
        socket.send_multipart(frames, copy=not large)

    rates = _rounds(children, case, send)
    children.expect("finished", case.subscribers)
    socket.close(0)
    context.term()
    return rates


def cases(quick: bool) -> list[Case]:
    rounds = 3 if quick else 6  # the first is a warm-up
    return [
        Case("small, 1 subscriber", 1, len(SMALL), 20_000 if quick else 50_000, rounds),
        Case("small, 4 subscribers", 4, len(SMALL), 10_000 if quick else 30_000, rounds),
        Case("16 MiB, 1 subscriber", 1, BIG, 10 if quick else 30, rounds),
    ]


def _report(case: Case, ours: tuple[float, float], raw: tuple[float, float]) -> None:
    if case.size == BIG:
        scale, unit = case.size / 1e9, "GB/s"
    else:
        scale, unit = 1e-3, "k msg/s"
    print(
        f"{case.name:22s} dtorch {ours[0] * scale:8.2f} {unit} (send {ours[1] * scale:8.2f})   "
        f"raw pyzmq {raw[0] * scale:8.2f} {unit} (send {raw[1] * scale:8.2f})   "
        f"ratio {ours[0] / raw[0]:.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer messages and rounds")
    quick = parser.parse_args().quick
    children = Children()
    try:
        with IpcDirectory() as ipc:
            for case in cases(quick):
                ours = measure_dtorch(children, ipc, case)
                raw = measure_raw(children, ipc, case)
                _report(case, ours, raw)
    finally:
        children.close()


if __name__ == "__main__":
    main()
