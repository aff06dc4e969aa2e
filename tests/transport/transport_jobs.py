"""Module-level jobs for the cross-process transport tests (the pool pickles them by name)."""

from __future__ import annotations

import hashlib
import os

from dtorch.transport import Pusher, Subscriber


def worker_loop(publisher: str, puller: str, rank: int, timeout_s: float) -> list[int]:
    """A worker's life: connect, report ready, receive until b"destroy", report a digest of
    every part received; the ids seen."""
    with (
        Subscriber(publisher, timeout_s=timeout_s) as subscriber,
        Pusher(puller, rank, timeout_s=timeout_s) as pusher,
    ):
        pusher.send(b"ready", [str(os.getpid()).encode()])
        ids, digest = [], hashlib.sha256()
        while True:
            message = subscriber.recv(timeout_s)
            ids.append(message.id)
            if message.kind == b"destroy":
                break
            for part in message.parts:
                digest.update(part)
        pusher.send(b"done", [digest.digest()])
    return ids
