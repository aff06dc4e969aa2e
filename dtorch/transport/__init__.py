"""The ZeroMQ layer between the controller and its worker processes: it moves bytes only.

Two channels (spec 004): PUB-SUB carries each batch from the controller to every worker, sent
once, in order, every message numbered (``Publisher`` -> ``Subscriber``, records ``Message``);
PUSH-PULL carries the workers' reports back, each tagged with its sender (``Pusher`` ->
``Puller``, records ``Envelope``). Sockets live in an ``IpcDirectory`` (mode 0700). Every wait
without an explicit timeout uses ``GlobalOption.get_zmq_timeout_second()``. The ``InProc*``
twins behave the same without sockets, for unit tests; the ``*Like`` protocols type code
against either. This package knows nothing of tensors or operators and imports only
``dtorch.errors`` and ``dtorch.options`` from dtorch.

Start-up, so that no first message is lost (``dtorch.transport.pubsub`` says why): every
worker constructs its ``Subscriber`` (which returns once connected) and then sends
``b"ready"`` through its ``Pusher``; the controller calls ``wait_subscribers(workers)``,
collects one ready ``Envelope`` per worker, and only then publishes.

Example:
    >>> from dtorch.transport import InProcPublisher, InProcPuller
    >>> publisher, puller = InProcPublisher(), InProcPuller()
    >>> subscriber, pusher = publisher.subscribe(), puller.pusher(0)   # the worker's side
    >>> pusher.send(b"ready", [b"cpu:0"])
    >>> publisher.wait_subscribers(1); puller.recv().kind                 # the controller's
    b'ready'
    >>> publisher.send(b"execute", [b"batch"]), subscriber.recv().id
    (0, 0)
"""

from dtorch.transport.inproc import InProcPublisher, InProcPuller, InProcPusher, InProcSubscriber
from dtorch.transport.ipc import IpcDirectory
from dtorch.transport.protocols import PublisherLike, PullerLike, PusherLike, SubscriberLike
from dtorch.transport.pubsub import Publisher, Subscriber
from dtorch.transport.pushpull import Puller, Pusher
from dtorch.transport.wire import LARGE_FRAME, Envelope, Message

__all__ = [
    "Envelope",
    "InProcPublisher",
    "InProcPuller",
    "InProcPusher",
    "InProcSubscriber",
    "IpcDirectory",
    "LARGE_FRAME",
    "Message",
    "Publisher",
    "PublisherLike",
    "Puller",
    "PullerLike",
    "Pusher",
    "PusherLike",
    "Subscriber",
    "SubscriberLike",
]
