"""DeviceMesh and init_device_mesh: construction, metadata, unbind, equality and errors."""

from __future__ import annotations

import pytest
import torch

from dtorch.errors import MeshError
from dtorch.ir.device import Device
from dtorch.ir.mesh import DeviceMesh, init_device_mesh


def test_default_mesh_is_single_device() -> None:
    mesh = DeviceMesh("cpu")
    assert mesh.ndim == 0 and mesh.device_ids == (0,) and not mesh.is_distributed()
    assert mesh.first_device() == Device("cpu", 0)
    assert DeviceMesh("cpu", 3).device_ids == (3,)


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


def test_init_device_mesh_is_row_major() -> None:
    mesh = init_device_mesh("cpu", (3, 2, 4, 3, 6))
    assert mesh.size() == 432 and mesh.device_ids == tuple(range(432))
    assert mesh.coordinate_of(431) == (2, 1, 3, 2, 5)
    assert mesh.device_at((1, 0, 0, 0, 1)) == 145


def test_unbind_matches_torch_unbind() -> None:
    mesh = init_device_mesh("cpu", (2, 3), mesh_dim_names=("dp", "tp"))
    rows = mesh.unbind("tp")
    assert [m.device_ids for m in rows] == [tuple(t.tolist()) for t in torch.unbind(mesh.mesh, 0)]
    assert all(m.dim_names == ("tp",) for m in rows)
    cols = mesh.unbind(0)
    assert [m.device_ids for m in cols] == [tuple(t.tolist()) for t in torch.unbind(mesh.mesh, 1)]
    cube = init_device_mesh("cpu", (2, 3, 4))
    subs = cube.unbind([2, 0])
    assert len(subs) == 3 and subs[0].shape == (4, 2)
    assert subs[1].mesh.tolist() == cube.mesh[:, 1, :].T.tolist()
    assert cube.unbind([0, 1, 2])[0] == cube


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
        (("cpu", [0.5]), {}, "ints"),
        (("cpu", []), {}, "at least one"),
        (("cpu", [0, 1]), {"mesh_dim_names": ["a", "b"]}, "2 names for a 1-D"),
        (("cpu", [[0, 1]]), {"mesh_dim_names": ["a", "a"]}, "distinct"),
        (("cpu", torch.tensor([0.0, 1.0])), {}, "integer device ids"),
    ],
)
def test_bad_meshes_are_refused(args, kwargs, message) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(MeshError, match=message):
        DeviceMesh(*args, **kwargs)


def test_bad_init_and_lookups() -> None:
    with pytest.raises(MeshError, match="positive"):
        init_device_mesh("cpu", (2, 0))
    mesh = init_device_mesh("cpu", 4)
    with pytest.raises(MeshError, match="not in"):
        mesh.coordinate_of(9)
    with pytest.raises(MeshError, match="no dimension named"):
        mesh.unbind("tp")
    with pytest.raises(MeshError, match="twice"):
        init_device_mesh("cpu", (2, 2)).unbind([0, 0])
    with pytest.raises(AttributeError):
        mesh._shape = (5,)
