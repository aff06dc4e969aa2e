"""Shared fixtures: a fresh graph per test, closed afterwards."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import dtorch


@pytest.fixture
def graph() -> Iterator[dtorch.Graph]:
    """A graph of its own for one test (its threads stop at the end of the test)."""
    g = dtorch.Graph()
    try:
        yield g
    finally:
        g.close()
