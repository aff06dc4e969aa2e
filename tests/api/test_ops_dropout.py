"""``dtorch.nn.functional.dropout`` against torch: bit-identical to ``torch.manual_seed(s);
torch.nn.functional.dropout(x, p)`` however the input is sharded (every layout on 1-D meshes,
a sample on 2-D and 3-D ones, even and uneven), with a ``generator`` as with torch's default
one, the generator advanced as torch's is (later draws match), identity when not training,
``p`` of 0 and 1, ``inplace``, dtypes, and the rejections; thread and process mode."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn.functional as F

import dtorch
import dtorch.nn.functional as DF
from dtorch.errors import DtypeError, ParamError
from tests.api.ops_harness import ALL_MESHES, S0, S1, S2, P, R, limit_for, place, run_api

pytestmark = pytest.mark.timeout(120)

_X = torch.randn((5, 4, 3), generator=torch.Generator().manual_seed(2))
_TABLE = {(R,): R, (S0,): S0, (S1,): S1, (S2,): S2, (P,): P}  # Partial: linear in x


def _seeded_dropout(t: Any, p: float, seed: int, fn: Any) -> Any:
    torch.manual_seed(seed)
    return fn(t, p)


@pytest.mark.parametrize("mesh_shape", ALL_MESHES)
def test_dropout_bit_identical_every_layout(
    mesh_shape: tuple[int, ...], graph: dtorch.Graph
) -> None:
    want = _seeded_dropout(_X, 0.3, 7, F.dropout)
    assert not torch.equal(want, _X)  # the mask drops something
    run_api(
        graph, "dropout", lambda t: _seeded_dropout(t, 0.3, 7, DF.dropout), [_X], mesh_shape,
        [want], table=_TABLE, limit=limit_for(mesh_shape, n_d=12),
    )  # fmt: skip


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16, torch.float16])
def test_dropout_generator_and_advance(dtype: torch.dtype, graph: dtorch.Graph) -> None:
    """A generator draws as the default one does under the same seed; both advance as
    torch's dropout advances the default generator, so a second call matches too."""
    mesh = dtorch.init_device_mesh("cpu", (2, 3))
    x = _X.to(dtype)
    t = place(x, mesh, [S1, S0], graph)
    g = torch.Generator().manual_seed(4)
    first, second = DF.dropout(t, 0.6, generator=g), DF.dropout(t, 0.6, generator=g)
    torch.manual_seed(4)
    assert torch.equal(first.to_torch(), F.dropout(x, 0.6))
    assert torch.equal(second.to_torch(), F.dropout(x, 0.6))
    assert torch.equal(torch.rand(3, generator=g), torch.rand(3))
    assert first.placements == [S1, S0]


def test_dropout_default_generator_advances(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", 2)
    t = place(_X, mesh, [S2], graph)
    torch.manual_seed(9)
    a, b = DF.dropout(t), DF.dropout(t, 0.2)
    after = torch.rand(2)
    torch.manual_seed(9)
    assert torch.equal(a.to_torch(), F.dropout(_X)) and torch.equal(
        b.to_torch(), F.dropout(_X, 0.2)
    )
    assert torch.equal(after, torch.rand(2))


def test_dropout_identity_extremes_and_inplace(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", 3)
    t = place(_X, mesh, [S0], graph)
    assert DF.dropout(t, 0.5, training=False) is t and DF.dropout(t, 0.0) is t
    zeros = DF.dropout(t, 1.0)
    assert torch.equal(zeros.to_torch(), F.dropout(_X, 1.0))
    x = _X.clone()
    target = place(x, mesh, [S1], graph)
    torch.manual_seed(5)
    assert DF.dropout(target, 0.4, inplace=True) is target
    torch.manual_seed(5)
    F.dropout(x, 0.4, inplace=True)
    assert torch.equal(target.to_torch(), x) and target.placements == [S1]


def test_rejections(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", (2, 2))
    t = place(_X, mesh, [S0, R], graph)
    with pytest.raises(
        ValueError, match=r"^dropout: dropout probability has to be between 0 and 1"
    ):
        DF.dropout(t, 1.5)
    with pytest.raises(
        DtypeError, match=r"^dropout: needs a floating-point input; got torch.int64"
    ):
        DF.dropout(place(torch.ones(4, dtype=torch.int64), mesh, [R, R], graph))
    with pytest.raises(TypeError, match=r"^dropout: generator must be a CPU torch.Generator"):
        DF.dropout(t, generator=3)  # type: ignore[arg-type]


def test_a_partial_input_stays_partial(graph: dtorch.Graph) -> None:
    """Dropout is linear in its input (each part times the same full mask), so a Partial
    input is kept (it was refused), with torch's values for the same seed."""
    mesh = dtorch.init_device_mesh("cpu", (2, 2))
    torch.manual_seed(5)
    got = DF.dropout(place(_X, mesh, [S0, P], graph), 0.3)
    torch.manual_seed(5)
    want = F.dropout(_X, 0.3)
    assert got.placements == [S0, P]
    torch.testing.assert_close(got.to_torch(), want)


def test_a_bad_p_is_a_param_error_of_torch_class(graph: dtorch.Graph) -> None:
    """torch refuses a p outside [0, 1] with a ValueError; dtorch's ParamError is one."""
    t = place(_X, dtorch.init_device_mesh("cpu", 2), [S0], graph)
    with pytest.raises(ValueError, match="has to be between 0 and 1") as theirs:
        F.dropout(_X, -0.5)
    with pytest.raises(ParamError) as ours:
        DF.dropout(t, -0.5)
    assert str(theirs.value) in str(ours.value)
