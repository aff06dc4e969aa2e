"""The package's surface and its place in the layers: a sorted ``__all__`` that names real
objects, and no dtorch import but ``dtorch.errors``, ``dtorch.options`` and its own modules."""

from __future__ import annotations

import ast
import pathlib

from dtorch import transport

ALLOWED = ("dtorch.errors", "dtorch.options", "dtorch.transport")


def test_all_is_sorted_and_complete():
    assert transport.__all__ == sorted(transport.__all__)
    assert all(hasattr(transport, name) for name in transport.__all__)
    assert transport.LARGE_FRAME == 64 * 1024


def _dtorch_imports(path: pathlib.Path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.append(node.module)
        elif isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
    return [name for name in names if name == "dtorch" or name.startswith("dtorch.")]


def test_transport_imports_only_errors_options_and_itself():
    folder = pathlib.Path(transport.__file__).parent
    for path in sorted(folder.glob("*.py")):
        for name in _dtorch_imports(path):
            assert name.startswith(ALLOWED), f"{path.name} imports {name}"
