"""DeviceMesh and init_device_mesh: construction, metadata, unbind, equality and errors."""

from __future__ import annotations

import math

import pytest
import torch

from dtorch.errors import MeshError
from dtorch.ir.device import Device
from dtorch.ir.mesh import DeviceMesh, init_device_mesh


def test_default_mesh_is_single_device() -> None:
    mesh = DeviceMesh("cpu")
    assert mesh.shape == (1,) and mesh.device_ids == (0,) and not mesh.is_distributed
    assert mesh.first_device() == torch.device("cpu") == mesh.to_device()
    assert mesh.first_device_id() == Device("cpu", 0)
    assert DeviceMesh("cpu", 3).device_ids == (3,) and DeviceMesh("cpu", 3).shape == (1,)
    assert mesh.device_type == torch.device("cpu") and mesh.dim_names == []


@pytest.mark.parametrize(
    ("device", "kind", "index"),
    [("cuda:1", "cuda", 1), ("cpu:0", "cpu", 0), ("cpu:5", "cpu", 5), ("cuda", "cuda", 0)],
)
def test_a_device_with_an_index_is_a_one_device_mesh(device: str, kind: str, index: int) -> None:
    for spec in (device, torch.device(device)):
        mesh = DeviceMesh(spec)
        assert mesh.shape == (1,) and mesh.device_ids == (index,)
        assert mesh.device_type == torch.device(kind) and not mesh.is_distributed
        expected = torch.device(kind) if (kind, index) == ("cpu", 0) else torch.device(kind, index)
        assert mesh.to_device() == expected == mesh.first_device()


def test_device_ids_past_torchs_index_limit_are_never_wrapped() -> None:
    """torch keeps a device index in 8 bits (``torch.device("cpu", 300)`` is ``cpu:44``);
    logical CPU ids go further: they are parsed without torch, and asking for a torch.device
    of one is a clear error, never another device."""
    assert DeviceMesh("cpu:300").device_ids == (300,)
    assert Device.parse("cpu:128") == Device("cpu", 128)
    mesh = DeviceMesh("cpu", [300, 301])
    assert mesh.first_device_mesh() == DeviceMesh("cpu", [300])
    with pytest.raises(MeshError, match=r"cpu:300 has no torch\.device"):
        mesh.first_device()
    assert DeviceMesh("cpu", [127]).first_device() == torch.device("cpu", 127)


def test_mesh_is_anything_torch_tensor_accepts() -> None:
    ids = torch.arange(6).reshape(2, 3)
    expected = DeviceMesh("cpu", ids, ["dp", "tp"])
    for mesh in (
        [[0, 1, 2], [3, 4, 5]],
        ((0, 1, 2), (3, 4, 5)),
        ids.numpy(),
        [range(3), range(3, 6)],
    ):
        got = DeviceMesh("cpu", mesh, ["dp", "tp"])
        assert got == expected and torch.equal(got.mesh, torch.tensor(mesh))
    assert torch.equal(DeviceMesh("cpu", range(4), ("tp",)).mesh, torch.tensor(range(4)))
    copy = DeviceMesh(expected)
    assert copy == expected and copy is not expected and copy.dim_names == ["dp", "tp"]


def test_is_distributed_is_a_property_and_names_are_checked() -> None:
    mesh = init_device_mesh("cpu", (2, 2), ("dp", "tp"))
    assert mesh.is_distributed is True and DeviceMesh("cpu").is_distributed is False
    assert mesh.dim_names == ["dp", "tp"] and mesh.mesh_dim_names == ("dp", "tp")
    mesh.check_all_dim_names_in_set({"dp", "tp", "pp"})
    DeviceMesh("cpu").check_all_dim_names_in_set(["dp"])
    with pytest.raises(MeshError, match=r"\['tp'\].*not in"):
        mesh.check_all_dim_names_in_set(["dp"])
    with pytest.raises(MeshError, match="no dim names"):
        init_device_mesh("cpu", 2).check_all_dim_names_in_set(["dp"])
    # one string is one name (as mesh_dim_names="tp" is), not its characters
    init_device_mesh("cpu", 2, ("dp",)).check_all_dim_names_in_set("dp")
    with pytest.raises(MeshError, match=r"\['tp'\].*not in \['dp'\]"):
        mesh.check_all_dim_names_in_set("dp")
    for names in (5, 2.5):  # not iterable: a MeshError, as every other bad name
        with pytest.raises(MeshError, match="mesh_dim_names must be a sequence of strings"):
            DeviceMesh("cpu", [0, 1], mesh_dim_names=names)  # type: ignore[arg-type]
    with pytest.raises(MeshError, match="accepted: one"):
        mesh.to_device()


