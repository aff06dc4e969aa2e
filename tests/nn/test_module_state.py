"""dtorch.nn.Module's state hooks against torch.nn.Module's, on the same code: extra state,
``state_dict``/``_save_to_state_dict``/``_load_from_state_dict`` overrides, the state-dict and
load hooks, ``_metadata`` and positional arguments, torch's load errors and its 0-dim
backward compatibility; thread and process mode."""

from __future__ import annotations

import warnings
from types import ModuleType
from typing import Any

import pytest
import torch

import dtorch
from dtorch import nn

pytestmark = pytest.mark.timeout(120)


def _values(sd: Any) -> dict[str, Any]:
    """A state dict's values as torch tensors (other values as they are)."""
    return {k: v.to_torch() if isinstance(v, dtorch.Tensor) else v for k, v in sd.items()}


def _message(call: Any, *args: Any) -> str:
    """The message of the RuntimeError ``call(*args)`` raises."""
    with pytest.raises(RuntimeError) as error:
        call(*args)
    return str(error.value)


def _same(ours: Any, ref: Any) -> None:
    ours, ref = _values(ours), _values(ref)
    assert list(ours) == list(ref)
    for key, value in ref.items():
        if isinstance(value, torch.Tensor):
            assert torch.equal(ours[key], value.detach()), key
        else:
            assert ours[key] == value, key


def _counter(lib: ModuleType) -> Any:
    class Counter(lib.Module):
        def __init__(self) -> None:
            super().__init__()
            self.proj = lib.Linear(2, 2)
            self.calls = 3

        def get_extra_state(self) -> Any:
            return {"calls": self.calls}

        def set_extra_state(self, state: Any) -> None:
            self.calls = state["calls"]

    return lib.Sequential(Counter(), lib.ReLU())


def test_extra_state_saves_and_loads(graph: dtorch.Graph) -> None:
    ref, ours = _counter(torch.nn), _counter(nn)
    ours.load_state_dict(ref.state_dict())
    _same(ours.state_dict(), ref.state_dict())
    sd = {**ref.state_dict(), "0._extra_state": {"calls": 9}}
    for model in (ref, ours):
        assert repr(model.load_state_dict(sd)) == "<All keys matched successfully>"
        assert model[0].calls == 9
    lacking = {k: v for k, v in sd.items() if k != "0._extra_state"}
    assert _message(ours.load_state_dict, lacking) == _message(ref.load_state_dict, lacking)
    assert ours.load_state_dict(lacking, strict=False) == ref.load_state_dict(lacking, strict=False)
    plain = {**torch.nn.Linear(2, 2).state_dict(), "_extra_state": 1}
    assert nn.Linear(2, 2).load_state_dict(plain, strict=False) == torch.nn.Linear(
        2, 2
    ).load_state_dict(plain, strict=False)


def test_default_extra_state_methods_raise_as_torch(graph: dtorch.Graph) -> None:
    for method, args in (("get_extra_state", ()), ("set_extra_state", (1,))):
        with pytest.raises(RuntimeError) as ref:
            getattr(torch.nn.ReLU(), method)(*args)
        with pytest.raises(RuntimeError) as ours:
            getattr(nn.ReLU(), method)(*args)
        assert str(ours.value) == str(ref.value)


def _overriding(lib: ModuleType) -> Any:
    class Extra(lib.Linear):
        def state_dict(self, *args: Any, **kwargs: Any) -> Any:
            out = super().state_dict(*args, **kwargs)
            out[kwargs.get("prefix", "") + "extra"] = torch.zeros(1)
            return out

    class Saved(lib.Linear):
        def _save_to_state_dict(self, destination: Any, prefix: str, keep_vars: bool) -> None:
            destination[prefix + "w2"] = self.weight if keep_vars else self.weight.detach()

    class Renamed(lib.Linear):
        def _load_from_state_dict(self, state_dict: Any, prefix: str, *args: Any) -> None:
            if prefix + "kernel" in state_dict:
                state_dict[prefix + "weight"] = state_dict.pop(prefix + "kernel")
            super()._load_from_state_dict(state_dict, prefix, *args)

    return lib.Sequential(Extra(2, 2), Saved(2, 2), lib.Sequential(Renamed(2, 2)))


def test_subclass_overrides_are_used(graph: dtorch.Graph) -> None:
    ref, ours = _overriding(torch.nn), _overriding(nn)
    assert list(ours.state_dict()) == list(ref.state_dict())
    sd = {k: torch.randn(v.shape) for k, v in ref.state_dict().items()}
    sd["2.0.kernel"] = sd.pop("2.0.weight")
    assert list(ours.load_state_dict(sd, strict=False)) == list(
        ref.load_state_dict(sd, strict=False)
    )
    assert torch.equal(ours[2][0].weight.to_torch(), ref[2][0].weight.detach())
    assert torch.equal(ours[2][0].weight.to_torch(), sd["2.0.kernel"])


