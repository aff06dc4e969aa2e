"""Program files: ``program.save(path)`` and ``dtorch.load_program(path)``.

A file holds a traced program's spec (its body's operators with their params and spans, the
operands' metadata, meshes as shapes, the argument and result trees, its name) and the full
value of each constant, so another process can load and run it. The layout::

    offset 0    b"\\x89DTPROG\\n", version (u32), CRC-32 of the header (u32), header offset
                (u64), header size (u64)                                 -- little endian
    offset 64   each constant's raw bytes (row-major, as ``to_torch`` gives it), 64-byte
                aligned, in the spec's order
    then        the header: one codec payload (``dtorch.serialization.serialize``) of a dict
                tagged ``"format": "dtorch.program"`` holding the spec and each
                constant's size and CRC-32

Saving fetches one constant at a time and writes it out before the next, so it needs about
one constant's memory beyond the program; the header goes last (it holds the checksums) and
the file is renamed into place once complete. Loading checks everything before it creates
anything on the graph (any problem with the file is a DeserializationError saying what is
wrong; a newer version is an UnsupportedVersionError), maps the file and creates the
constants one at a time from views of the mapping (the devices copy each once; its CRC is
checked meanwhile), waits for the constants' own values (not for the whole graph, whose
earlier failures are not the load's), pins the constants for the program and renames
every id of the body with fresh ones of the graph. Meshes are remapped onto ``device_mesh``
as ``dtorch.program.remap`` describes.

Partial constants are saved as their full value (``to_torch`` sums them) and created Partial
again: the value sits on the first device of each Partial mesh dim and zeros elsewhere, so
their sum, which is all any operator depends on, is the saved one.

Example:
    >>> import os, tempfile, dtorch
    >>> w = dtorch.arange(3.0)
    >>> path = os.path.join(tempfile.mkdtemp(), "p.dtorch")
    >>> dtorch.trace(lambda x: x * w + 1, dtorch.zeros(3)).save(path)
    >>> program = dtorch.load_program(path)
    >>> program(dtorch.ones(3)).tolist()
    [1.0, 2.0, 3.0]
    >>> os.remove(path); os.rmdir(os.path.dirname(path))
"""

from __future__ import annotations

import contextlib
import errno
import io
import mmap
import os
import secrets
import struct
import zlib
from collections.abc import Iterator
from typing import IO, TYPE_CHECKING, Any

from dtorch.api.create import create, graph_or_default
from dtorch.api.graph import Graph
from dtorch.api.settled import settled
from dtorch.api.tensor import Tensor
from dtorch.errors import (
    DeserializationError,
    DTorchError,
    GraphError,
    SerializationError,
    UnsupportedVersionError,
)
from dtorch.ir.dtypes import SUB_BYTE_DTYPES
from dtorch.ir.mesh import DeviceMesh
from dtorch.ir.operator import Operand
from dtorch.ir.opkind import CreateKind
from dtorch.ir.params import SubGraphParam
from dtorch.ir.placement import normalize_placements
from dtorch.ir.sharding import capped_product
from dtorch.ir.subsplit import check_unmarked
from dtorch.program.remap import MeshMap, mesh_map, moved_operand, rebind, spec_meshes
from dtorch.program.spec import ProgramSpec
from dtorch.program.spec_checks import check_items, check_printable, check_spec, check_type
from dtorch.program.summary import plural
from dtorch.serialization import deserialize, serialize
from dtorch.serialization.files import check_room, open_regular
from dtorch.serialization.tensors import restore_tensor, tensor_bytes

if TYPE_CHECKING:
    from dtorch.program.program import Program

PathLike = str | os.PathLike[str]

MAGIC = b"\x89DTPROG\n"
#: The program-file version this dtorch writes; it reads every version from 1 up to it.
#: Version 2 added ``any_keyword_order`` (version 1 files load with keywords in traced order).
VERSION = 2
FORMAT_TAG = "dtorch.program"
_PREFIX = struct.Struct("<8sIIQQ")  # magic, version, header CRC-32, header offset, size
DATA_START = 64
ALIGN = 64
_CHUNK = 1 << 20  # the header is checked in reads of this size before it is read whole
#: The largest header read (about 10 million operators of a real program): a header claiming
#: more is refused before anything is held.
MAX_HEADER_BYTES = 1 << 30
#: More bytes than any file holds: a constant's size is only computed up to here.
_MAX_BYTES = 1 << 63