def test_nested_list_and_tensor_agree() -> None:
    a = DeviceMesh("cpu", [[0, 1], [2, 3]], mesh_dim_names=["dp", "tp"])
    b = DeviceMesh("cpu", torch.arange(4).reshape(2, 2), mesh_dim_names=("dp", "tp"))
    assert a == b and hash(a) == hash(b)
    assert a.shape == (2, 2) and a.ndim == 2 and a.size() == 4 and a.size("tp") == 2
    assert torch.equal(a.mesh, torch.arange(4).reshape(2, 2))
    assert a.has_dim_name("dp") and not a.has_dim_name("pp")
    assert a.dim_name_index("tp") == 1 and a.dim_name_index("pp", default_value=-1) == -1
    assert a != DeviceMesh("cpu", [[0, 1], [2, 3]])
    assert a != DeviceMesh("cuda", [[0, 1], [2, 3]], mesh_dim_names=["dp", "tp"])
    assert "dp" in repr(a) and "[[0, 1], [2, 3]]" in repr(a)


def test_init_device_mesh_shapes_and_positional_names() -> None:
    assert init_device_mesh("cpu", (2, None, 3), ("dp", "tp")).shape == (2, 3)
    assert init_device_mesh("cpu", (2, None, 3), ("dp", "tp")).dim_names == ["dp", "tp"]
    assert init_device_mesh("cpu", ()) == DeviceMesh("cpu") == init_device_mesh("cpu", (None,))
    assert init_device_mesh(torch.device("cuda"), 2).device_type == torch.device("cuda")


def test_init_device_mesh_is_row_major() -> None:
    mesh = init_device_mesh("cpu", (3, 2, 4, 3, 6))
    assert mesh.size() == 432 and mesh.device_ids == tuple(range(432))
    assert mesh.coordinate_of(431) == (2, 1, 3, 2, 5)
    assert mesh.device_at((1, 0, 0, 0, 1)) == 145


@pytest.mark.parametrize("shape", [(2, 3), (4, 5), (3, 2, 4, 3, 6)])
def test_coordinates_of_small_and_large_meshes_agree_with_torch(shape: tuple[int, ...]) -> None:
    """Meshes above 16 devices look ids up in a table, smaller ones scan: either way the
    coordinate of an id is where it sits in the id tensor (ids shuffled, so none is its
    own flat index)."""
    ids = torch.randperm(math.prod(shape), generator=torch.Generator().manual_seed(0)) + 7
    grid = ids.reshape(shape)
    mesh = DeviceMesh("cpu", grid)
    for device in ids.tolist():
        coordinate = mesh.coordinate_of(device)
        assert grid[coordinate].item() == device
    with pytest.raises(MeshError, match="not in"):
        mesh.coordinate_of(0)
    members = set(ids.tolist())  # membership too: a table above 16 devices, a scan below
    for candidate in range(math.prod(shape) + 9):
        assert (candidate in mesh) == (candidate in members)
    assert [7] not in mesh and "a" not in mesh


def test_decoded_mesh_ids_must_fit_in_int64() -> None:
    """The codec's constructor checks what the public one does: an id past int64 made a mesh
    whose ``repr`` and id tensor failed later."""
    assert DeviceMesh.from_ids("cpu", (2,), (0, 2**63 - 1)).device_ids[1] == 2**63 - 1
    with pytest.raises(MeshError, match="must fit in int64"):
        DeviceMesh.from_ids("cpu", (2,), (0, 2**64 - 1))


