"""Every docstring example in the dtorch package runs and prints what it says."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import dtorch

MODULES = sorted(info.name for info in pkgutil.walk_packages(dtorch.__path__, prefix="dtorch."))


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(name)  # our own package's modules, listed above
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS, verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name}"
