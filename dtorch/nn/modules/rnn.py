"""The recurrent layers ``RNN``, ``LSTM`` and ``GRU`` (torch.nn's, on a mesh).

torch.nn's constructors (``num_layers``, ``nonlinearity`` for RNN, ``bias``, ``batch_first``,
``dropout``, ``bidirectional``, ``proj_size`` for LSTM, ``device``, ``dtype``) plus
``device_mesh=``; the parameters have torch's names (``weight_ih_l0``, ``bias_hh_l1_reverse``,
``weight_hr_l0``...), shapes and draws (every one uniform on ``[-1/sqrt(hidden_size),
1/sqrt(hidden_size)]`` in torch's order: the same seed gives torch's values), Replicate on every
dim of the layer's mesh, so a torch layer's ``state_dict`` loads both ways.

``forward(input, hx=None)`` returns ``(output, h_n)`` (LSTM: ``(output, (h_n, c_n))``) as torch
does, for a batched (3-D) or unbatched (2-D) input. It is a composite of dtorch operators run
from the client: each layer and direction projects the whole sequence once (``linear``), then
steps one time index at a time (``dtorch.nn.modules.rnn_cell``'s steps), the outputs stacked;
the directions are concatenated and, in training with ``dropout > 0``, dropped out between
layers with ``dtorch.nn.functional.dropout`` (torch's draws). Placements: the batch dim may be
sharded on any mesh dims (each device runs its own sequences, the outputs and ``h_n`` keep the
batch sharded); a sharded time or feature dim or a Partial input is redistributed to
Replicate first, and ``hx`` to the input's batch layout. A ``PackedSequence`` is refused
(TypeError): pass a padded tensor.

Example:
    >>> import torch, dtorch
    >>> ref = torch.nn.LSTM(3, 4, num_layers=2, bidirectional=True)
    >>> m = dtorch.nn.LSTM(3, 4, num_layers=2, bidirectional=True)
    >>> m.load_state_dict(ref.state_dict())
    <All keys matched successfully>
    >>> x = torch.randn(5, 2, 3)
    >>> out, (h, c) = m(dtorch.from_torch(x))
    >>> want, (h_want, c_want) = ref(x)
    >>> torch.allclose(out.to_torch(), want, atol=1e-5), h.shape, c.shape
    (True, torch.Size([4, 2, 4]), torch.Size([4, 2, 4]))
"""

from __future__ import annotations

import numbers
import warnings
from typing import Any

import torch

from dtorch.api.creation import zeros
from dtorch.api.ops.dropout import dropout
from dtorch.api.ops.linalg import linear
from dtorch.api.ops.shape import cat, stack
from dtorch.api.record import tensor_arg
from dtorch.api.tensor import Tensor
from dtorch.errors import ParamError, ShapeError
from dtorch.ir.placement import Placement
from dtorch.nn.modules.linear import Device, check_float, resolve_mesh
from dtorch.nn.modules.module import Module
from dtorch.nn.modules.rnn_cell import (
    STEPS,
    State,
    batch_layout,
    draw_all,
    moved,
    new_parameter,
    rnn_mode,
    unpack_states,
)

#: One direction of one layer: weight_ih, weight_hh, bias_ih, bias_hh, weight_hr.
Weights = tuple[Tensor, Tensor, Tensor | None, Tensor | None, Tensor | None]


def _check_config(input_size: Any, hidden_size: Any, num_layers: Any, bias: Any,
                  batch_first: Any, dropout: Any, proj_size: Any) -> None:  # fmt: skip
    # torch's RNNBase checks, in its order, with its classes and messages
    is_number = isinstance(dropout, numbers.Real) and not isinstance(dropout, bool)
    if not is_number or not 0 <= dropout <= 1:
        raise ValueError("dropout should be a number in range [0, 1] representing the "
                         "probability of an element being zeroed")  # fmt: skip
    if dropout > 0 and num_layers == 1:
        warnings.warn("dropout option adds dropout after all but last recurrent layer, so "
                      "non-zero dropout expects num_layers greater than 1, but got "
                      f"dropout={dropout} and num_layers={num_layers}", stacklevel=4)  # fmt: skip
    for name, value in (("bias", bias), ("batch_first", batch_first)):
        if not isinstance(value, bool):
            raise TypeError(f"{name} should be of type bool, got: {type(value).__name__}")
    for name, value in (("input_size", input_size), ("hidden_size", hidden_size)):
        if not isinstance(value, int):
            raise TypeError(f"{name} should be of type int, got: {type(value).__name__}")
        if value <= 0:
            raise ValueError(f"{name} must be greater than zero")
    if not isinstance(num_layers, int) or num_layers <= 0:
        raise ValueError(f"num_layers must be greater than zero (an int), got {num_layers!r}")
    if not isinstance(proj_size, int) or proj_size < 0:
        raise ValueError("proj_size should be a positive integer or zero to disable projections")
    if proj_size >= hidden_size:
        raise ValueError("proj_size has to be smaller than hidden_size")