def test_unbind_removes_the_listed_dims_as_torch_unbind() -> None:
    mesh = init_device_mesh("cpu", (2, 3), mesh_dim_names=("dp", "tp"))
    rows = mesh.unbind("dp")
    assert [m.mesh.tolist() for m in rows] == [t.tolist() for t in torch.unbind(mesh.mesh, 0)]
    assert all(m.dim_names == ["tp"] for m in rows)
    cols = mesh.unbind(1)
    assert [m.mesh.tolist() for m in cols] == [t.tolist() for t in torch.unbind(mesh.mesh, 1)]
    assert all(m.dim_names == ["dp"] for m in cols)
    assert mesh.unbind("pp") == [mesh] and mesh.unbind(["pp", "tp"]) == cols


def test_unbind_several_dims_is_nested_unbind() -> None:
    cube = init_device_mesh("cpu", (2, 3, 4), ("a", "b", "c"))
    nested = [u for t in torch.unbind(cube.mesh, 0) for u in torch.unbind(t, 1)]
    for dims in ([0, 2], ["c", "a"], [2, "a"]):
        subs = cube.unbind(dims)
        assert [m.mesh.tolist() for m in subs] == [t.tolist() for t in nested]
        assert all(m.dim_names == ["b"] for m in subs)
    points = cube.unbind([0, 1, 2])
    assert [m.device_ids for m in points] == [(i,) for i in range(24)]
    assert all(m.shape == (1,) for m in points)


def test_group_of() -> None:
    mesh = init_device_mesh("cpu", (2, 3))
    assert mesh.group_of(4, 0) == (1, 4) and mesh.group_of(4, 1) == (3, 4, 5)


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        (("tpu", [0]), {}, "not supported"),
        (("cpu", [[0, 1], [2]]), {}, "rectangular"),
        (("cpu", [0, 0]), {}, "unique"),
        (("cpu", [-1, 2]), {}, "non-negative"),
        (("cpu", [0.5]), {}, "integer device ids"),
        (("cpu", [True, False]), {}, "integer device ids"),
        (("cuda:1", [0, 1]), {}, "names one device"),
        ((3,), {}, "not a device"),
        (("cpu:x",), {}, "not supported"),
        (("cpu", []), {}, "at least one"),
        (("cpu", [0, 1]), {"mesh_dim_names": ["a", "b"]}, "2 names for a 1-D"),
        (("cpu", [[0, 1]]), {"mesh_dim_names": ["a", "a"]}, "distinct"),
        (("cpu", torch.tensor([0.0, 1.0])), {}, "integer device ids"),
    ],
)
def test_bad_meshes_are_refused(args, kwargs, message) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(MeshError, match=message):
        DeviceMesh(*args, **kwargs)


@pytest.mark.parametrize("shape", [2.0, None, "ab", (2, True), (2, 1.5), (0,), object()])
def test_init_device_mesh_refuses_what_is_not_a_shape(shape: object) -> None:
    with pytest.raises(MeshError, match="mesh_shape must be a positive int or a tuple of them"):
        init_device_mesh("cpu", shape)  # type: ignore[arg-type]


def test_init_device_mesh_takes_numpy_ints_as_torch_does() -> None:
    import numpy as np

    assert init_device_mesh("cpu", np.int64(2)).shape == (2,)
    assert init_device_mesh("cpu", (np.int32(2), 3)).shape == (2, 3)


def test_bad_init_and_lookups() -> None:
    with pytest.raises(MeshError, match="positive"):
        init_device_mesh("cpu", (2, 0))
    mesh = init_device_mesh("cpu", 4)
    with pytest.raises(MeshError, match="not in"):
        mesh.coordinate_of(9)
    with pytest.raises(MeshError, match="out of range"):
        mesh.unbind(3)
    with pytest.raises(AttributeError):
        mesh._shape = (5,)
