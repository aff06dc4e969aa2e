"""Helpers for the tests that feed ``dtorch.load_program`` rewritten program files: read a
saved file's header record, and seal a changed one back into the file with a correct prefix
(so that the load gets past the checksum to the checks under test)."""

from __future__ import annotations

import zlib
from pathlib import Path
from typing import Any

import dtorch
from dtorch.program import files
from dtorch.serialization import deserialize


def resealed(data: bytes, header: bytes, version: int = files.VERSION) -> bytes:
    """``data`` with its header replaced by ``header`` and a correct prefix."""
    prefix = files._PREFIX
    _, _, _, offset, _ = prefix.unpack_from(data)
    head = prefix.pack(files.MAGIC, version, zlib.crc32(header), offset, len(header))
    return head + data[prefix.size : offset] + header


def header(data: bytes) -> dict[str, Any]:
    """The decoded header record of a saved program file."""
    _, _, _, offset, _ = files._PREFIX.unpack_from(data)
    root: dict[str, Any] = deserialize(data[offset:])
    return root


def load_bytes(tmp_path: Path, data: bytes, graph: dtorch.Graph) -> dtorch.Program:
    """``dtorch.load_program`` of a file holding ``data``."""
    path = tmp_path / "bad.dtorch"
    path.write_bytes(data)
    return dtorch.load_program(path, graph=graph)