def test_metadata_and_positional_arguments(graph: dtorch.Graph) -> None:
    def make(lib: ModuleType) -> Any:
        return lib.Sequential(lib.Linear(2, 2), lib.Sequential(lib.BatchNorm2d(2)))

    ref, ours = make(torch.nn), make(nn)
    assert ours.state_dict()._metadata == ref.state_dict()._metadata
    for model in (ref, ours):
        with pytest.warns(FutureWarning, match="Positional args are being deprecated"):
            keys = list(model.state_dict(None, "p."))
        assert keys[0] == "p.0.weight"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        assert list(ours.state_dict(None, "p.")) == list(ref.state_dict(None, "p."))


def _hooked(lib: ModuleType, log: list) -> Any:
    model = lib.Sequential(lib.Linear(2, 2))
    model[0].register_state_dict_pre_hook(lambda m, prefix, keep: log.append(("pre", prefix)))
    model.register_state_dict_post_hook(lambda m, sd, prefix, meta: log.append(("post", len(sd))))

    def rename(m: Any, sd: Any, prefix: str, *rest: Any) -> None:
        log.append(("load-pre", prefix))
        if prefix + "w" in sd:
            sd[prefix + "weight"] = sd.pop(prefix + "w")

    model[0].register_load_state_dict_pre_hook(rename)
    model.register_load_state_dict_post_hook(lambda m, keys: keys.missing_keys.clear())
    return model


def test_state_hooks_match_torch(graph: dtorch.Graph) -> None:
    logs: list[list] = [[], []]
    ref, ours = _hooked(torch.nn, logs[0]), _hooked(nn, logs[1])
    ours.state_dict(), ref.state_dict()
    sd = {"0.w": torch.ones(2, 2)}  # no bias: the post-hook clears the missing key
    assert ours.load_state_dict(sd) == ref.load_state_dict(sd)
    assert logs[0] == logs[1]
    assert torch.equal(ours[0].weight.to_torch(), torch.ones(2, 2))
    bad = nn.Linear(2, 2)
    bad.register_state_dict_post_hook(lambda m, sd, prefix, meta: sd)
    with pytest.raises(RuntimeError, match="state_dict post-hook must return None"):
        bad.state_dict()


def test_private_hooks_match_torch(graph: dtorch.Graph) -> None:
    """torch's private ``_register_state_dict_hook`` (may return a new dict, honoured at the
    root only) and ``_register_load_state_dict_pre_hook`` (``with_module`` or not)."""

    def run(lib: ModuleType) -> tuple[Any, list]:
        model, seen = lib.Sequential(lib.Linear(2, 2)), []
        model[0]._register_state_dict_hook(lambda m, sd, prefix, meta: {"child": 1})
        model._register_state_dict_hook(lambda m, sd, prefix, meta: {"keys": sorted(sd)})
        model[0]._register_load_state_dict_pre_hook(lambda sd, prefix, *rest: seen.append(prefix))
        model._register_load_state_dict_pre_hook(
            lambda m, sd, prefix, *rest: seen.append(type(m).__name__), with_module=True
        )
        model.load_state_dict({"0.weight": torch.ones(2, 2), "0.bias": torch.ones(2)})
        return model.state_dict(), seen

    assert run(nn) == run(torch.nn)
    for lib in (nn, torch.nn):
        model, hook = lib.Linear(2, 2), lambda m, sd, prefix, meta: None
        model.register_state_dict_post_hook(hook)
        with pytest.raises(RuntimeError, match="previously registered via register_state_dict"):
            model._register_state_dict_hook(hook)


def test_load_errors_and_zero_dim_match_torch(graph: dtorch.Graph) -> None:
    def make(lib: ModuleType) -> Any:
        model = lib.Linear(2, 1)
        model.scale = lib.Parameter(torch.tensor(1.0) if lib is torch.nn else dtorch.tensor(1.0))
        return model

    ref, ours = make(torch.nn), make(nn)
    sd = {**ref.state_dict(), "scale": torch.tensor([5.0])}
    assert ours.load_state_dict(sd) == ref.load_state_dict(sd)
    assert ours.scale.to_torch().item() == 5.0 and ours.scale.shape == ()
    for bad in ({**sd, "weight": [[1.0, 2.0]]}, {**sd, "scale": torch.tensor([5.0, 6.0])}):
        assert _message(ours.load_state_dict, bad) == _message(ref.load_state_dict, bad)


def test_safetensors_source_with_override(tmp_path: Any, graph: dtorch.Graph) -> None:
    from safetensors.torch import save_file

    ref, ours = _overriding(torch.nn), _overriding(nn)
    sd = {k: torch.randn(v.shape) for k, v in ref.state_dict().items() if k != "0.extra"}
    sd["2.0.kernel"] = sd.pop("2.0.weight")
    save_file(sd, str(tmp_path / "m.safetensors"))
    expected = ref.load_state_dict(sd, strict=False)
    assert ours.load_state_dict(tmp_path / "m.safetensors", strict=False) == expected
    assert torch.equal(ours[2][0].weight.to_torch(), sd["2.0.kernel"])
