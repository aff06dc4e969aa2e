"""The installed dtorch's version: ``dtorch.__version__``, and what peers of a cluster compare
(the rendezvous gate's password is derived from it, so a worker of another version is refused
at the handshake, not deep in a protocol it does not speak).

Example:
    >>> import dtorch
    >>> from dtorch.version import installed_version
    >>> installed_version() == dtorch.__version__
    True
"""

from __future__ import annotations

import functools
from importlib.metadata import PackageNotFoundError, version


@functools.cache
def installed_version() -> str:
    """The installed distribution's version (pyproject's ``version``); a source tree that
    is not installed reads as pyproject's."""
    try:
        return version("dtorch")
    except PackageNotFoundError:
        return "0.1.0"
