"""load_state_dict against torch.nn.Module.load_state_dict: a torch module's state dict (or
a safetensors file written from it) loads into the same architecture in dtorch, sharded
onto every parameter's mesh and placements, in place (the Parameter objects and their
aliases see the values); strict and non-strict give torch's errors and torch's
missing/unexpected keys; shape mismatches raise torch's message in both modes, unloadable
dtypes a clear one; nothing is loaded when anything is wrong; thread and process mode."""

from __future__ import annotations

import gc
import os
import time
import weakref
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch
from safetensors.torch import save_file

import dtorch
import dtorch.nn.functional as DF
from dtorch import Shard, nn
from dtorch.errors import KernelError
from dtorch.ir.opkind import OpKind
from dtorch.kernels.table import LOCAL_KERNELS
from dtorch.nn.modules import load_source
from tests.runners import PoolKeeper

pytestmark = pytest.mark.timeout(120)


def _model(lib: ModuleType, mesh: Any = None) -> Any:
    """A small MLP (tensor-parallel in dtorch) with a buffer, the same keys in both."""
    if lib is torch.nn:
        up, down = torch.nn.Linear(6, 10), torch.nn.Linear(10, 4)
        model = torch.nn.Sequential(up, torch.nn.ReLU(), down)
        model.register_buffer("steps", torch.tensor(7))
        return model
    model = nn.Sequential(
        nn.ColumnParallelLinear(6, 10, device_mesh=mesh),
        nn.ReLU(),
        nn.RowParallelLinearWithReplicateOutput(10, 4, device_mesh=mesh),
    )
    model.register_buffer("steps", dtorch.tensor(0, device_mesh=mesh))
    return model


_MESHES = [((2,), ("tp",)), ((2, 3), ("dp", "tp")), ((2, 1, 2), ("tp", "pp", "dp"))]


