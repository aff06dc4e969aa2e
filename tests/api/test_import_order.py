"""Every public module imports on its own, first, in a fresh interpreter, and in any order.

A program's first line may be any of API.md's module paths (``import dtorch.nn.functional``,
``from dtorch.graph import Graph``...), so none may rely on another having been imported
first. One fresh interpreter imports torch (seconds), then forks one child per order; each
child imports dtorch's modules in that order from nothing and reports what failed. Forking
before dtorch is imported gives each child a clean ``sys.modules`` without paying torch's
import again.
"""

from __future__ import annotations

import ast
import json
import pkgutil
import random
import subprocess
import sys
from pathlib import Path

import pytest

import dtorch

#: API.md's module paths, and the modules of dtorch's public surface besides.
PUBLIC_MODULES = (
    "dtorch",
    "dtorch.distributed_spec",
    "dtorch.tensor",
    "dtorch.graph",
    "dtorch.global_option",
    "dtorch.nn",
    "dtorch.nn.functional",
    "dtorch.cluster",
    "dtorch.worker",
)

_CHILDREN = r"""
import json, os, sys, traceback
import torch  # once, in the parent: every child starts with torch and without dtorch
orders = json.loads(sys.argv[1])
failures = []
for order in orders:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        message = ""
        try:
            import importlib
            for name in order:
                importlib.import_module(name)
        except BaseException:
            message = f"{order}: {traceback.format_exc(limit=-3)}"
        os.write(write, message.encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        message = pipe.read().decode()
    os.waitpid(pid, 0)
    if message:
        failures.append(message)
print(json.dumps(failures))
"""


def _package_modules() -> list[str]:
    """Every module of the dtorch package except ``__main__`` entry points."""
    found = pkgutil.walk_packages(dtorch.__path__, prefix="dtorch.")
    return sorted(m.name for m in found if not m.name.endswith("__main__"))


def _orders() -> list[list[str]]:
    """Each public module first (then the other public ones), and three shuffled orders of
    the whole package (fixed seeds, so a failure reproduces). A child costs about dtorch's
    import (~0.5 s), so not every package module gets its own: the static test below covers
    them all."""
    every = _package_modules()
    orders = [[name, *(m for m in PUBLIC_MODULES if m != name)] for name in PUBLIC_MODULES]
    for seed in range(3):
        shuffled = list(every)
        random.Random(seed).shuffle(shuffled)
        orders.append(shuffled)
    return orders


@pytest.mark.timeout(240)
def test_every_module_imports_first_and_in_any_order() -> None:
    orders = _orders()
    done = subprocess.run(
        [sys.executable, "-c", _CHILDREN, json.dumps(orders)],
        capture_output=True,
        text=True,
        timeout=230,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    failures = json.loads(done.stdout.strip().splitlines()[-1])
    assert not failures, "\n".join(failures)


def test_the_public_modules_are_all_in_the_package() -> None:
    every = set(_package_modules()) | {"dtorch"}
    assert set(PUBLIC_MODULES) <= every


def _module_level_imports(path: Path, name: str, modules: set[str]) -> set[str]:
    """The dtorch modules ``name`` imports when it is executed: its module-level imports,
    outside ``if TYPE_CHECKING:`` (imports inside functions run later, not at import)."""
    found: set[str] = set()
    is_package = path.name == "__init__.py"

    def target(node: ast.ImportFrom) -> str:
        parts = name.split(".") if is_package else name.split(".")[:-1]
        base = parts[: len(parts) - node.level + 1] if node.level else []
        return ".".join([*base, node.module] if node.module else base)

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                continue
            if isinstance(node, (ast.If, ast.Try)):
                visit([*node.body, *getattr(node, "orelse", [])])
            elif isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                module = target(node)
                for alias in node.names:
                    sub = f"{module}.{alias.name}"
                    found.add(sub if sub in modules else module)

    visit(ast.parse(path.read_text()).body)
    return {m for m in found if m in modules and m != name}


def _import_graph() -> dict[str, set[str]]:
    root = Path(dtorch.__file__).parent
    paths = {}
    for path in root.rglob("*.py"):
        parts = path.relative_to(root.parent).with_suffix("").parts
        paths[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    names = set(paths)
    return {name: _module_level_imports(path, name, names) for name, path in paths.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        while work:
            node, edges = work[-1]
            child = next((e for e in edges if e not in index or e in stack), None)
            if child is not None and child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                work.append((child, iter(sorted(graph[child]))))
            elif child is not None:
                low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = stack[stack.index(node) :]
                    del stack[stack.index(node) :]
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert _cycles(graph) == [["a", "b", "c"]]


def test_no_module_level_import_cycle() -> None:
    """No dtorch module imports, at import time, a module that imports it back: every module
    can be imported first without relying on an import order pinned somewhere else."""
    assert _cycles(_import_graph()) == []


@pytest.mark.timeout(120)
def test_a_plain_import_reaches_every_module_path_and_public_name() -> None:
    """After ``import dtorch`` alone, API.md's module paths are attributes (a program may
    write ``dtorch.graph.Graph`` without importing ``dtorch.graph``), and the names it
    promises at the top level (``Parameter``, the errors a program catches) are there."""
    reached = (
        "dtorch.graph.Graph, dtorch.graph.VoidFutureCollect, dtorch.global_option.GlobalOption,"
        " dtorch.distributed_spec.Shard, dtorch.tensor.TensorFuture, dtorch.nn.functional.linear,"
        " dtorch.nn.parameter.Parameter, dtorch.Parameter, dtorch.WorkerDiedError,"
        " dtorch.KernelError, dtorch.GraphError"
    )
    script = f"import dtorch\nprint(all(x is not None for x in ({reached})))"
    done = subprocess.run(
        [sys.executable, "-c", script], check=False, capture_output=True, text=True, timeout=100
    )
    assert done.returncode == 0 and done.stdout.strip() == "True", done.stderr[-2000:]
    assert dtorch.Parameter is dtorch.nn.Parameter
    assert issubclass(dtorch.WorkerDiedError, dtorch.DTorchError)
