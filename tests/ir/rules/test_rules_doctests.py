"""The docstring examples of the rules and local-kernel modules run and hold."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import dtorch.ir.rules
import dtorch.kernels.local

pytestmark = pytest.mark.timeout(60)

_MODULES = sorted(
    [
        f"{package.__name__}.{info.name}"
        for package in (dtorch.ir.rules, dtorch.kernels.local)
        for info in pkgutil.iter_modules(package.__path__)
    ]
    + ["dtorch.ir.rules", "dtorch.kernels.table"]
)


@pytest.mark.parametrize("name", _MODULES)
def test_docstring_examples(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0


def test_every_module_has_examples() -> None:
    empty = [n for n in _MODULES if doctest.testmod(importlib.import_module(n)).attempted == 0]
    assert empty == []