_FIELDS = (
    "format",
    "name",
    "body",
    "inputs",
    "constants",
    "args",
    "result",
    "results",
    "any_keyword_order",
    "sizes",
    "crcs",
)
#: What a version 1 header holds (no keyword-order flag).
_FIELDS_1 = tuple(f for f in _FIELDS if f != "any_keyword_order")

#: A handle's ``_base`` that is not None: the handle releases nothing when it goes.
_NOT_OWNER: Any = object()


# --- saving ---------------------------------------------------------------------------------
def save_program(program: Program, path: PathLike) -> None:
    """Write ``program`` to ``path`` (replacing it atomically); see the module docstring.

    SerializationError for a constant whose placements a load could not create again;
    GraphError when the program's graph is closed (its constants' values are gone)."""
    spec = program.spec
    if program.graph.closed and spec.constants:
        raise GraphError(
            f"Program.save: Graph {program.graph.id} is closed, and with it the values of "
            f"the program's {plural(len(spec.constants), 'constant')}; save before closing"
        )
    for index, constant in enumerate(spec.constants):
        _check_creatable(constant, index)
    given = os.fspath(path)
    target = os.path.realpath(given)  # a symlink's target is written, as torch.save does
    if os.path.isdir(target):  # before the constants are fetched and written
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), given)
    try:
        handle, temporary = _temporary(os.path.dirname(target))
    except OSError as error:  # the user's path, not the temporary file's beside it
        raise type(error)(error.errno, error.strerror, given) from None
    try:
        with os.fdopen(handle, "wb") as out:
            _write(out, program.graph, spec, program.current_constants())
        os.replace(temporary, target)
    except BaseException as error:
        os.unlink(temporary)
        if isinstance(error, OSError) and error.filename == temporary:
            raise type(error)(error.errno, error.strerror, given) from None
        raise


