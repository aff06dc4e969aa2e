"""The docstring examples of the store, namespace and shared-memory modules run as written."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "dtorch.comm",
    "dtorch.comm.namespace",
    "dtorch.comm.shm",
    "dtorch.comm.store",
    "dtorch.comm.store.base",
    "dtorch.comm.store.factory",
    "dtorch.comm.store.memory",
    "dtorch.comm.store.file",
    "dtorch.comm.store.file_control",
    "dtorch.comm.store.network",
    "dtorch.comm.store.network_coordinator",
]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", MODULES)
def test_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
