"""Moving a saved program onto a graph: its meshes onto the caller's devices, fresh ids.

A program file stores meshes as shapes: each mesh's device type, shape, row-major device ids
and dim names. ``mesh_map`` decides where they go on load. The program's *root* mesh is its
largest mesh (the most devices; of equal ones, the first met among the inputs, then the
constants, the results, the body's operands and its operators' params). Given a
``device_mesh`` of the root's shape, the root's i-th device becomes ``device_mesh``'s i-th
device (row-major), the root itself becomes ``device_mesh`` (its device type and dim names
too), and every other mesh of the program (a sub-mesh of the root) keeps its shape and dim
names with its devices sent through the same map. Without ``device_mesh`` every mesh stays
as saved.

``rebind`` then renames every local id of the body and every operator id with fresh ones of
the graph, so that a loaded program collides with nothing on it.

Example:
    >>> from dtorch.ir.mesh import DeviceMesh
    >>> root = DeviceMesh("cpu", [[0, 1], [2, 3]], ("dp", "tp"))
    >>> row = DeviceMesh("cpu", [2, 3], ("tp",))
    >>> target = DeviceMesh("cpu", [[4, 5], [6, 7]])
    >>> mapping = mesh_map([row, root], target)
    >>> mapping[root] is target, mapping[row]
    (True, DeviceMesh('cpu', [6, 7], mesh_dim_names=('tp',)))
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from dtorch.errors import MeshError
from dtorch.ir.mesh import DeviceMesh
from dtorch.ir.operator import Operand, Operator
from dtorch.ir.params import OpParam, SubGraphParam
from dtorch.program.spec import ProgramSpec

MeshMap = Mapping[DeviceMesh, DeviceMesh]


def _mesh_fields(param: Any) -> dict[str, DeviceMesh]:
    """``param``'s fields that hold a mesh (a redistribution's target, a creation's mesh)."""
    values = {f.name: getattr(param, f.name) for f in dataclasses.fields(param)}
    return {name: value for name, value in values.items() if isinstance(value, DeviceMesh)}


def param_meshes(param: OpParam) -> Iterator[DeviceMesh]:
    """The meshes among ``param``'s fields."""
    yield from _mesh_fields(param).values()


def spec_meshes(spec: ProgramSpec) -> list[DeviceMesh]:
    """Every distinct mesh of ``spec``, in the order the root rule reads them."""
    operands = (*spec.inputs, *spec.constants, *spec.results, *spec.body.operands)
    found = dict.fromkeys(o.mesh for o in operands)
    for op in spec.body.operators:
        found.update(dict.fromkeys(param_meshes(op.param)))
    return list(found)


def root_mesh(meshes: Iterable[DeviceMesh]) -> DeviceMesh:
    """The largest of ``meshes`` (the first of equal ones)."""
    root: DeviceMesh | None = None
    for mesh in meshes:
        if root is None or len(mesh.device_ids) > len(root.device_ids):
            root = mesh
    if root is None:
        raise MeshError("a program without meshes")
    return root


def mesh_map(
    meshes: list[DeviceMesh], device_mesh: DeviceMesh | None
) -> dict[DeviceMesh, DeviceMesh]:
    """Where each of ``meshes`` goes (see the module docstring); MeshError when
    ``device_mesh`` does not fit."""
    if device_mesh is None:
        return {mesh: mesh for mesh in meshes}
    if not isinstance(device_mesh, DeviceMesh):
        raise TypeError(
            f"load_program: device_mesh must be a dtorch.DeviceMesh or None, got "
            f"{type(device_mesh).__name__}"
        )
    root = root_mesh(meshes)
    if root.shape != device_mesh.shape:
        raise MeshError(
            f"load_program: the program was traced on a mesh of shape {root.shape} ({root!r}); "
            f"it can be loaded onto a mesh of that shape only, got {device_mesh.shape}"
        )
    devices = dict(zip(root.device_ids, device_mesh.device_ids, strict=True))
    return {mesh: _moved(mesh, root, device_mesh, devices) for mesh in meshes}


def _moved(
    mesh: DeviceMesh, root: DeviceMesh, target: DeviceMesh, devices: dict[int, int]
) -> DeviceMesh:
    if mesh == root:
        return target
    outside = [i for i in mesh.device_ids if i not in devices]
    if outside:
        raise MeshError(
            f"load_program: the program's mesh {mesh!r} holds devices {outside} outside its "
            f"root mesh {root!r}, so device_mesh cannot say where they go; load it with "
            "device_mesh=None (the saved devices)"
        )
    ids = [devices[i] for i in mesh.device_ids]
    return DeviceMesh.from_ids(target.device_kind, mesh.shape, ids, mesh.mesh_dim_names)


def moved_operand(operand: Operand, meshes: MeshMap, new_id: int) -> Operand:
    """``operand`` under ``new_id`` on its mapped mesh."""
    mesh = meshes[operand.mesh]
    return Operand(new_id, operand.shape, operand.dtype, mesh, operand.placements)


def moved_param(param: OpParam, meshes: MeshMap) -> OpParam:
    """``param`` with each of its mesh fields mapped (itself when it has none)."""
    changes = {name: meshes[mesh] for name, mesh in _mesh_fields(param).items()}
    return dataclasses.replace(param, **changes) if changes else param  # type: ignore[type-var]


def rebind(spec: ProgramSpec, fresh: Iterator[int], op_ids: Iterator[int], meshes: MeshMap,
           constants: tuple[Operand, ...]) -> ProgramSpec:  # fmt: skip
    """``spec`` (checked) with fresh local ids from ``fresh``, fresh operator ids from
    ``op_ids``, mapped meshes, and ``constants`` (the created ones, in order) in place of
    the saved constants; the inputs' and results' metadata take the body ids they stand for."""
    body = spec.body
    rename = {o.id: next(fresh) for o in body.operands}
    rename.update(zip((c.id for c in spec.constants), (c.id for c in constants), strict=True))
    operands = tuple(moved_operand(o, meshes, rename[o.id]) for o in body.operands)
    operators = tuple(_moved_operator(op, rename, meshes, next(op_ids)) for op in body.operators)
    inputs = tuple(rename[i] for i in body.inputs)
    outputs = tuple(rename[i] for i in body.outputs)
    new_body = SubGraphParam(operators, operands, inputs, outputs, 0, body.writes)
    return ProgramSpec(
        spec.name,
        new_body,
        tuple(moved_operand(o, meshes, i) for o, i in zip(spec.inputs, inputs, strict=True)),
        constants,
        spec.args,
        spec.result,
        tuple(moved_operand(o, meshes, i) for o, i in zip(spec.results, outputs, strict=True)),
        spec.any_keyword_order,
    )


def _moved_operator(op: Operator, rename: dict[int, int], meshes: MeshMap, new_id: int) -> Operator:
    inputs = tuple(rename[i] for i in op.inputs)
    outputs = tuple(rename[i] for i in op.outputs)
    return Operator(new_id, op.name, moved_param(op.param, meshes), inputs, outputs, op.span)


def renamed_constants(body: SubGraphParam, rename: dict[int, int]) -> SubGraphParam:
    """``body`` reading the constants ``rename`` maps to other values (their handles were
    rebound, ``t.data = other``) under those values' ids; a fresh body, not yet named."""
    operators = tuple(
        Operator(op.id, op.name, op.param, tuple(rename.get(i, i) for i in op.inputs),
                 op.outputs, op.span)
        for op in body.operators
    )  # fmt: skip
    outputs = tuple(rename.get(i, i) for i in body.outputs)
    return dataclasses.replace(body, operators=operators, outputs=outputs, program=0)
