"""The recurrent cells ``RNNCell``, ``LSTMCell`` and ``GRUCell``, and the one-time-step
functions the recurrent layers (``dtorch.nn.modules.rnn``) share with them.

torch.nn's constructors plus ``device_mesh=``; parameters with torch's names (``weight_ih``,
``weight_hh``, ``bias_ih``, ``bias_hh``), shapes and draws (uniform on ``[-1/sqrt(h),
1/sqrt(h)]`` in torch's order, so the same seed gives torch's values), Replicate on every dim of
the layer's mesh. A step is a composite of dtorch operators (``linear``, ``sigmoid``, ``tanh``,
``relu``, elementwise arithmetic), torch's gate order (LSTM: i, f, g, o; GRU: r, z, n).
Placements: the batch dim may be sharded (each device steps its own rows); any other placement
of the input or the state (a sharded feature dim, Partial) is redistributed to Replicate first,
and the state to the input's batch layout.

Example:
    >>> import torch, dtorch
    >>> ref = torch.nn.GRUCell(3, 2)
    >>> m = dtorch.nn.GRUCell(3, 2)
    >>> m.load_state_dict(ref.state_dict())
    <All keys matched successfully>
    >>> x = torch.randn(4, 3)
    >>> torch.allclose(m(dtorch.from_torch(x)).to_torch(), ref(x), atol=1e-6)
    True
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch

from dtorch.api.creation import empty, zeros
from dtorch.api.ops.linalg import linear
from dtorch.api.record import tensor_arg
from dtorch.api.tensor import Tensor
from dtorch.errors import ParamError, ShapeError
from dtorch.ir.placement import Placement, Replicate, Shard
from dtorch.nn.modules.linear import Device, check_features, check_float, resolve_mesh, uniform_
from dtorch.nn.modules.module import Module
from dtorch.nn.parameter import Parameter

#: A recurrent state: ``(h,)``, or ``(h, c)`` for an LSTM.
State = tuple[Tensor, ...]
#: One time step: (input projection, state, weight_hh, bias_hh, weight_hr) -> the new state.
Step = Callable[[Tensor, State, Tensor, Tensor | None, Tensor | None], State]


def _simple_step(activation: Callable[[Tensor], Tensor]) -> Step:
    # h' = act(x W_ih^T + b_ih + h W_hh^T + b_hh): the input part comes precomputed
    def step(xp: Tensor, state: State, w_hh: Tensor, b_hh: Tensor | None, _: Any) -> State:
        return (activation(xp + linear(state[0], w_hh, b_hh)),)

    return step


def lstm_step(
    xp: Tensor, state: State, w_hh: Tensor, b_hh: Tensor | None, w_hr: Tensor | None
) -> State:
    """torch's LSTM step: gates i, f, g, o; ``c' = f c + i g``, ``h' = o tanh(c')``,
    projected by ``weight_hr`` when the layer has ``proj_size``."""
    i, f, g, o = (xp + linear(state[0], w_hh, b_hh)).chunk(4, -1)
    c = f.sigmoid() * state[1] + i.sigmoid() * g.tanh()
    h = o.sigmoid() * c.tanh()
    return (h if w_hr is None else linear(h, w_hr), c)


def gru_step(xp: Tensor, state: State, w_hh: Tensor, b_hh: Tensor | None, _: Any) -> State:
    """torch's GRU step: gates r, z, n; ``n = tanh(x_n + r (h W_hn^T + b_hn))``,
    ``h' = (1 - z) n + z h``."""
    h = state[0]
    x_r, x_z, x_n = xp.chunk(3, -1)
    h_r, h_z, h_n = linear(h, w_hh, b_hh).chunk(3, -1)
    r, z = (x_r + h_r).sigmoid(), (x_z + h_z).sigmoid()
    n = (x_n + r * h_n).tanh()
    return (n + z * (h - n),)


#: The step of each mode torch's RNNBase names, and its gate count.
STEPS: dict[str, tuple[Step, int]] = {
    "RNN_TANH": (_simple_step(lambda t: t.tanh()), 1),
    "RNN_RELU": (_simple_step(lambda t: t.relu()), 1),
    "LSTM": (lstm_step, 4),
    "GRU": (gru_step, 3),
}


def rnn_mode(nonlinearity: Any) -> str:
    """The RNN mode of a nonlinearity name. Another is refused at construction (torch's
    RNN raises ValueError there, its RNNCell RuntimeError at the first call: a ParamError is
    both)."""
    modes = {"tanh": "RNN_TANH", "relu": "RNN_RELU"}
    if not isinstance(nonlinearity, str) or nonlinearity not in modes:
        raise ParamError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or 'relu'.")
    return modes[nonlinearity]