class RNNBase(Module):
    """torch.nn.RNNBase: the parameters of every layer and direction, and ``forward`` (see
    the module docstring); ``mode`` is ``"RNN_TANH"``, ``"RNN_RELU"``, ``"LSTM"`` or
    ``"GRU"``.

    Example:
        >>> import dtorch
        >>> m = dtorch.nn.GRU(3, 4, num_layers=2, bias=False)
        >>> [name for name, _ in m.named_parameters()]
        ['weight_ih_l0', 'weight_hh_l0', 'weight_ih_l1', 'weight_hh_l1']
    """

    def __init__(self, mode: str, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, proj_size: int = 0, device: Device = None,
                 dtype: torch.dtype | None = None, *, device_mesh: Any = None) -> None:  # fmt: skip
        super().__init__()
        _check_config(input_size, hidden_size, num_layers, bias, batch_first, dropout,
                      proj_size)  # fmt: skip
        self.mode, self.input_size, self.hidden_size = mode, input_size, hidden_size
        self.num_layers, self.bias, self.batch_first = num_layers, bias, batch_first
        self.dropout, self.bidirectional = float(dropout), bool(bidirectional)
        self.proj_size = proj_size
        layer = type(self).__name__
        self._make_parameters(check_float(layer, dtype), resolve_mesh(layer, device_mesh, device))
        self.reset_parameters()

    def _make_parameters(self, dtype: torch.dtype | None, mesh: Any) -> None:
        # torch's names, shapes and registration order (the order the draws follow)
        gates = STEPS[self.mode][1] * self.hidden_size
        real = self.proj_size or self.hidden_size
        for layer in range(self.num_layers):
            for suffix in self._suffixes():
                inputs = self.input_size if layer == 0 else real * len(self._suffixes())
                shapes: dict[str, tuple[int, ...]] = {
                    "weight_ih": (gates, inputs),
                    "weight_hh": (gates, real),
                }
                if self.bias:
                    shapes |= {"bias_ih": (gates,), "bias_hh": (gates,)}
                if self.proj_size:
                    shapes["weight_hr"] = (self.proj_size, self.hidden_size)
                for name, shape in shapes.items():
                    self.register_parameter(f"{name}_l{layer}{suffix}",
                                            new_parameter(shape, dtype, mesh))  # fmt: skip

    def _suffixes(self) -> tuple[str, ...]:
        return ("", "_reverse") if self.bidirectional else ("",)

    def reset_parameters(self) -> None:
        """Draw every parameter again, as torch's recurrent layers do."""
        draw_all(self, self.hidden_size)

    def flatten_parameters(self) -> None:
        """torch's cuDNN weight packing: nothing to do here (kept so torch code runs)."""

    @property
    def all_weights(self) -> list[list[Tensor]]:
        """torch's ``all_weights``: each layer and direction's parameters, in torch's order
        (weight_ih, weight_hh, then the biases and weight_hr where the layer has them).

        Example:
            >>> import dtorch
            >>> [len(w) for w in dtorch.nn.GRU(3, 4, bidirectional=True).all_weights]
            [4, 4]
        """
        return [
            [w for w in self._weights(layer, suffix) if w is not None]
            for layer in range(self.num_layers)
            for suffix in self._suffixes()
        ]

    def _weights(self, layer: int, suffix: str) -> Weights:
        # one direction's parameters by torch's names (None where the layer has none)
        def get(name: str) -> Any:
            return getattr(self, f"{name}_l{layer}{suffix}", None)

        return (get("weight_ih"), get("weight_hh"), get("bias_ih"), get("bias_hh"),
                get("weight_hr"))  # fmt: skip

    def forward(self, input: Tensor, hx: Any = None) -> tuple[Tensor, Any]:
        x, batched = self._time_major(input)
        states = self._initial_states(x, hx, batched)
        out, finals = self._layers(x, states)
        if not batched:
            out, finals = out.squeeze(1), tuple(f.squeeze(1) for f in finals)
        elif self.batch_first:
            out = out.transpose(0, 1)
        return out, (finals if self.mode == "LSTM" else finals[0])

    def _time_major(self, input: Any) -> tuple[Tensor, bool]:
        """The input checked, as (time, batch, feature), its batch laid out (see module)."""
        layer = type(self).__name__
        if isinstance(input, torch.nn.utils.rnn.PackedSequence):
            raise TypeError(f"{layer}: a PackedSequence is not supported; pass a padded "
                            "dtorch.Tensor (and its lengths, masked by hand)")  # fmt: skip
        tensor_arg(layer, input)
        self._check_input(layer, input)
        x = input.unsqueeze(1) if input.ndim == 2 else input
        x = x.transpose(0, 1) if input.ndim == 3 and self.batch_first else x
        return moved(x, batch_layout(x, 1, 1)), input.ndim == 3

    def _check_input(self, layer: str, input: Tensor) -> None:
        # torch's checks of the input, with its classes (ParamError/ShapeError derive from them)
        if input.ndim not in (2, 3):
            raise ShapeError(f"{layer}: Expected input to be 2D or 3D, got {input.ndim}D instead")
        weight = self.weight_ih_l0
        if input.dtype != weight.dtype:  # torch's ValueError
            raise ParamError(f"{layer}: input dtype ({input.dtype}) does not match weight "
                             f"dtype ({weight.dtype})")  # fmt: skip
        if input.shape[-1] != self.input_size:
            raise ShapeError(f"{layer}: input.size(-1) must be equal to input_size. Expected "
                             f"{self.input_size}, got {input.shape[-1]}")  # fmt: skip
        if input.shape[0 if input.ndim == 2 or not self.batch_first else 1] == 0:
            raise ShapeError(f"{layer}: Expected sequence length to be larger than 0 in RNN")

    def _state_shapes(self, x: Tensor) -> list[tuple[int, int, int]]:
        # h: (layers * directions, batch, proj_size or hidden_size); c: hidden_size
        rows, batch = self.num_layers * len(self._suffixes()), x.shape[1]
        shapes = [(rows, batch, self.proj_size or self.hidden_size)]
        return [*shapes, (rows, batch, self.hidden_size)] if self.mode == "LSTM" else shapes

    def _initial_states(self, x: Tensor, hx: Any, batched: bool) -> State:
        layout = batch_layout(x, 1, 1)
        shapes = self._state_shapes(x)
        if hx is None:
            return tuple(zeros(s, dtype=x.dtype, device_mesh=x.device_mesh, placements=layout,
                               graph=x.graph) for s in shapes)  # fmt: skip
        given = unpack_states(type(self).__name__, hx, len(shapes))
        return tuple(self._state(h, i, batched, shapes[i], layout) for i, h in enumerate(given))

    def _state(self, h: Any, i: int, batched: bool, shape: tuple[int, int, int],
               layout: list[Placement]) -> Tensor:  # fmt: skip
        layer = type(self).__name__
        label = "hx" if self.mode != "LSTM" else f"hx[{i}]"
        tensor_arg(layer, h, label)
        if h.ndim != (3 if batched else 2):  # torch's RuntimeError
            raise ShapeError(f"{layer}: For {3 if batched else 2}-D input, {label} should also "
                             f"be {3 if batched else 2}-D but got {h.ndim}-D tensor")  # fmt: skip
        h = h if batched else h.unsqueeze(1)
        if tuple(h.shape) != shape:
            raise ShapeError(f"{layer}: Expected {label} size {shape}, got {list(h.shape)}")
        if h.dtype != self.weight_ih_l0.dtype:  # torch's matmul refuses a mix (RuntimeError)
            raise ParamError(f"{layer}: {label} dtype ({h.dtype}) does not match weight dtype "
                             f"({self.weight_ih_l0.dtype})")  # fmt: skip
        return moved(h, layout)

    def _layers(self, x: Tensor, states: State) -> tuple[Tensor, State]:
        # each layer's directions, concatenated, dropped out before the next layer
        finals: list[list[Tensor]] = [[] for _ in states]
        suffixes = self._suffixes()
        for layer in range(self.num_layers):
            outs = []
            for d, suffix in enumerate(suffixes):
                row = layer * len(suffixes) + d
                start = tuple(s[row] for s in states)
                seq, last = self._direction(x, start, self._weights(layer, suffix), d == 1)
                outs.append(seq)
                for kept, value in zip(finals, last, strict=True):
                    kept.append(value)
            x = outs[0] if len(outs) == 1 else cat(outs, -1)
            if self.training and self.dropout > 0 and layer < self.num_layers - 1:
                x = dropout(x, self.dropout, True)
        return x, tuple(stack(kept) for kept in finals)

    def _direction(self, x: Tensor, state: State, weights: Weights,
                   reverse: bool) -> tuple[Tensor, State]:  # fmt: skip
        """One direction of one layer: the input projected once, then one step per time
        index (backwards for the reverse direction); the outputs in time order."""
        w_ih, w_hh, b_ih, b_hh, w_hr = weights
        projected = linear(x, w_ih, b_ih)
        step = STEPS[self.mode][0]
        steps = x.shape[0]
        outputs: list[Tensor] = [x] * steps  # each slot replaced below
        for t in reversed(range(steps)) if reverse else range(steps):
            state = step(projected[t], state, w_hh, b_hh, w_hr)
            outputs[t] = state[0]
        return stack(outputs), state

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        extras = [
            ("proj_size", self.proj_size, 0),
            ("num_layers", self.num_layers, 1),
            ("bias", self.bias, True),
            ("batch_first", self.batch_first, False),
            ("dropout", self.dropout, 0),
            ("bidirectional", self.bidirectional, False),
        ]
        shown = (f", {name}={value}" for name, value, default in extras if value != default)
        return s + "".join(shown)


