"""What dtorch asks of Python's cyclic garbage collector.

The runtime allocates a few small objects per recorded operator (an Operator, its operands, a
Tensor handle, queue items); those in flight between the client, the controller and the
streams survive young collections and get promoted, which makes Python run full collections
regularly. A full collection rescans every tracked object of the process - after ``import
torch`` well over 100,000 of them (modules, classes, functions) - and that costed about a
quarter of the per-operator time (benchmarks/op_overhead.py: 16.4 µs -> 12.3 µs per op).

So importing dtorch moves every object that exists at that moment to the collector's
permanent generation (``gc.freeze()``): they are never rescanned, and reference counting still
frees them as usual. The one consequence for a program: a reference cycle among objects that
existed before ``import dtorch`` is never collected. Set DTORCH_GC_FREEZE=0 to opt out.

Example:
    >>> import gc
    >>> from dtorch.options import GlobalOption
    >>> freeze_at_import() == GlobalOption.get_gc_freeze()
    True
"""

from __future__ import annotations

import gc

from dtorch.options import GlobalOption


def freeze_at_import() -> bool:
    """Freeze the objects that exist now unless DTORCH_GC_FREEZE=0; True if it did."""
    if not GlobalOption.get_gc_freeze():
        return False
    gc.freeze()
    return True
