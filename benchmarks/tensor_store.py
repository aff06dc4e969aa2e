"""TensorStore latency and bandwidth, each backend beside a baseline measured in the same run.

One *round* is the full handshake for one tensor: the producer's ``src_set``, the consumer's
``dest_get`` plus a copy of the value into a preallocated tensor (so every row moves the bytes
once into memory the consumer owns), its ``dest_finish_get``, and the producer's
``src_wait_until_get_finished``. Times are per round, measured on the producer.

* memory store, two threads of this process; baseline: ``torch`` copy into a preallocated
  tensor (the copy the consumer does anyway).
* file store, this process -> a spawned process; baseline: ``multiprocessing.Queue`` carrying
  the tensor, with an acknowledgement back (the same round trip).
* network store over loopback TCP, this process -> a spawned process; baseline: raw pyzmq
  PAIR sockets over the same loopback carrying the bytes, with an acknowledgement back (the
  transport the store is built on, without the store).

Run: ``.venv/bin/python benchmarks/tensor_store.py`` (``--quick`` for fewer iterations).
"""

from __future__ import annotations

import argparse
import multiprocessing
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import zmq

from dtorch.comm.namespace import CommNamespace
from dtorch.comm.store import StoreKind, TensorStore, open_store

SIZES = [4 << 10, 64 << 10, 1 << 20, 16 << 20, 64 << 20]
RESET_EVERY = 16  # keys are set once per round of the store: reset now and then


@dataclass(frozen=True)
class Plan:
    """What both sides of a measurement do: sizes and iterations per size."""

    sizes: tuple[int, ...]
    iterations: tuple[int, ...]


def make_plan(quick: bool) -> Plan:
    iterations = [50, 40, 20, 6, 3] if quick else [300, 200, 60, 15, 6]
    return Plan(tuple(SIZES), tuple(iterations))


