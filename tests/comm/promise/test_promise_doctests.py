"""The docstring examples of the promise modules run as written."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "dtorch.comm.promise",
    "dtorch.comm.promise.base",
    "dtorch.comm.promise.memory",
    "dtorch.comm.promise.futures",
    "dtorch.comm.promise.collect",
    "dtorch.comm.promise.error_table",
    "dtorch.comm.promise.file",
    "dtorch.comm.promise.factory",
]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", MODULES)
def test_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
