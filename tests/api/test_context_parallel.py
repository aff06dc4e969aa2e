"""Context-parallel attention (``SdpaOption``): q, k, v sharded on their sequence on mesh
dims named ``ulysess_cp`` (Ulysses: sequence <-> heads all-to-all) and ``ring_cp`` (ring
attention: key/value blocks around the ring, online softmax), alone and together on a 2-D cp
mesh, with a dp or tp mesh dim besides; against torch's attention on the full tensors,
causal and not, GQA, uneven sequences and heads, custom dim names, and the refusals; thread
and process mode."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn.functional as F

import dtorch
import dtorch.nn.functional as DF
from dtorch.errors import PlacementError
from dtorch.ir.opkind import OpKind
from tests.api.ops_harness import S0, S1, S2, R, place

pytestmark = pytest.mark.timeout(120)

_G = torch.Generator().manual_seed(5)


def _qkv(
    b: int, hq: int, hk: int, length: int, keys: int | None = None, ev: int = 8
) -> list[torch.Tensor]:
    """q, k, v; ``ev``: v's head size (8 as q's and k's: the flash kernel's case)."""
    keys = length if keys is None else keys
    return [
        torch.randn(b, hq, length, 8, generator=_G),
        torch.randn(b, hk, keys, 8, generator=_G),
        torch.randn(b, hk, keys, ev, generator=_G),
    ]


def _check(
    graph: dtorch.Graph,
    mesh: dtorch.DeviceMesh,
    layout: list[dtorch.Placement],
    fulls: list[torch.Tensor],
    **kw: Any,
) -> dtorch.Tensor:
    """Attention of ``fulls`` laid out as ``layout``, causal and not, equal to torch's."""
    for causal in (False, True):
        q, k, v = (place(t, mesh, layout, graph) for t in fulls)
        out = DF.scaled_dot_product_attention(q, k, v, is_causal=causal, **kw)
        torch_kw = {key: value for key, value in kw.items() if key != "sdpa_option"}
        want = F.scaled_dot_product_attention(*fulls, is_causal=causal, **torch_kw)
        assert out.placements == layout, (causal, out.placements)
        torch.testing.assert_close(out.to_torch(), want, msg=lambda m, c=causal: f"causal={c}: {m}")
    return out


@pytest.mark.parametrize("n", [2, 3])
@pytest.mark.parametrize("cp", ["ring_cp", "ulysess_cp"])
def test_one_dim_cp(n: int, cp: str, graph: dtorch.Graph) -> None:
    """7 positions over 2 or 3 devices (uneven); 6 heads (uneven over 4 in Ulysses)."""
    mesh = dtorch.init_device_mesh("cpu", n, mesh_dim_names=(cp,))
    _check(graph, mesh, [S2], _qkv(2, 6, 6, 7))


@pytest.mark.parametrize("n", [2, 3])
@pytest.mark.parametrize("cp", ["ring_cp", "ulysess_cp"])
def test_one_dim_cp_gqa(n: int, cp: str, graph: dtorch.Graph) -> None:
    """4 q heads on 2 kv heads: over 3 Ulysses devices the kv heads are repeated first."""
    mesh = dtorch.init_device_mesh("cpu", n, mesh_dim_names=(cp,))
    _check(graph, mesh, [S2], _qkv(1, 4, 2, 8), enable_gqa=True)


def test_ring_with_fewer_queries_than_keys(graph: dtorch.Graph) -> None:
    """L=5 queries over S=9 keys (causal is top-left aligned, as torch's); v's head size 6
    differs from q's and k's 8 (the matmul path of the blocks)."""
    mesh = dtorch.init_device_mesh("cpu", 3, mesh_dim_names=("ring_cp",))
    _check(graph, mesh, [S2], _qkv(1, 2, 2, 5, 9, ev=6), scale=0.7)
    _check(graph, mesh, [S2], _qkv(1, 2, 2, 5, 9), scale=0.7)