@pytest.mark.parametrize(("shape", "names"), _MESHES)
def test_torch_state_dict_loads_sharded(shape: tuple, names: tuple, graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", shape, mesh_dim_names=names)
    ref, ours = _model(torch.nn), _model(nn, mesh)
    weights = [p for _, p in ours.named_parameters()]
    alias = ours[0].weight.detach()
    assert repr(ours.load_state_dict(ref.state_dict())) == "<All keys matched successfully>"
    assert [p for _, p in ours.named_parameters()] == weights  # the same objects
    tp = names.index("tp")
    assert ours[0].weight.placements[tp] == Shard(0) and ours[2].weight.placements[tp] == Shard(1)
    for key, value in ref.state_dict().items():
        assert torch.equal(ours.state_dict()[key].to_torch(), value), key
    assert torch.equal(alias.to_torch(), ref[0].weight.detach())  # copied in place
    x = torch.randn(5, 6)
    y = ours(dtorch.from_torch(x, device_mesh=mesh))
    assert torch.allclose(y.to_torch(), ref(x), atol=1e-6)


def test_safetensors_file_loads_sharded(tmp_path: Path, graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    ref, ours = _model(torch.nn), _model(nn, mesh)
    path = tmp_path / "mlp.safetensors"
    save_file(ref.state_dict(), str(path))
    assert ours.load_state_dict(path) == ([], [])
    for key, value in ref.state_dict().items():
        assert torch.equal(ours.state_dict()[key].to_torch(), value), key
    fresh = _model(nn, mesh)
    assert nn.load_safetensors(fresh, str(path)) == ([], [])
    assert torch.equal(fresh[2].bias.to_torch(), ref[2].bias.detach())


def _both(make_extra: Any, strict: bool) -> tuple[Any, Any]:
    """The outcome (return value or error message) of loading ``make_extra(state_dict)``
    into the torch and the dtorch model."""
    outcomes = []
    for lib in (torch.nn, nn):
        sd = make_extra(_model(torch.nn).state_dict())
        try:
            outcomes.append(_model(lib).load_state_dict(sd, strict=strict))
        except RuntimeError as error:
            outcomes.append(str(error))
    return outcomes[0], outcomes[1]


def _unexpected(sd: dict) -> dict:
    return {**sd, "0.num_batches_tracked": torch.tensor(3), "extra.weight": torch.ones(1)}


def _missing(sd: dict) -> dict:
    return {k: v for k, v in sd.items() if k not in ("2.bias", "steps")}


def _both_wrong(sd: dict) -> dict:
    return _unexpected(_missing(sd))


def _shape(sd: dict) -> dict:
    return {**sd, "0.bias": torch.zeros(11)}


@pytest.mark.parametrize("strict", [True, False])
@pytest.mark.parametrize("change", [_unexpected, _missing, _both_wrong, _shape])
def test_strict_rules_match_torch(change: Any, strict: bool, graph: dtorch.Graph) -> None:
    ref, ours = _both(change, strict)
    assert isinstance(ours, str) == isinstance(ref, str), (ours, ref)
    if isinstance(ref, str):
        assert ours == ref  # torch's message, word for word
    else:
        assert (ours.missing_keys, ours.unexpected_keys) == (ref.missing_keys, ref.unexpected_keys)
        assert repr(ours) == repr(ref)


def test_a_failed_load_changes_nothing(graph: dtorch.Graph) -> None:
    ours = _model(nn)
    before = ours[0].weight.to_torch()
    sd = _shape(_model(torch.nn).state_dict())
    with pytest.raises(RuntimeError, match=r"size mismatch for 0.bias: copying a param with shape"):
        ours.load_state_dict(sd, strict=False)
    assert torch.equal(ours[0].weight.to_torch(), before)


def _quantized() -> torch.Tensor:
    import warnings

    with warnings.catch_warnings():  # this torch calls its quantized dtypes deprecated
        warnings.simplefilter("ignore", UserWarning)
        return torch.quantize_per_tensor(torch.ones(4), 0.1, 0, torch.quint8)


def _nested() -> torch.Tensor:
    import warnings

    with warnings.catch_warnings():  # torch calls its strided nested tensors a prototype
        warnings.simplefilter("ignore", UserWarning)
        return torch.nested.nested_tensor([torch.ones(2), torch.ones(3)])


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (lambda: torch.empty(4, device="meta"), "a tensor on the meta device holds no values"),
        (lambda: torch.ones(4).to_sparse(), r"a torch.sparse_coo tensor is not loaded"),
        (_quantized, r"a quantized tensor .* \.dequantize\(\)"),
        (_nested, "a nested tensor"),
    ],
    ids=["meta", "sparse", "quantized", "nested"],
)
def test_a_value_without_loadable_data_is_refused_before_anything_loads(
    graph: dtorch.Graph, make: Any, words: str
) -> None:
    """torch loads the entries before such a value, then fails on it; dtorch refuses it with
    the shape checks, naming the key, and changes nothing."""
    ours = _model(nn)
    before = {k: v.to_torch() for k, v in ours.state_dict().items()}
    sd = _model(torch.nn).state_dict()
    sd["2.bias"] = make()  # the last entry loaded
    with pytest.raises(RuntimeError, match=rf'parameter named "2.bias": {words}'):
        ours.load_state_dict(sd)
    for key, value in ours.state_dict().items():
        assert torch.equal(value.to_torch(), before[key]), key


def test_a_value_of_another_graph_is_refused_before_anything_loads(graph: dtorch.Graph) -> None:
    """The graph check came at the copy: the entries before it were loaded already."""
    ours = _model(nn)
    before = {k: v.to_torch() for k, v in ours.state_dict().items()}
    sd: dict[str, Any] = dict(_model(torch.nn).state_dict())
    other = dtorch.Graph()
    try:
        sd["2.bias"] = dtorch.from_torch(sd["2.bias"], graph=other)  # the last entry loaded
        with pytest.raises(RuntimeError, match=r'named "2.bias": the value is on Graph \d+'):
            ours.load_state_dict(sd)
    finally:
        other.close()
    for key, value in ours.state_dict().items():
        assert torch.equal(value.to_torch(), before[key]), key
    other = dtorch.Graph()
    try:  # assign=True takes the value as it is, its graph included (as before the check)
        value = dtorch.from_torch(torch.full((4,), 2.0), graph=other)
        layer = nn.Linear(3, 4)
        layer.load_state_dict({"weight": torch.ones(4, 3), "bias": value}, assign=True)
        assert layer.bias.graph is other and layer.bias.tolist() == [2.0] * 4
    finally:
        other.close()