def _no_proj(layer: str, proj_size: Any) -> None:
    # torch's refusal of proj_size by keyword, even 0
    if proj_size is not None:
        raise ValueError(f"{layer}: proj_size argument is only supported for LSTM, not RNN or GRU")


class RNN(RNNBase):
    """torch.nn.RNN: ``h_t = tanh(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh)`` (or relu).

    Example:
        >>> import dtorch
        >>> out, h = dtorch.nn.RNN(3, 4, nonlinearity="relu")(dtorch.ones(5, 2, 3))
        >>> out.shape, h.shape
        (torch.Size([5, 2, 4]), torch.Size([1, 2, 4]))
    """

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 nonlinearity: str = "tanh", bias: bool = True, batch_first: bool = False,
                 dropout: float = 0.0, bidirectional: bool = False, device: Device = None,
                 dtype: torch.dtype | None = None, *, proj_size: Any = None,
                 device_mesh: Any = None) -> None:  # fmt: skip
        _no_proj("RNN", proj_size)
        mode = rnn_mode(nonlinearity)
        super().__init__(mode, input_size, hidden_size, num_layers, bias, batch_first, dropout,
                         bidirectional, 0, device, dtype, device_mesh=device_mesh)  # fmt: skip
        self.nonlinearity = nonlinearity