def _temporary(directory: str) -> tuple[int, str]:
    """A new file in ``directory`` (renamed over the target once written), opened for
    writing with mode 0o666 less the umask, as ``open`` (and ``torch.save``) would make the
    target itself; ``tempfile.mkstemp`` would make it 0o600 whatever the umask."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
    for _ in range(100):
        name = os.path.join(directory, f".dtorch-{secrets.token_hex(8)}")
        try:
            return os.open(name, flags, 0o666), name
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name in {directory}")


def _write(out: IO[bytes], graph: Graph, spec: ProgramSpec, constants: tuple[Operand, ...]) -> None:
    """The file: the values of ``constants`` (what the program reads now), then the header
    (with ``spec``'s traced constants, which have the same layouts)."""
    out.write(bytes(DATA_START))
    written = [_write_constant(out, graph, c) for c in constants]
    offset = out.tell()
    header = serialize(_record(spec, tuple(n for n, _ in written), tuple(c for _, c in written)))
    out.write(header)
    out.seek(0)
    out.write(_PREFIX.pack(MAGIC, VERSION, zlib.crc32(header), offset, len(header)))


def _write_constant(out: IO[bytes], graph: Graph, constant: Operand) -> tuple[int, int]:
    """Append ``constant``'s full value at the next aligned offset; its size and CRC-32."""
    out.write(bytes(-out.tell() % ALIGN))
    data = tensor_bytes(_fetch(graph, constant))
    out.write(data)
    return data.nbytes, zlib.crc32(data)


def _fetch(graph: Graph, operand: Operand) -> Any:
    """The full value of ``operand`` (a pinned constant)."""
    return _borrowed(graph, operand).to_torch()


def _borrowed(graph: Graph, operand: Operand) -> Tensor:
    """A handle of ``operand`` that does not own it (a pin keeps it; this handle's going must
    not release it)."""
    handle = Tensor._wrap(graph, operand)
    handle._base = _NOT_OWNER
    return handle


def _record(spec: ProgramSpec, sizes: tuple[int, ...], crcs: tuple[int, ...]) -> dict[str, Any]:
    return {
        "format": FORMAT_TAG,
        "name": spec.name,
        "body": spec.body,
        "inputs": spec.inputs,
        "constants": spec.constants,
        "args": spec.args,
        "result": spec.result,
        "results": spec.results,
        "any_keyword_order": spec.any_keyword_order,
        "sizes": sizes,
        "crcs": crcs,
    }


def _check_creatable(constant: Operand, index: int) -> None:
    """SerializationError unless a load can create ``constant`` with its placements."""
    placements = constant.placements
    try:
        check_unmarked("save", placements, "a constant")
        same = normalize_placements(placements, constant.mesh.shape, len(constant.shape))
    except DTorchError as exc:
        raise SerializationError(f"cannot save constant {index}: {exc}") from None
    if same != placements:
        raise SerializationError(
            f"cannot save constant {index} ({constant.describe()}): its placements are not "
            f"in the form a tensor is created with ({list(same)}); redistribute it first"
        )


# --- loading --------------------------------------------------------------------------------
def load_program(
    path: PathLike, device_mesh: DeviceMesh | None = None, graph: Graph | None = None
) -> Program:
    """The program saved at ``path``, on ``graph`` (the thread's default graph when None).

    Without ``device_mesh`` it runs on the devices it was saved with; with one (of the shape of
    the program's largest mesh) on that mesh's devices (see ``dtorch.program.remap``).
    DeserializationError for any problem with the file, MeshError when ``device_mesh`` does not
    fit, OSError when the file cannot be read.

    Example:
        >>> import os, tempfile, dtorch
        >>> mesh = dtorch.init_device_mesh("cpu", 2)
        >>> x = dtorch.ones(4, device_mesh=mesh, placements=[dtorch.Shard(0)])
        >>> path = os.path.join(tempfile.mkdtemp(), "p.dtorch")
        >>> dtorch.trace(lambda t: {"y": [t * 2]}, x).save(path)
        >>> moved = dtorch.DeviceMesh("cpu", [2, 3])
        >>> program = dtorch.load_program(path, device_mesh=moved)
        >>> x2 = dtorch.ones(4, device_mesh=moved, placements=[dtorch.Shard(0)])
        >>> program(x2)["y"][0].tolist(), program.spec.inputs[0].mesh == moved
        ([2.0, 2.0, 2.0, 2.0], True)
        >>> os.remove(path); os.rmdir(os.path.dirname(path))
    """
    from dtorch.program.program import Program  # program.py imports this module's users

    g = graph_or_default(graph)
    if g.closed:  # before the file is read: a program on it could never run
        raise GraphError(f"load_program: Graph {g._id} is closed; load onto an open graph")
    name = repr(os.fspath(path))
    with open_regular(path, "a program file (Program.save), a regular file") as source:
        try:
            offset, header, version = _read_header(source)
            spec, crcs = _spec_of(deserialize(header), version)
            _check_layout(spec, offset)
        except DeserializationError as exc:
            raise type(exc)(f"{name}: {exc}") from None
        meshes = mesh_map(spec_meshes(spec), device_mesh)
        _check_room(spec, meshes, g, name)
        constants = _create_constants(source, spec, crcs, g, meshes, name)
    try:
        loaded = rebind(spec, g._operand_ids, iter(g.new_operator_id, None), meshes, constants)
    except BaseException:
        g.executor.unpin(tuple(c.id for c in constants))
        raise
    return Program(g, loaded)


def _bad(message: str) -> DeserializationError:
    return DeserializationError(message)


def _read_header(source: io.BufferedReader) -> tuple[int, bytes, int]:
    """The header's offset, bytes and version, after checking the prefix and the CRC."""
    size = os.fstat(source.fileno()).st_size
    prefix = source.read(_PREFIX.size)
    if prefix[: len(MAGIC)] != MAGIC[: len(prefix)] or not prefix:
        raise _bad(f"not a dtorch program file: it starts with {prefix[:8]!r}, expected {MAGIC!r}")
    if len(prefix) < _PREFIX.size:
        raise _bad(
            f"the file is truncated: it holds {size} bytes, its prefix alone takes {_PREFIX.size}"
        )
    _, version, crc, offset, length = _PREFIX.unpack(prefix)
    if version > VERSION:
        raise UnsupportedVersionError(
            f"a program file of version {version}; this dtorch reads versions 1 to {VERSION} "
            "(load it with a newer dtorch)"
        )
    if version < 1:
        raise _bad(f"a program file of version {version} (versions start at 1)")
    if length > MAX_HEADER_BYTES:
        raise _bad(
            f"a header of {length} bytes: more than a program file holds (at most "
            f"{MAX_HEADER_BYTES}; the file is corrupt)"
        )
    if offset < DATA_START or offset + length != size:
        raise _bad(
            f"the header at {offset} ({length} bytes) does not end the file of {size} bytes "
            "(the file is truncated or corrupt)"
        )
    source.seek(offset)
    if _crc_of(source, length) != crc:  # before the header is held: it may claim any size
        raise _bad("the header's checksum does not match (the file is corrupt)")
    source.seek(offset)
    header = source.read(length)
    if len(header) != length or zlib.crc32(header) != crc:  # the bytes held: checked too
        raise _bad("the header changed while it was read (replace program files by renaming)")
    return offset, header, version


def _crc_of(source: io.BufferedReader, length: int) -> int | None:
    """The CRC-32 of ``source``'s next ``length`` bytes, read in chunks; None if it ends first."""
    crc = 0
    while length:
        chunk = source.read(min(length, _CHUNK))
        if not chunk:
            return None
        crc, length = zlib.crc32(chunk, crc), length - len(chunk)
    return crc


def _spec_of(root: Any, version: int) -> tuple[ProgramSpec, tuple[int, ...]]:
    """The checked spec and the constants' CRCs of a decoded header of ``version``."""
    fields = _FIELDS if version >= 2 else _FIELDS_1
    if type(root) is not dict or set(root) != set(fields):
        raise _bad(f"the header is not a program record (fields {fields})")
    if root["format"] != FORMAT_TAG:
        raise _bad(f"the header is tagged {root['format']!r}, expected {FORMAT_TAG!r}")
    check_type(root["name"], str, "name")
    check_printable(root["name"], "the program's name")
    check_type(root["body"], SubGraphParam, "body")
    for key in ("inputs", "constants", "results"):
        check_items(root[key], Operand, key)
        for operand in root[key]:
            if operand.dtype in SUB_BYTE_DTYPES:
                raise _bad(f"{key}: {operand.describe()}: no dtorch tensor holds that dtype")
    check_items(root["sizes"], int, "sizes")
    check_items(root["crcs"], int, "crcs")
    # a version 1 file does not say whether fn took **kwargs: the traced order, which is safe
    root.setdefault("any_keyword_order", False)
    check_type(root["any_keyword_order"], bool, "any_keyword_order")
    spec = ProgramSpec(*(root[key] for key in _FIELDS[1:-2]))
    sizes, crcs = root["sizes"], root["crcs"]
    if not len(sizes) == len(crcs) == len(spec.constants):
        raise _bad(f"{len(sizes)} sizes, {len(crcs)} checksums, {len(spec.constants)} constants")
    for index, (size, constant) in enumerate(zip(sizes, spec.constants, strict=True)):
        needed = _nbytes(constant)
        if size != needed:
            shown = needed if needed <= _MAX_BYTES else f"more than {_MAX_BYTES}"
            raise _bad(
                f"constant {index}: the file holds {size} bytes of its value, its metadata "
                f"({_described(constant)}) needs {shown}"
            )
    check_spec(spec)
    return spec, crcs


def _nbytes(operand: Operand) -> int:
    """The bytes of ``operand``'s value; above ``_MAX_BYTES`` (no file holds that many),
    some number above it, found in time linear in the shape's length, whatever it holds."""
    return capped_product(operand.shape, _MAX_BYTES) * operand.dtype.itemsize


def _described(operand: Operand) -> str:
    """``operand.describe()``, bounded: a shape read from a file may have any length."""
    text = operand.describe()
    return text if len(text) <= 200 else f"{text[:200]}..."


def _offsets(spec: ProgramSpec) -> Iterator[tuple[int, int]]:
    """(offset from DATA_START, size) of each constant's bytes."""
    position = 0
    for constant in spec.constants:
        position += -position % ALIGN
        yield position, _nbytes(constant)
        position += _nbytes(constant)


def _check_layout(spec: ProgramSpec, header_offset: int) -> None:
    end = max((o + n for o, n in _offsets(spec)), default=0)
    if DATA_START + end != header_offset:
        raise _bad(
            f"the constants take {end} bytes, the file holds {header_offset - DATA_START} for them"
        )


def _check_room(spec: ProgramSpec, meshes: MeshMap, graph: Graph, name: str) -> None:
    """DeserializationError when the constants' copies on this machine's CPU devices (a
    Replicate one is a copy per device) would take more memory than it has available: the
    file declares meshes and shapes. Not checked for workers on other hosts."""
    pool = graph.option.worker_pool
    if pool is not None and not pool.shares_memory:
        return
    need = 0
    for constant in spec.constants:
        operand = moved_operand(constant, meshes, 0)
        if operand.mesh.device_kind == "cpu":
            shards = (operand.shard(d).shape for d in operand.mesh.device_ids)
            need += sum(capped_product(s, _MAX_BYTES) for s in shards) * operand.dtype.itemsize
    try:
        check_room(need, "its constants (a copy on each device holding one)")
    except DeserializationError as exc:
        raise type(exc)(f"{name}: {exc}") from None


def _create_constants(
    source: io.BufferedReader, spec: ProgramSpec, crcs: tuple[int, ...], graph: Graph,
    meshes: MeshMap, name: str,
) -> tuple[Operand, ...]:  # fmt: skip
    """Each constant created on ``graph`` and pinned, one at a time, then awaited; if
    anything fails, those made are awaited and unpinned (so released) before it raises."""
    made: list[Operand] = []
    try:
        mapped = _mapped(source)
        for index, (offset, size) in enumerate(_offsets(spec)):
            data = mapped[DATA_START + offset : DATA_START + offset + size]
            constant = spec.constants[index]
            value = _value(data, constant, index)
            made.append(_create(graph, moved_operand(constant, meshes, 0), value))
            if zlib.crc32(data) != crcs[index]:  # while the device copies it: unpinned below
                raise _bad(f"constant {index}: its checksum does not match (the file is corrupt)")
        _await(graph, made)  # a creation that failed raises here
    except DeserializationError as exc:
        _drop(graph, made)
        raise type(exc)(f"{name}: {exc}") from None
    except BaseException:
        _drop(graph, made)
        raise
    return tuple(made)


def _await(graph: Graph, made: list[Operand]) -> None:
    """Wait until every device made each constant of ``made`` (no kernel reads the mapping
    after: see ``_mapped``); a failure of one raises. It waits on their own values: a
    ``graph.sync()`` would also raise earlier failures of the user's other operators."""
    futures = [settled(_borrowed(graph, operand)) for operand in made]
    for future in futures:
        future.get()


def _drop(graph: Graph, made: list[Operand]) -> None:
    """Release the constants created so far, once no kernel reads the mapping."""
    with contextlib.suppress(DTorchError):  # the error to raise is the one the load met
        _await(graph, made)
    graph.executor.unpin(tuple(o.id for o in made))


def _mapped(source: io.BufferedReader) -> memoryview:
    """The file as a private (copy-on-write) mapping: the Create kernel copies each constant
    out of it, so its bytes are copied once, from the page cache. The load waits for the
    kernels before it returns: a file truncated in place while a kernel reads it would kill
    the process (SIGBUS), so program files are replaced by renaming, as ``save`` does. (No
    MAP_POPULATE: on a writable private mapping that would copy every page.)"""
    prot = mmap.PROT_READ | mmap.PROT_WRITE  # writable: torch has no read-only tensors
    try:
        return memoryview(mmap.mmap(source.fileno(), 0, flags=mmap.MAP_PRIVATE, prot=prot))
    except OSError as exc:  # ENOMEM: a file larger than the machine can commit
        size = os.fstat(source.fileno()).st_size
        raise _bad(f"cannot map the file's {size:,} bytes: {exc.strerror}") from None


def _value(data: memoryview, constant: Operand, index: int) -> Any:
    """The tensor over ``data`` (a view; its checksum is checked after it is handed to the
    device, so that the two overlap: a mismatch drops the created constant unseen)."""
    if data.nbytes != _nbytes(constant):
        raise _bad(f"constant {index}: the file ends inside its bytes")
    return restore_tensor(constant.dtype, constant.shape, data)


def _create(graph: Graph, meta: Operand, value: Any) -> Operand:
    """A pinned graph tensor of ``value`` laid out as ``meta`` (its handle goes at once)."""
    try:
        handle = create(
            Tensor, CreateKind.FROM_TENSOR, meta.shape, meta.dtype, graph=graph,
            device_mesh=meta.mesh, device=None, placements=meta.placements, value=value,
        )  # fmt: skip
    except GraphError:  # the graph's state (closed, broken meanwhile), not the file's
        raise
    except DTorchError as exc:
        raise _bad(f"cannot create constant {meta.describe()}: {exc}") from None
    operand = handle._operand
    graph.executor.pin((operand.id,))
    if operand.placements != meta.placements:
        _drop(graph, [operand])  # its kernel reads the file's mapping: wait for it first
        raise _bad(f"constant {meta.describe()} was created as {operand.describe()}")
    return operand
