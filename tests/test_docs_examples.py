"""The Python blocks of the README and docs/ run, and print what their comments say they print.

Each block runs in a namespace of its own, in a temporary working directory (blocks save
files there), on the test's graph as the default one (the process-mode block makes its own
graph and closes it). A block that cannot run here is listed in ``_NOT_RUN`` with the
reason, so a new block is run unless someone says why not."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

import dtorch

pytestmark = pytest.mark.timeout(120)

_ROOT = Path(__file__).resolve().parent.parent
_FILES = ("README.md", *sorted(f"docs/{p.name}" for p in (_ROOT / "docs").glob("*.md")))
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)

#: Blocks that cannot run on one machine as they stand, and why.
_NOT_RUN = {
    ("README.md", 2): "a part of examples/program.py, which tests/program/test_files.py runs",
    ("docs/multi_host.md", 0): "serves a store on another host's address; tests/cluster run it",
}

#: What a block's prints must contain, as its comments say.
_PRINTS = {
    ("README.md", 0): ["[Shard(dim=0), Shard(dim=1)]", "torch.Size([8, 32])"],
    ("README.md", 1): ["[0.0, 2.0, 4.0, 6.0, 8.0, 10.0, 12.0, 14.0]"],
    ("docs/programs.md", 2): ["collectives per call: all_reduce 1"],
}


def _blocks() -> list[tuple[str, int, str]]:
    return [
        (name, index, code)
        for name in _FILES
        for index, code in enumerate(_BLOCK.findall((_ROOT / name).read_text()))
    ]


_RUN = [b for b in _blocks() if b[:2] not in _NOT_RUN]
_OWN_GRAPH = [b for b in _RUN if "dtorch.Graph(" in b[2]]  # run once, not per runner
_ON_GRAPH = [b for b in _RUN if b not in _OWN_GRAPH]


def _ids(blocks: list[tuple[str, int, str]]) -> list[str]:
    return [f"{name}-{index}" for name, index, _ in blocks]


def test_every_block_is_run_or_excused() -> None:
    """The excused blocks exist (a moved block is not excused by accident), and at least the
    README's first two run."""
    found = {b[:2] for b in _blocks()}
    assert set(_NOT_RUN) <= found and set(_PRINTS) <= found
    assert {("README.md", 0), ("README.md", 1)} <= {b[:2] for b in _RUN}


def _run_block(
    name: str, index: int, code: str, folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(folder)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, f"{name} block {index}", "exec"), {"__name__": "__docs__"})
    for wanted in _PRINTS.get((name, index), []):
        assert wanted in printed.getvalue(), (wanted, printed.getvalue())


@pytest.mark.parametrize(("name", "index", "code"), _ON_GRAPH, ids=_ids(_ON_GRAPH))
def test_block_runs_and_prints_what_it_says(
    name: str,
    index: int,
    code: str,
    graph: dtorch.Graph,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _run_block(name, index, code, tmp_path, monkeypatch)


@pytest.mark.parametrize(("name", "index", "code"), _OWN_GRAPH, ids=_ids(_OWN_GRAPH))
def test_block_with_its_own_graph_runs(
    name: str, index: int, code: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A block that makes (and closes) its own graph, such as the process-mode one."""
    _run_block(name, index, code, tmp_path, monkeypatch)