def batch_layout(t: Tensor, batch_dim: int, out_dim: int) -> list[Placement]:
    """Per mesh dim: Shard(``out_dim``) where ``t`` is sharded on its ``batch_dim``, else
    Replicate (a sharded feature or time dim, or Partial, is gathered: the steps need whole
    rows)."""
    return [Shard(out_dim) if _shards(p, batch_dim, t.ndim) else Replicate() for p in t.placements]


def _shards(placement: Placement, dim: int, ndim: int) -> bool:
    # a Shard of ``dim`` (counted from either end) of an ``ndim``-D tensor
    return placement.is_shard() and placement.get_shard_index() % ndim == dim


def moved(t: Tensor, placements: Sequence[Placement]) -> Tensor:
    """``t`` with ``placements`` (itself when it has them already: no operator recorded)."""
    if list(t.placements) == list(placements):
        return t
    return t.redistribute(t.device_mesh, list(placements))


def unpack_states(layer: str, hx: Any, count: int) -> tuple[Any, ...]:
    """``hx`` as a tuple of ``count`` states: itself for one, an (h, c) pair for an LSTM
    (torch's TypeError for anything else)."""
    if count == 1:
        return (hx,)
    if not isinstance(hx, tuple | list) or len(hx) != count:
        raise TypeError(f"{layer}: hx must be a tuple (h_0, c_0) of dtorch Tensors, got "
                        f"{type(hx).__name__}")  # fmt: skip
    return tuple(hx)


def new_parameter(shape: tuple[int, ...], dtype: torch.dtype | None, mesh: Any) -> Parameter:
    """An undrawn Parameter, Replicate on every dim of ``mesh`` (torch's ``torch.empty``)."""
    return Parameter(empty(shape, dtype=dtype, device_mesh=mesh,
                           placements=[Replicate()] * mesh.ndim))  # fmt: skip


def draw_all(module: Module, hidden_size: int) -> None:
    """torch's ``reset_parameters`` of the recurrent modules: every parameter, in
    registration order, uniform on ``[-1/sqrt(hidden_size), 1/sqrt(hidden_size)]``."""
    bound = 1.0 / math.sqrt(hidden_size) if hidden_size > 0 else 0.0
    for param in module.parameters():
        uniform_(param, bound)