def _failed(mesh: Any, shape: tuple[int, ...]) -> dtorch.Tensor:
    """A value of ``shape`` that failed on every device of ``mesh`` (ids out of range)."""
    weight = dtorch.from_torch(torch.randn(4, shape[-1]), device_mesh=mesh)
    ids = torch.full(shape[:-1], 9)
    placements = [Shard(0)] + [dtorch.Replicate()] * (mesh.ndim - 1)
    return DF.embedding(dtorch.from_torch(ids, device_mesh=mesh, placements=placements), weight)


@pytest.mark.parametrize("fetched", [True, False], ids=["caught", "unread"])
def test_a_load_ignores_earlier_failures_of_the_graph(fetched: bool, graph: dtorch.Graph) -> None:
    """A kernel failure of another value (one the user caught from to_torch, or one nobody
    read yet) is no failure of a later load: the load waits for its own values only, and
    loads every one."""
    mesh = dtorch.init_device_mesh("cpu", 3)
    failed = _failed(mesh, (3, 2))
    if fetched:
        with pytest.raises(KernelError, match=r"embedding.*out of range"):
            failed.to_torch()
    ref, ours = torch.nn.Linear(4, 3), nn.Linear(4, 3, device_mesh=mesh)
    assert ours.load_state_dict(ref.state_dict()) == ([], [])
    for key, value in ref.state_dict().items():
        assert torch.equal(ours.state_dict()[key].to_torch(), value), key
    x = torch.randn(2, 4)
    torch.testing.assert_close(ours(dtorch.from_torch(x, device_mesh=mesh)).to_torch(), ref(x))


@pytest.mark.parametrize("assign", [False, True])
def test_a_failed_dtorch_value_changes_nothing(assign: bool, graph: dtorch.Graph) -> None:
    """A dtorch value that failed on the devices raises its failure before anything loads."""
    mesh = dtorch.init_device_mesh("cpu", (3, 2))
    ours = nn.Linear(2, 3, device_mesh=mesh)
    before = {k: v.to_torch() for k, v in ours.state_dict().items()}
    good = dtorch.from_torch(torch.ones(3, 2), device_mesh=mesh)
    bad = _failed(mesh, (3, 1)).flatten()  # the bias: loaded after the weight
    with pytest.raises(KernelError, match=r"embedding.*out of range"):
        ours.load_state_dict({"weight": good, "bias": bad}, assign=assign)
    for key, value in ours.state_dict().items():
        assert torch.equal(value.to_torch(), before[key]), key


def _in_sequence(module: Any) -> Any:
    """``module`` as the child ``0`` of a Sequential (its keys prefixed ``0.``)."""
    return (torch.nn.Sequential if isinstance(module, torch.nn.Module) else nn.Sequential)(module)


def _batch_norms(mesh: Any) -> list[tuple[Any, Any]]:
    """(torch module, dtorch module) pairs: a BatchNorm2d alone and inside a Sequential,
    with a counter of their own (7) and different running statistics."""
    pairs = []
    for wrap in (lambda m: m, _in_sequence):
        ref, ours = torch.nn.BatchNorm2d(3), nn.BatchNorm2d(3, device_mesh=mesh)
        ref.num_batches_tracked.fill_(7)
        ours.num_batches_tracked.copy_(dtorch.tensor(7, device_mesh=mesh))
        pairs.append((wrap(ref), wrap(ours)))
    return pairs


