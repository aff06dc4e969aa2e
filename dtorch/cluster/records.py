"""What the controller and its workers tell each other through the rendezvous store: signed data.

The rendezvous store (``gated_store``) answers only holders of the cluster token, but its
gate's password travels in the clear: whoever reads the traffic can pass it, then read and
write any key. So nothing secret is ever written there, and every record is signed: ``HMAC-
SHA256(record key, key name + JSON)`` where the record key is derived from the cluster token
(the secret an operator gives the controller and every worker, ``DTORCH_CLUSTER_TOKEN`` or a
token file). A forged or altered record, or one copied under another key, is refused with
RendezvousError.

The program secret (``dtorch.transport.security``: the CURVE keys of every socket, the
network store's key) is per program: ``HMAC(token, nonce)`` with a random nonce that the
controller publishes in its ``ProgramRecord``. Only holders of the token derive it; a new
program on the same cluster gets a new secret.

Example:
    >>> token = bytes(32)
    >>> key = record_key(token)
    >>> worker = WorkerRecord(1, 2, "127.0.0.2", 4242, "cpu", 0)
    >>> read_record(key, "dtorch/worker/1", sign(key, "dtorch/worker/1", worker), WorkerRecord)
    WorkerRecord(rank=1, world_size=2, host='127.0.0.2', pid=4242, device_type='cpu', local_rank=0)
    >>> read_record(key, "dtorch/worker/0", sign(key, "dtorch/worker/1", worker), WorkerRecord)
    Traceback (most recent call last):
    ...
    dtorch.errors.RendezvousError: the record under 'dtorch/worker/0' ...
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
from dataclasses import dataclass
from typing import Any, TypeVar

from dtorch.errors import RendezvousError

R = TypeVar("R", bound="ProgramRecord | WorkerRecord | StartRecord | AbortRecord")

#: The longest record accepted (a start record lists every worker's host).
MAX_RECORD_BYTES = 1 << 20
_MAC_BYTES = 32


def record_key(token: bytes) -> bytes:
    """The key that signs a cluster's records, derived from its token."""
    return hmac.new(token, b"dtorch-rendezvous-records", hashlib.sha256).digest()


def program_secret(token: bytes, nonce: str) -> bytes:
    """The secret of the program that published ``nonce`` (32 bytes)."""
    return hmac.new(token, b"dtorch-program:" + nonce.encode(), hashlib.sha256).digest()


#: How a cluster's CPU collective groups exchange tensors (``ProgramRecord.cpu_collectives``):
#: "store" keeps them off Gloo, whose listeners authenticate nobody (shared memory between the
#: workers of a host, the authenticated network store across hosts); "gloo" runs groups of one
#: rank per worker on Gloo, on each worker's ``--host`` (the choice of ``CommTopology.cpu_gloo``).
CPU_COLLECTIVES = ("store", "gloo")


@dataclass(frozen=True, slots=True)
class ProgramRecord:
    """The controller's: its program's nonce and namespace, where its sockets listen, the
    store it is published in (``HOST:PORT``, the host as an IPv4 address: a copy of the
    record in another controller's store is refused by that store's workers), and how the
    workers' CPU groups exchange tensors (one of ``CPU_COLLECTIVES``)."""

    nonce: str
    store: str
    instance_id: str
    publisher: str
    puller: str
    beats_out: str
    beats_in: str
    cpu_collectives: str

    def __post_init__(self) -> None:
        check_cpu_collectives(self.cpu_collectives)


@dataclass(frozen=True, slots=True)
class WorkerRecord:
    """One worker's: ``rank`` of ``world_size``, the host address it binds, its pid, the
    device kind it runs and, for CUDA, its GPU (``local_rank``)."""

    rank: int
    world_size: int
    host: str
    pid: int
    device_type: str
    local_rank: int


@dataclass(frozen=True, slots=True)
class StartRecord:
    """The controller's, once every worker registered: every worker's host, by rank."""

    hosts: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class AbortRecord:
    """The controller's, when it refuses the cluster before starting it: why. Workers
    waiting for the start record exit with this reason."""

    reason: str


def check_cpu_collectives(choice: object) -> str:
    """``choice`` if it is one of ``CPU_COLLECTIVES``; RendezvousError saying what is accepted.

    Example:
        >>> check_cpu_collectives("gloo")
        'gloo'
    """
    if not isinstance(choice, str) or choice not in CPU_COLLECTIVES:
        raise RendezvousError(
            f"cpu_collectives is one of {list(CPU_COLLECTIVES)} (the network store and shared "
            f"memory, or Gloo), got {choice!r}"
        )
    return choice


_TYPES: dict[str, type] = {"int": int, "str": str, "tuple[str, ...]": tuple}


def _check_fields(cls: type[R], fields: Any) -> dict[str, Any]:
    """``fields`` as constructor arguments of ``cls``: exactly its fields, each of its type."""
    expected = {f.name: f.type for f in dataclasses.fields(cls)}
    if not isinstance(fields, dict) or set(fields) != set(expected):
        raise RendezvousError(f"a {cls.__name__} has the fields {sorted(expected)}")
    values = {}
    for name, annotation in expected.items():
        value = fields[name]
        kind = _TYPES[str(annotation)]
        if kind is tuple:
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise RendezvousError(f"{cls.__name__}.{name} is a list of strings")
            value = tuple(value)
        elif type(value) is not kind:
            raise RendezvousError(f"{cls.__name__}.{name} is a {kind.__name__}, got {value!r}")
        values[name] = value
    return values


def sign(
    key: bytes, name: str, record: ProgramRecord | WorkerRecord | StartRecord | AbortRecord
) -> bytes:
    """``record`` as stored under ``name``: its MAC, then its JSON."""
    body = json.dumps(dataclasses.asdict(record), sort_keys=True).encode()
    return hmac.new(key, name.encode() + b"\0" + body, hashlib.sha256).digest() + body


def read_record(key: bytes, name: str, data: bytes, cls: type[R]) -> R:
    """The ``cls`` record stored under ``name``; RendezvousError if forged, altered, or not
    such a record."""
    if not isinstance(data, bytes) or not _MAC_BYTES < len(data) <= MAX_RECORD_BYTES:
        raise RendezvousError(f"the record under {name!r} is not a dtorch record")
    mac, body = data[:_MAC_BYTES], data[_MAC_BYTES:]
    expected = hmac.new(key, name.encode() + b"\0" + body, hashlib.sha256).digest()
    if not hmac.compare_digest(mac, expected):
        raise RendezvousError(
            f"the record under {name!r} is not signed with this cluster's token (a forged "
            "record, one of an earlier program, or a controller and worker with different "
            "DTORCH_CLUSTER_TOKEN)"
        )
    try:
        fields = json.loads(body)
    except ValueError:
        raise RendezvousError(f"the record under {name!r} is not JSON") from None
    return cls(**_check_fields(cls, fields))