class _CellBase(Module):
    """torch's RNNCellBase: the parameters of one step, and ``forward``'s checks, unbatched
    input and zero default state."""

    _STATES = 1

    def __init__(self, input_size: int, hidden_size: int, bias: bool, device: Device,
                 dtype: torch.dtype | None, device_mesh: Any, mode: str) -> None:  # fmt: skip
        super().__init__()
        self._mode = mode
        layer = type(self).__name__
        sizes = check_features(layer, input_size=input_size, hidden_size=hidden_size)
        self.input_size, self.hidden_size = sizes
        self.bias = bias
        dtype = check_float(layer, dtype)
        mesh = resolve_mesh(layer, device_mesh, device)
        gates = STEPS[self._mode][1] * self.hidden_size
        self.weight_ih = new_parameter((gates, self.input_size), dtype, mesh)
        self.weight_hh = new_parameter((gates, self.hidden_size), dtype, mesh)
        for name in ("bias_ih", "bias_hh"):
            param = new_parameter((gates,), dtype, mesh) if bias else None
            self.register_parameter(name, param)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Draw every parameter again, as torch's cells do."""
        draw_all(self, self.hidden_size)

    def _run(self, input: Tensor, hx: Any) -> State:
        layer = type(self).__name__
        if isinstance(input, torch.nn.utils.rnn.PackedSequence):
            raise TypeError(f"{layer}: a PackedSequence is not supported; pass a dtorch.Tensor")
        tensor_arg(layer, input)
        if input.ndim not in (1, 2):
            raise ShapeError(f"{layer}: Expected input to be 1D or 2D, got {input.ndim}D instead")
        self._check_input(input)
        batched = input.ndim == 2
        x = input if batched else input.unsqueeze(0)
        x = moved(x, batch_layout(x, 0, 0))
        states = self._states(x, hx, batched)
        step = STEPS[self._mode][0]
        out = step(linear(x, self.weight_ih, self.bias_ih), states, self.weight_hh,
                   self.bias_hh, None)  # fmt: skip
        return out if batched else tuple(s.squeeze(0) for s in out)

    def _check_input(self, input: Tensor) -> None:
        layer = type(self).__name__
        if input.shape[-1] != self.input_size:  # torch's ATen message
            raise ShapeError(f"{layer}: input has inconsistent input_size: got "
                             f"{input.shape[-1]} expected {self.input_size}")  # fmt: skip
        if input.dtype != self.weight_ih.dtype:
            raise ParamError(f"{layer}: input dtype ({input.dtype}) does not match weight dtype "
                             f"({self.weight_ih.dtype})")  # fmt: skip

    def _states(self, x: Tensor, hx: Any, batched: bool) -> State:
        # zeros laid out as the batch, or the given states checked and moved there
        layout = batch_layout(x, 0, 0)
        shape = (x.shape[0], self.hidden_size)
        if hx is None:
            made = zeros(shape, dtype=x.dtype, device_mesh=x.device_mesh, placements=layout,
                         graph=x.graph)  # fmt: skip
            return (made,) * self._STATES
        given = unpack_states(type(self).__name__, hx, self._STATES)
        return tuple(self._state(h, i, batched, shape, layout) for i, h in enumerate(given))

    def _state(self, h: Any, i: int, batched: bool, shape: tuple[int, ...],
               layout: list[Placement]) -> Tensor:  # fmt: skip
        layer = type(self).__name__
        label = "hx" if self._STATES == 1 else f"hx[{i}]"
        tensor_arg(layer, h, label)
        if h.ndim not in (1, 2) or (h.ndim == 2) != batched:
            raise ShapeError(f"{layer}: Expected {label} to be {2 if batched else 1}D as the "
                             f"input, got {h.ndim}D instead")  # fmt: skip
        h = h if batched else h.unsqueeze(0)
        if tuple(h.shape) != shape:
            raise ShapeError(f"{layer}: {label} must have shape {list(shape)} (batch, "
                             f"hidden_size), got {list(h.shape)}")  # fmt: skip
        if h.dtype != self.weight_ih.dtype:  # torch's matmul refuses a mix (RuntimeError)
            raise ParamError(f"{layer}: {label} dtype ({h.dtype}) does not match weight dtype "
                             f"({self.weight_ih.dtype})")  # fmt: skip
        return moved(h, layout)

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        s += "" if self.bias is True else f", bias={self.bias}"
        mode = getattr(self, "nonlinearity", "tanh")
        return s if mode == "tanh" else f"{s}, nonlinearity={mode}"


class RNNCell(_CellBase):
    """``h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh)`` (or relu): torch.nn.RNNCell.

    Example:
        >>> import dtorch
        >>> m = dtorch.nn.RNNCell(3, 2, nonlinearity="relu")
        >>> m(dtorch.ones(4, 3)).shape, m
        (torch.Size([4, 2]), RNNCell(3, 2, nonlinearity=relu))
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 nonlinearity: str = "tanh", device: Device = None,
                 dtype: torch.dtype | None = None, *, device_mesh: Any = None) -> None:  # fmt: skip
        mode = rnn_mode(nonlinearity)
        super().__init__(input_size, hidden_size, bias, device, dtype, device_mesh, mode)
        self.nonlinearity = nonlinearity

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        return self._run(input, hx)[0]


class LSTMCell(_CellBase):
    """torch.nn.LSTMCell: ``forward(input, (h, c))`` returns ``(h', c')``.

    Example:
        >>> import dtorch
        >>> h, c = dtorch.nn.LSTMCell(3, 2)(dtorch.ones(3))
        >>> h.shape, c.shape
        (torch.Size([2]), torch.Size([2]))
    """

    _STATES = 2

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 device: Device = None, dtype: torch.dtype | None = None, *,
                 device_mesh: Any = None) -> None:  # fmt: skip
        super().__init__(input_size, hidden_size, bias, device, dtype, device_mesh, "LSTM")

    def forward(self, input: Tensor, hx: tuple[Tensor, Tensor] | None = None) -> State:
        return self._run(input, hx)


class GRUCell(_CellBase):
    """torch.nn.GRUCell (gates r, z, n).

    Example:
        >>> import dtorch
        >>> dtorch.nn.GRUCell(3, 2, bias=False)
        GRUCell(3, 2, bias=False)
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 device: Device = None, dtype: torch.dtype | None = None, *,
                 device_mesh: Any = None) -> None:  # fmt: skip
        super().__init__(input_size, hidden_size, bias, device, dtype, device_mesh, "GRU")

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        return self._run(input, hx)[0]


__all__ = ["GRUCell", "LSTMCell", "RNNCell"]