def test_batch_norm_checkpoint_without_num_batches_tracked(graph: dtorch.Graph) -> None:
    """torch fills in a missing num_batches_tracked (the module keeps its own) for an
    unversioned checkpoint (or one of BatchNorm's layout version 1), and refuses its absence
    from a checkpoint of version 2: the same outcomes, messages and values in dtorch."""
    mesh = dtorch.init_device_mesh("cpu", 2)
    for ref, ours in _batch_norms(mesh):
        full = {k: torch.rand(v.shape) + 0.5 for k, v in ref.state_dict().items()}
        versioned = type(ref.state_dict())(
            (k, v) for k, v in full.items() if not k.endswith("num_batches_tracked")
        )
        versioned._metadata = ref.state_dict()._metadata  # type: ignore[attr-defined]
        plain, old = dict(versioned), type(versioned)(versioned)
        old._metadata = {k: {"version": 1} for k in versioned._metadata}  # type: ignore[attr-defined]
        for sd in (plain, old):
            for strict in (True, False):
                assert repr(ours.load_state_dict(sd, strict)) == repr(
                    ref.load_state_dict(sd, strict)
                )
        for key, value in ref.state_dict().items():
            assert torch.equal(ours.state_dict()[key].to_torch(), value), key
        errors = []
        for module in (ref, ours):
            with pytest.raises(RuntimeError, match="Missing key") as error:
                module.load_state_dict(versioned)
            errors.append(str(error.value))
        assert errors[0] == errors[1]


def test_dtypes_cast_like_copy_or_refuse(graph: dtorch.Graph) -> None:
    ours = _model(nn)
    sd = {
        k: v.double() if v.is_floating_point() else v
        for k, v in _model(torch.nn).state_dict().items()
    }
    ours.load_state_dict(sd)
    assert ours[0].weight.dtype == torch.float32
    assert torch.allclose(ours[0].weight.to_torch(), sd["0.weight"].float())
    sd["steps"] = torch.tensor(1.5)
    with pytest.raises(
        RuntimeError,
        match=r"dtype mismatch for steps: .*torch.float32 from checkpoint.*torch.int64",
    ):
        ours.load_state_dict(sd)
    errors = []
    for model in (_model(torch.nn), ours):  # torch's aggregated error, word for word
        with pytest.raises(RuntimeError, match=r'While copying the parameter named "steps"') as e:
            model.load_state_dict({**sd, "steps": 3})
        errors.append(str(e.value))
    assert errors[0] == errors[1]
    with pytest.raises(TypeError, match="Expected state_dict to be dict-like"):
        ours.load_state_dict([1, 2])


def _safetensors(path: Path, entries: dict[str, tuple[str, list[int], bytes]]) -> None:
    """A safetensors file written by hand: any dtype name (save_file writes torch's only)."""
    import json

    header, data, offset = {}, b"", 0
    for key, (dtype, shape, raw) in entries.items():
        header[key] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(raw)]}
        data, offset = data + raw, offset + len(raw)
    text = json.dumps(header).encode()
    path.write_bytes(len(text).to_bytes(8, "little") + text + data)


def _linear_entries(bias: tuple[str, list[int], bytes]) -> dict[str, Any]:
    return {"weight": ("F32", [2, 2], torch.ones(2, 2).numpy().tobytes()), "bias": bias}


@pytest.mark.parametrize(
    ("bias", "words"),
    [
        (("F4", [2], b"\x00"), "its dtype F4 is not loaded; accepted: F64"),
        (("F6_E2M3", [4], b"\x00" * 3), "its dtype F6_E2M3 is not loaded"),
        (("C64", [2], torch.full((2,), 7 + 5j).numpy().tobytes()), "dtype mismatch for bias"),
    ],
    ids=["f4", "f6", "complex-into-real"],
)
def test_safetensors_dtypes_are_checked_before_anything_loads(
    tmp_path: Path, graph: dtorch.Graph, bias: Any, words: str
) -> None:
    path = tmp_path / "odd.safetensors"
    _safetensors(path, _linear_entries(bias))
    model = nn.Linear(2, 2)
    before = model.weight.to_torch()
    with pytest.raises(RuntimeError, match=words):
        model.load_state_dict(path)
    assert torch.equal(model.weight.to_torch(), before)


