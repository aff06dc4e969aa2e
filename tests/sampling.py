"""Which parametrized cases a default run leaves out, to keep the suite in its 20-minute
budget on 2 cores: where one backend already runs every case of a test, another backend runs
a stable sample of them, chosen by a CRC of the case's id (the same cases in every run).

* ``tests/api`` and ``tests/nn`` run every case in thread mode. In process mode, a test with
  at least ``SAMPLE_FROM`` process-mode cases runs one in ``PROCESS_SAMPLE_EVERY`` of them
  (at least one): what process mode adds (the wire, the workers, collectives between
  processes) each kept case exercises alike, and a process-mode fetch costs about twice a
  thread-mode one. Tests with fewer cases run them all.
* ``tests/cluster``'s ``test_api_*`` modules import the API suite's tests; of their
  parametrized cases one in ``CLUSTER_SAMPLE_EVERY`` runs there.

``pytest --every-case`` runs every case; a case named on the command line (``path::test[id]``)
always runs.
"""

from __future__ import annotations

import zlib
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

import pytest

#: One process-mode case in this many runs, of a test with at least SAMPLE_FROM of them.
PROCESS_SAMPLE_EVERY = 2
SAMPLE_FROM = 4
#: One parametrized case of an imported API test in this many runs on the cluster.
CLUSTER_SAMPLE_EVERY = 2
#: The folders whose process-mode cases are sampled, and the cluster's folder.
_SWEPT = ("api", "nn")
_CLUSTER = "cluster"


def deselect(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Drop the cases outside the samples from ``items`` (the session's), telling pytest."""
    if config.getoption("every_case"):
        return
    named = {arg for arg in config.args if "[" in arg}
    dropped = [item for item in _sampled_out(items) if not _named(item, named)]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        gone = set(map(id, dropped))
        items[:] = [item for item in items if id(item) not in gone]


def _named(item: pytest.Item, named: set[str]) -> bool:
    # the command line names a case as a path (relative or not) and the id after "::"
    return any(arg.endswith(item.nodeid) or item.nodeid.endswith(arg) for arg in named)


def _sampled_out(items: Iterable[pytest.Item]) -> list[pytest.Item]:
    """The cases outside both samples (see the module docstring)."""
    out: list[pytest.Item] = []
    groups: dict[str, list[pytest.Item]] = defaultdict(list)
    for item in items:
        params = getattr(item, "callspec", None)
        if params is None:
            continue
        folder, name = _where(item)
        if folder == _CLUSTER and name.startswith("test_api_"):
            if not _kept(item.nodeid, CLUSTER_SAMPLE_EVERY):
                out.append(item)
        elif folder in _SWEPT and params.params.get("runner") == "process":
            groups[item.nodeid.split("[", 1)[0]].append(item)
    for cases in groups.values():
        if len(cases) >= SAMPLE_FROM:
            dropped = [case for case in cases if not _kept(case.nodeid, PROCESS_SAMPLE_EVERY)]
            if len(dropped) == len(cases):  # every test keeps a process-mode case
                dropped.pop(0)
            out += dropped
    return out


def _where(item: pytest.Item) -> tuple[str, str]:
    # the folder under tests/ and the module's file name
    path = Path(str(item.path))
    return path.parent.name, path.name


def _kept(nodeid: str, every: int) -> bool:
    return zlib.crc32(nodeid.encode()) % every == 0