class LSTM(RNNBase):
    """torch.nn.LSTM, ``proj_size`` included: ``forward`` returns ``(output, (h_n, c_n))``.

    Example:
        >>> import dtorch
        >>> m = dtorch.nn.LSTM(3, 4, proj_size=2, batch_first=True)
        >>> out, (h, c) = m(dtorch.ones(2, 5, 3))
        >>> out.shape, h.shape, c.shape
        (torch.Size([2, 5, 2]), torch.Size([1, 2, 2]), torch.Size([1, 2, 4]))
        >>> m
        LSTM(3, 4, proj_size=2, batch_first=True)
    """

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, proj_size: int = 0, device: Device = None,
                 dtype: torch.dtype | None = None, *, device_mesh: Any = None) -> None:  # fmt: skip
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional, proj_size, device, dtype,
                         device_mesh=device_mesh)  # fmt: skip


class GRU(RNNBase):
    """torch.nn.GRU (gates r, z, n).

    Example:
        >>> import dtorch
        >>> out, h = dtorch.nn.GRU(3, 4, bidirectional=True)(dtorch.ones(5, 3))
        >>> out.shape, h.shape
        (torch.Size([5, 8]), torch.Size([2, 4]))
    """

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, device: Device = None,
                 dtype: torch.dtype | None = None, *, proj_size: Any = None,
                 device_mesh: Any = None) -> None:  # fmt: skip
        _no_proj("GRU", proj_size)
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first, dropout,
                         bidirectional, 0, device, dtype, device_mesh=device_mesh)  # fmt: skip


__all__ = ["GRU", "LSTM", "RNN", "RNNBase"]