@pytest.mark.parametrize("ev", [8, 6])
def test_ring_keeps_float64(ev: int, graph: dtorch.Graph) -> None:
    """float64 q, k, v: the blocks and the online softmax in float64, to float64's tolerance
    (both block paths: the flash kernel at ev 8, the matmuls at ev 6)."""
    mesh = dtorch.init_device_mesh("cpu", (2, 2), mesh_dim_names=("ulysess_cp", "ring_cp"))
    _check(graph, mesh, [S2, S2], [t.double() for t in _qkv(1, 4, 2, 9, ev=ev)], enable_gqa=True)


@pytest.mark.parametrize("gqa", [False, True])
def test_ulysses_by_ring(gqa: bool, graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", (2, 2), mesh_dim_names=("ulysess_cp", "ring_cp"))
    _check(graph, mesh, [S2, S2], _qkv(2, 4, 2 if gqa else 4, 9), enable_gqa=gqa)


@pytest.mark.parametrize(
    ("names", "layout"),
    [
        (("dp", "ring_cp"), [S0, S2]),
        (("ring_cp", "tp"), [S2, S1]),
        (("tp", "ulysess_cp"), [S1, S2]),
        (("ulysess_cp", "dp"), [S2, S0]),
    ],
)
def test_cp_beside_dp_or_tp(
    names: tuple[str, str], layout: list[dtorch.Placement], graph: dtorch.Graph
) -> None:
    mesh = dtorch.init_device_mesh("cpu", (2, 2), mesh_dim_names=names)
    _check(graph, mesh, layout, _qkv(2, 4, 4, 6))
    _check(graph, mesh, layout, _qkv(2, 8, 4, 6), enable_gqa=True)


@pytest.mark.parametrize(
    ("names", "q_layout", "kv_layout"),
    [
        (("tp", "ring_cp"), [S1, S2], [R, S2]),
        (("ring_cp", "tp"), [S2, S1], [S2, R]),
        (("ulysess_cp", "tp"), [S2, S1], [S2, R]),
    ],
)
def test_cp_beside_a_tp_finer_than_the_kv_heads(
    names: tuple[str, str],
    q_layout: list[dtorch.Placement],
    kv_layout: list[dtorch.Placement],
    graph: dtorch.Graph,
) -> None:
    """tp=4 over 2 kv heads (Replicate k/v, 8 q heads): the kv heads are repeated for the
    devices' q heads, on the ring and in Ulysses (they were refused beside a cp dim)."""
    shape = (4, 2) if names[0] == "tp" else (2, 4)
    mesh = dtorch.init_device_mesh("cpu", shape, mesh_dim_names=names)
    fulls = _qkv(1, 8, 2, 6)
    for causal in (False, True):
        q = place(fulls[0], mesh, q_layout, graph)
        k, v = (place(t, mesh, kv_layout, graph) for t in fulls[1:])
        out = DF.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
        want = F.scaled_dot_product_attention(*fulls, is_causal=causal, enable_gqa=True)
        assert out.placements == q_layout
        torch.testing.assert_close(out.to_torch(), want)


def test_dp_by_ulysses_by_ring(graph: dtorch.Graph) -> None:
    names = ("dp", "ulysess_cp", "ring_cp")
    mesh = dtorch.init_device_mesh("cpu", (2, 2, 2), mesh_dim_names=names)
    _check(graph, mesh, [S0, S2, S2], _qkv(2, 4, 2, 10), enable_gqa=True)


def test_custom_dim_names(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", (2, 2), mesh_dim_names=("u", "r"))
    option = DF.SdpaOption(ulysess_cp_dim="u", ring_cp_dim="r")
    _check(graph, mesh, [S2, S2], _qkv(1, 2, 2, 6), sdpa_option=option)
    q, k, v = (place(t, mesh, [S2, S2], graph) for t in _qkv(1, 2, 2, 6))
    with pytest.raises(PlacementError, match=r"scaled_dot_product_attention: got .*SdpaOption"):
        DF.scaled_dot_product_attention(q, k, v)  # the default names are not on this mesh
    with pytest.raises(TypeError, match="sdpa_option must be an SdpaOption"):
        DF.scaled_dot_product_attention(q, k, v, sdpa_option="r")  # type: ignore[arg-type]


def test_ring_is_one_operator_and_ulysses_all_to_all(
    graph: dtorch.Graph, kinds: list[OpKind]
) -> None:
    """Ring attention moves the blocks inside its kernel; Ulysses redistributes q, k, v and
    the output (an all-to-all each)."""
    fulls = _qkv(1, 2, 2, 6)
    ring = dtorch.init_device_mesh("cpu", 2, mesh_dim_names=("ring_cp",))
    q, k, v = (place(t, ring, [S2], graph) for t in fulls)
    del kinds[:]
    DF.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert kinds == [OpKind.Sdpa]
    ulysses = dtorch.init_device_mesh("cpu", 2, mesh_dim_names=("ulysess_cp",))
    q, k, v = (place(t, ulysses, [S2], graph) for t in fulls)
    del kinds[:]
    DF.scaled_dot_product_attention(q, k, v)
    assert kinds == [OpKind.Convert] * 3 + [OpKind.Sdpa, OpKind.Convert]


def test_query_sequence_alone_on_a_cp_dim(graph: dtorch.Graph) -> None:
    """k/v whole on the cp dim: the plain rule (each device masks at its query offset)."""
    mesh = dtorch.init_device_mesh("cpu", 2, mesh_dim_names=("ring_cp",))
    fulls = _qkv(1, 2, 2, 7)
    q = place(fulls[0], mesh, [S2], graph)
    k, v = (place(t, mesh, [R], graph) for t in fulls[1:])
    out = DF.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert out.placements == [S2]
    torch.testing.assert_close(
        out.to_torch(), F.scaled_dot_product_attention(*fulls, is_causal=True)
    )


def test_refusals(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", (2, 2), mesh_dim_names=("ring_cp", "ulysess_cp"))
    fulls = _qkv(1, 2, 2, 6)
    q, k, v = (place(t, mesh, [S2, R], graph) for t in fulls)
    with pytest.raises(PlacementError, match=r"attn_mask with q, k, v sharded.*accepted"):
        DF.scaled_dot_product_attention(q, k, v, attn_mask=torch.ones(6, 6, dtype=torch.bool))
    flat = [t[0, 0] for t in fulls]  # (L, E): no head dim for Ulysses
    q, k, v = (place(t, mesh, [R, S0], graph) for t in flat)
    with pytest.raises(PlacementError, match=r"Ulysses attention got q .*accepted: a head dim"):
        DF.scaled_dot_product_attention(q, k, v)


@pytest.mark.parametrize(
    ("mesh_shape", "names", "layout", "heads", "length"),
    [
        ((2, 3), ("tp", "ring_cp"), [S1, S2], 1, 6),  # one head over tp=2: a device has none
        ((2, 2), ("ulysess_cp", "ring_cp"), [S2, S2], 1, 4),  # fewer heads than Ulysses
        ((3,), ("ring_cp",), [S2], 0, 6),  # no heads at all
        ((3,), ("ring_cp",), [S2], 2, 2),  # a ring device with no query row
    ],
    ids=["head-less tp device", "head-less ulysses", "no heads", "row-less ring device"],
)
def test_ring_devices_with_empty_shards(  # type: ignore[no-untyped-def]
    mesh_shape, names, layout, heads, length, graph
) -> None:
    """A ring device whose shard holds no head or no query row gets torch's (empty) answer
    (torch's CPU flash kernel divides by zero there: SIGFPE killed the process, or the
    worker)."""
    mesh = dtorch.init_device_mesh("cpu", mesh_shape, mesh_dim_names=names)
    _check(graph, mesh, layout, _qkv(1, heads, heads, length))