def test_a_safetensors_file_replaced_while_loading_is_refused(
    tmp_path: Path, graph: dtorch.Graph
) -> None:
    """Each tensor is read through a new handle: a file replaced after its header was checked
    is refused at the next read, not loaded (a (1,) value once broadcast into a (2, 2) one)."""
    path = tmp_path / "model.safetensors"
    save_file({"weight": torch.ones(2, 2), "bias": torch.zeros(2)}, str(path))
    model = nn.Linear(2, 2)

    def replace(*args: Any) -> None:  # a trainer writing a new checkpoint meanwhile
        save_file({"weight": torch.ones(1), "bias": torch.zeros(2)}, str(tmp_path / "new"))
        (tmp_path / "new").replace(path)

    model.register_load_state_dict_pre_hook(replace)
    with pytest.raises(RuntimeError, match=r"model\.safetensors' changed while it was being"):
        model.load_state_dict(path)


@pytest.mark.timeout(30)
def test_a_pipe_or_a_directory_is_refused_without_waiting(tmp_path: Path) -> None:
    fifo = tmp_path / "p.safetensors"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match=r"p\.safetensors' is not a regular file"):
        nn.Linear(2, 2).load_state_dict(fifo)
    with pytest.raises(ValueError, match=r"' is a directory; expected a safetensors file"):
        nn.Linear(2, 2).load_state_dict(tmp_path)


def test_bad_files(tmp_path: Path) -> None:
    model = nn.Linear(2, 2)
    with pytest.raises(FileNotFoundError):
        model.load_state_dict(tmp_path / "missing.safetensors")
    (tmp_path / "text.safetensors").write_text("not a checkpoint")
    with pytest.raises(ValueError, match=r"load_state_dict: .*text.safetensors is not a safet"):
        nn.load_safetensors(model, tmp_path / "text.safetensors")


def test_assign_rebinds_and_dtorch_state_dicts_move(graph: dtorch.Graph) -> None:
    mesh = dtorch.init_device_mesh("cpu", 2, mesh_dim_names=("tp",))
    src = _model(nn, mesh)
    dst = nn.Sequential(nn.Linear(6, 10), nn.ReLU(), nn.Linear(10, 4))
    dst.register_buffer("steps", dtorch.tensor(0))
    dst.load_state_dict(src.state_dict())  # sharded -> replicated, another mesh
    assert dst[0].weight.placements == [dtorch.Replicate()]
    assert torch.equal(dst[0].weight.to_torch(), src[0].weight.to_torch())
    weight = dst[0].weight
    sd = {k: v.double() for k, v in _model(torch.nn).state_dict().items()}
    dst.load_state_dict(sd, assign=True)  # torch's: a new Parameter, of the checkpoint's dtype
    assert dst[0].weight is not weight and isinstance(dst[0].weight, nn.Parameter)
    assert dst[0].weight.dtype == torch.float64 and weight.dtype == torch.float32
    assert torch.equal(dst[0].weight.to_torch(), sd["0.weight"])


@pytest.mark.parametrize("lib", [torch.nn, nn], ids=["torch", "dtorch"])
def test_assign_unties_tied_parameters_as_torch(lib: ModuleType, graph: dtorch.Graph) -> None:
    """``load_state_dict(assign=True)`` puts the loaded values in the module's entries (new
    Parameters keeping ``requires_grad``; buffers as given): entries tied before part, as in
    torch. dtorch rebound the shared Parameter's value: both took the last entry loaded."""
    model = lib.Sequential(lib.Embedding(3, 2), lib.Linear(2, 3, bias=False))
    model[1].weight = model[0].weight
    model[0].weight.requires_grad_(False)
    model.register_buffer("steps", (torch if lib is torch.nn else dtorch).zeros(2))
    sd = {"0.weight": torch.zeros(3, 2), "1.weight": torch.ones(3, 2), "steps": torch.ones(2)}
    model.load_state_dict(sd, assign=True)
    values = [model[0].weight, model[1].weight, model.steps]
    sums = [float(v.sum()) for v in values]
    assert sums == [0.0, 6.0, 2.0] and model[0].weight is not model[1].weight
    assert [v.requires_grad for v in values[:2]] == [False, False]
    assert all(type(v).__name__ == "Parameter" for v in values[:2])
    assert [name for name, _ in model.named_buffers()] == ["steps"]


