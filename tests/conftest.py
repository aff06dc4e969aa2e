"""Shared fixtures: a fresh graph per test, and one pool of spawned worker processes.

The suite leaves nothing in the temp dir: pytest's ``tmp_path`` root and torch's compile cache
(which torch creates as ``/tmp/torchinductor_<user>`` when ``torch._dynamo`` is first imported,
as a meta-tensor ``einsum`` does inside the einsum rule) both live in one directory of the
session's, removed when the session ends.
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

_SESSION_DIR = Path(tempfile.mkdtemp(prefix="dtorch-tests-"))
_CREATOR = os.getpid()


def _remove_session_dir() -> None:
    # pytest_unconfigure does not run when pytest stops at a usage error after importing this
    # file; only the process that made the directory removes it
    if os.getpid() == _CREATOR:
        shutil.rmtree(_SESSION_DIR, ignore_errors=True)


atexit.register(_remove_session_dir)
# Before torch._dynamo is imported (dtorch imports only torch); spawned workers inherit it.
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(_SESSION_DIR / "torch-cache"))

import dtorch  # noqa: E402 - after the cache dir is chosen
from dtorch.ir.opkind import OpKind  # noqa: E402
from tests.process_pool import ProcessPool  # noqa: E402
from tests.runners import RUNNERS, PoolKeeper  # noqa: E402
from tests.sampling import deselect  # noqa: E402

POOL_WORKERS = 4  # the most processes one test uses (group, store and convert tests)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """``tmp_path`` directories under the session's directory (unless --basetemp is given),
    and Python's Ctrl-C handler: a non-interactive shell starts a background job (``make test
    &``) with SIGINT ignored, which the Ctrl-C tests' processes would inherit (6 failed so)."""
    if config.option.basetemp is None:
        config.option.basetemp = str(_SESSION_DIR / "pytest")
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_unconfigure(config: pytest.Config) -> None:
    _remove_session_dir()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--every-case",
        action="store_true",
        help="run every parametrized case, none left out of a sample (tests/sampling.py)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The default run leaves some cases out (``tests/sampling.py``)."""
    deselect(config, items)


@pytest.fixture(scope="session")
def worker_pools() -> Iterator[PoolKeeper]:
    """The worker processes every process-mode graph of the run shares (see tests/runners)."""
    keeper = PoolKeeper()
    try:
        yield keeper
    finally:
        keeper.close()


@pytest.fixture(params=RUNNERS)
def runner(request: pytest.FixtureRequest) -> str:
    """The runner under test: ``thread`` or ``process``."""
    return str(request.param)


@pytest.fixture
def make_graph(runner: str, worker_pools: PoolKeeper) -> Iterator[Callable[[], dtorch.Graph]]:
    """Makes graphs of the runner under test; every one is closed at the end of the test."""
    made: list[dtorch.Graph] = []

    def make() -> dtorch.Graph:
        made.append(worker_pools.graph(runner))
        return made[-1]

    try:
        yield make
    finally:
        for g in reversed(made):
            g.close()


@pytest.fixture
def graph(make_graph: Callable[[], dtorch.Graph]) -> Iterator[dtorch.Graph]:
    """A graph of its own for one test, of the runner under test, and the test thread's
    default graph meanwhile (tests that create tensors without ``graph=`` use it too)."""
    with make_graph().as_default() as g:
        yield g


@pytest.fixture
def kinds(graph: dtorch.Graph, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[OpKind]]:
    """The kinds of the operators ``graph`` records from here on (tests that count the
    operators a call records)."""
    seen: list[OpKind] = []
    submit = graph.executor.submit

    def spy(item: Any) -> Any:
        seen.append(item[0].param.kind)
        return submit(item)

    monkeypatch.setattr(graph.executor, "submit", spy)
    yield seen


@pytest.fixture(scope="session")
def process_pool() -> Iterator[ProcessPool]:
    """Spawned worker processes shared by every test that needs processes (torch imports once
    in each); every job cleans up after itself, so tests share no state."""
    with ProcessPool(POOL_WORKERS) as pool:
        pool.warm()
        yield pool