def produce(store: TensorStore, plan: Plan) -> list[float]:
    """The producer side of every size; seconds per round."""
    results = []
    for size, count in zip(plan.sizes, plan.iterations, strict=True):
        tensor = torch.ones(size // 4)
        _produce_once(store, tensor, "warm")
        store.reset()
        start = time.perf_counter()
        for index in range(count):
            _produce_once(store, tensor, f"k{index % RESET_EVERY}")
            if index % RESET_EVERY == RESET_EVERY - 1:
                store.reset()
        results.append((time.perf_counter() - start) / count)
        store.reset()
    return results


def _produce_once(store: TensorStore, tensor: torch.Tensor, key: str) -> None:
    store.src_set(key, tensor, 1)
    store.src_wait_until_get_finished(key)


def consume(store: TensorStore, plan: Plan) -> None:
    """The consumer side of every size: get, copy into a preallocated tensor, finish."""
    for size, count in zip(plan.sizes, plan.iterations, strict=True):
        target = torch.empty(size // 4)
        _consume_once(store, target, "warm")
        store.reset()
        for index in range(count):
            _consume_once(store, target, f"k{index % RESET_EVERY}")
            if index % RESET_EVERY == RESET_EVERY - 1:
                store.reset()
        store.reset()


def _consume_once(store: TensorStore, target: torch.Tensor, key: str) -> None:
    target.copy_(store.dest_get(key))
    store.dest_finish_get(key)


def torch_copy_baseline(plan: Plan) -> list[float]:
    """Seconds per copy of each size into a preallocated tensor."""
    results = []
    for size, count in zip(plan.sizes, plan.iterations, strict=True):
        source, target = torch.ones(size // 4), torch.empty(size // 4)
        target.copy_(source)
        start = time.perf_counter()
        for _ in range(count):
            target.copy_(source)
        results.append((time.perf_counter() - start) / count)
    return results


def memory_store(plan: Plan) -> list[float]:
    namespace = CommNamespace.create()
    consumer = threading.Thread(target=_memory_consumer, args=(namespace, plan))
    consumer.start()
    with open_store(StoreKind.MEMORY, "bench", 2, 0, namespace=namespace) as store:
        results = produce(store, plan)
    consumer.join()
    return results


def _memory_consumer(namespace: CommNamespace, plan: Plan) -> None:
    with open_store(StoreKind.MEMORY, "bench", 2, 1, namespace=namespace) as store:
        consume(store, plan)


def child_consumer(kind: str, ns_id: str, secret: bytes, endpoint: str | None, plan: Plan) -> None:
    """Spawned process: the consumer of the file or network store (the program's namespace
    rebuilt from its id and secret)."""
    torch.set_num_threads(1)
    namespace = CommNamespace(ns_id, secret)
    with open_store(StoreKind(kind), "bench", 2, 1, namespace=namespace, endpoint=endpoint) as s:
        consume(s, plan)


def child_queue(inbox: Any, acks: Any, plan: Plan) -> None:
    """Spawned process: the consumer of the multiprocessing.Queue baseline."""
    torch.set_num_threads(1)
    for size, count in zip(plan.sizes, plan.iterations, strict=True):
        target = torch.empty(size // 4)
        for _ in range(count + 1):
            target.copy_(inbox.get())
            acks.put(None)


def child_zmq(endpoint: str, plan: Plan) -> None:
    """Spawned process: the consumer of the raw pyzmq baseline."""
    torch.set_num_threads(1)
    context: Any = zmq.Context.instance()
    pair = context.socket(zmq.PAIR)
    pair.connect(endpoint)
    for size, count in zip(plan.sizes, plan.iterations, strict=True):
        target = torch.empty(size // 4)
        for _ in range(count + 1):
            frame = pair.recv(copy=False)
            target.view(torch.uint8).numpy()[:] = np.frombuffer(frame.buffer, dtype=np.uint8)
            pair.send(b"")
    pair.close(0)


def zmq_baseline(plan: Plan) -> list[float]:
    context: Any = zmq.Context.instance()
    pair = context.socket(zmq.PAIR)
    port = pair.bind_to_random_port("tcp://127.0.0.1")
    child = multiprocessing.get_context("spawn").Process(
        target=child_zmq, args=(f"tcp://127.0.0.1:{port}", plan)
    )
    child.start()
    results = []
    for size, count in zip(plan.sizes, plan.iterations, strict=True):
        data = torch.ones(size // 4).view(torch.uint8).numpy()
        pair.send(data, copy=False)
        pair.recv()
        start = time.perf_counter()
        for _ in range(count):
            pair.send(data, copy=False)
            pair.recv()
        results.append((time.perf_counter() - start) / count)
    child.join()
    pair.close(0)
    return results


def process_store(kind: StoreKind, plan: Plan, endpoint: str | None) -> list[float]:
    namespace = CommNamespace.create()
    context = multiprocessing.get_context("spawn")
    args = (kind.value, namespace.instance_id, namespace.secret, endpoint, plan)
    child = context.Process(target=child_consumer, args=args)
    child.start()
    with open_store(kind, "bench", 2, 0, namespace=namespace, endpoint=endpoint) as store:
        results = produce(store, plan)
    child.join()
    return results


def queue_baseline(plan: Plan) -> list[float]:
    context = multiprocessing.get_context("spawn")
    inbox, acks = context.Queue(), context.Queue()
    child = context.Process(target=child_queue, args=(inbox, acks, plan))
    child.start()
    results = []
    for size, count in zip(plan.sizes, plan.iterations, strict=True):
        tensor = torch.ones(size // 4)
        inbox.put(tensor)
        acks.get()
        start = time.perf_counter()
        for _ in range(count):
            inbox.put(tensor)
            acks.get()
        results.append((time.perf_counter() - start) / count)
    child.join()
    return results


def free_endpoint() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"tcp://127.0.0.1:{probe.getsockname()[1]}"


def _cell(seconds: float, size: int) -> str:
    return f"{seconds * 1e6:10.1f} us {size / seconds / 1e9:6.2f} GB/s"


def _row(size: int, columns: list[list[float]], index: int) -> str:
    label = f"{size >> 10} KiB" if size < (1 << 20) else f"{size >> 20} MiB"
    return f"{label:>8} | " + " | ".join(_cell(column[index], size) for column in columns)


def print_table(title: str, names: list[str], columns: list[list[float]], plan: Plan) -> None:
    print(f"\n{title}")
    print(f"{'size':>8} | " + " | ".join(f"{name:>23}" for name in names) + " | ratio")
    for index, size in enumerate(plan.sizes):
        ratio = columns[0][index] / columns[1][index]
        print(_row(size, columns, index) + f" | {ratio:5.2f}x")


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer iterations")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    plan = make_plan(args.quick)
    print(f"command: {' '.join([sys.executable, *sys.argv])}")
    print(f"torch {torch.__version__}, intra-op threads 1, round = set/get+copy/finish/wait")
    runs: list[tuple[str, list[str], Callable[[], list[list[float]]]]] = [
        (
            "threads of one process: memory store vs torch copy (ratio = store / baseline)",
            ["memory store", "torch copy_ baseline"],
            lambda: [memory_store(plan), torch_copy_baseline(plan)],
        ),
        (
            "two processes: file store vs multiprocessing.Queue (ratio = store / baseline)",
            ["file store (shm)", "mp.Queue + ack baseline"],
            lambda: [process_store(StoreKind.FILE, plan, None), queue_baseline(plan)],
        ),
        (
            "two processes over loopback TCP: network store vs raw pyzmq (ratio = store / raw)",
            ["network store (zmq)", "raw zmq PAIR + ack"],
            lambda: [process_store(StoreKind.NETWORK, plan, free_endpoint()), zmq_baseline(plan)],
        ),
    ]
    for title, names, measure in runs:
        print_table(title, names, measure(), plan)


if __name__ == "__main__":
    main(sys.argv[1:])