def test_safetensors_load_holds_one_full_tensor_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every tensor read from the file is gone (client and devices) before the next is read,
    even when the devices are slow (a Create kernel that sleeps first). Thread mode only: the
    kernel is patched in this process; the loader's client side is the same in both modes."""
    slow = LOCAL_KERNELS[OpKind.Create]

    def sleepy(ctx: Any, device: int, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        time.sleep(0.02)
        return slow(ctx, device, inputs)

    monkeypatch.setitem(LOCAL_KERNELS, OpKind.Create, sleepy)
    graph = dtorch.Graph(dtorch.GraphOption(per_device_per_process=False))
    try:
        with graph.as_default():
            _check_one_at_a_time(tmp_path, monkeypatch)
    finally:
        graph.close()


def _check_one_at_a_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mesh = dtorch.init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    ref, ours = _model(torch.nn), _model(nn, mesh)
    path = tmp_path / "mlp.safetensors"
    save_file(ref.state_dict(), str(path))
    alive: list[weakref.ref] = []
    read = load_source.SafetensorsSource.read

    def spy(self: Any, key: str) -> torch.Tensor:
        gc.collect()
        assert [r for r in alive if r() is not None] == [], key
        value = read(self, key)
        alive.append(weakref.ref(value))
        return value

    monkeypatch.setattr(load_source.SafetensorsSource, "read", spy)
    ours.load_state_dict(path)
    assert len(alive) == len(ref.state_dict())
    assert torch.equal(ours[2].weight.to_torch(), ref[2].weight.detach())


def test_float8_values_load(graph: dtorch.Graph) -> None:
    """A dtype torch cannot sum (float8) loads too: the wait on each value sums it as bools."""
    module = nn.Module()
    mesh = dtorch.init_device_mesh("cpu", 2)
    module.register_buffer("scale", dtorch.zeros(4, dtype=torch.float8_e4m3fn, device_mesh=mesh))
    source = {"scale": torch.randn(4).to(torch.float8_e4m3fn)}
    module.load_state_dict(source)
    assert torch.equal(module.scale.to_torch().float(), source["scale"].float())


def test_a_parameter_with_a_concatenation_mark_loads(graph: dtorch.Graph) -> None:
    """A fused qkv weight laid out as ``cat`` leaves it (``Shard(1, sub_split_coordinates=)``):
    the wait on its value summed it, which refuses a marked tensor; it sums each part now."""
    mesh = dtorch.init_device_mesh("cpu", (2, 2))
    marked = [Shard(1, sub_split_coordinates=(4, 8)), Shard(0)]
    module = nn.Module()
    module.a = nn.Parameter(dtorch.zeros(3, device_mesh=mesh))
    module.qkv = nn.Parameter(dtorch.zeros(4, 12, device_mesh=mesh, placements=marked))
    source = {"a": torch.ones(3), "qkv": torch.arange(48.0).view(4, 12)}
    assert str(module.load_state_dict(source)) == "<All keys matched successfully>"
    assert torch.equal(module.qkv.to_torch(), source["qkv"]) and module.qkv.placements == marked
    assert torch.equal(module.a.to_torch(), source["a"])


@pytest.mark.parametrize("process", [False, True], ids=["thread", "process"])
def test_a_failure_while_loading_keeps_its_class_and_names_the_entry(
    process: bool, worker_pools: PoolKeeper
) -> None:
    """What no check can know before the load (here: the module's graph was closed) raises as
    it is, a GraphError that callers catch as such, with a note naming the entry."""
    pool = worker_pools.pool() if process else None
    own = dtorch.Graph(dtorch.GraphOption(per_device_per_process=process, worker_pool=pool))
    with own.as_default():
        layer = nn.Linear(2, 2)
    own.close()
    with pytest.raises(dtorch.GraphError, match="this graph is closed") as caught:
        layer.load_state_dict({"weight": torch.ones(2, 2), "bias": torch.zeros(2)})
    assert any('while loading "weight"; 0 of 2' in note for note in caught.value.__notes__)


def test_the_training_flag_deletes_as_torch_s_does() -> None:
    layer, reference = nn.ReLU(), torch.nn.ReLU()
    del layer.training, reference.training
    assert not hasattr(layer, "training") and not hasattr(reference, "training")
    layer.training = False
    assert layer.training is False and vars(layer)["training"] is False
