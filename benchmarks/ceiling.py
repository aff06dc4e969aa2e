"""The bound of benchmarks/models.py: what two devices cannot beat on this machine.

A two-device forward must do each device's share of the arithmetic, on one torch thread per
device (the machine's two cores), and combine the shares where the model's sharding asks.
This module runs exactly that as plain torch, with no runtime at all: two persistent threads
of one torch thread each (as thread mode's kernel streams get them), each computing its
device's share of the forward in parallel with the other, an all-reduce being the sum of the
two threads' tensors behind a barrier. No recording, no scheduling, no placement logic, no
copies but the sums. A dtorch configuration's time over its bound's is the runtime's own
cost; the bound's time against one-process torch's is what the hardware leaves to win.

The shares are dtorch's: the tensor-parallel MLP splits the first linear's rows and the
second's columns (an all-reduce of the partial sums); the Llama on tp=2 runs half the heads
and half the intermediate features per device, with the norms, the rotary tables and the
residuals on both, a vocab-sharded embedding (masked lookup, all-reduce), two all-reduces
per layer and the lm head's columns gathered; dp=2 runs the whole model on half the batch.

Example:
    >>> pair = ThreadPair()
    >>> total = PairSum()
    >>> pair.run(lambda rank: total(rank, torch.tensor([rank + 1.0]))).__len__()
    2
    >>> pair.close()
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from dtorch.compiled_op import apply_rotary_emb  # the rotation dtorch's kernel runs
from dtorch.runtime.torch_threads import adopt, keeping_default

#: Seconds any wait of the pair may take before the sample fails (a share that hangs).
WAIT_S = 120.0


class ThreadPair:
    """Two persistent threads of one torch thread each; ``run(share)`` calls ``share(rank)``
    on both at once and returns their results by rank. ``close()`` stops them."""

    def __init__(self) -> None:
        self._jobs: list[queue.SimpleQueue[Any]] = [queue.SimpleQueue(), queue.SimpleQueue()]
        self._done: queue.SimpleQueue[tuple[int, Any, BaseException | None]] = queue.SimpleQueue()
        with keeping_default():  # adopt(1) in a thread also sets torch's process default
            self._threads = [threading.Thread(target=self._loop, args=(r,)) for r in (0, 1)]
            for thread in self._threads:
                thread.start()
            self.run(lambda rank: None)  # both have adopted before the default is restored

    def _loop(self, rank: int) -> None:
        adopt(1)
        torch.set_grad_enabled(False)  # per thread: the shares bound forwards without autograd
        while (share := self._jobs[rank].get()) is not None:
            try:
                self._done.put((rank, share(rank), None))
            except BaseException as error:  # handed to the caller of run
                self._done.put((rank, None, error))

    def run(self, share: Callable[[int], Any]) -> list[Any]:
        for jobs in self._jobs:
            jobs.put(share)
        results: list[Any] = [None, None]
        errors = []
        for _ in range(2):  # both, even after an error: the next run must not read this one's
            rank, result, error = self._done.get(timeout=WAIT_S)
            results[rank] = result
            errors += [] if error is None else [error]
        if errors:
            raise errors[0]
        return results

    def close(self) -> None:
        for jobs in self._jobs:
            jobs.put(None)
        for thread in self._threads:
            thread.join(WAIT_S)


class PairSum:
    """An all-reduce (sum) of the pair's tensors: each deposits its own, both add the two."""

    def __init__(self) -> None:
        self._slots: list[Any] = [None, None]
        self._barrier = threading.Barrier(2, timeout=WAIT_S)

    def __call__(self, rank: int, tensor: torch.Tensor, gather: int | None = None) -> Any:
        """The sum of both ranks' ``tensor``, or with ``gather`` their concatenation along it."""
        self._slots[rank] = tensor
        try:
            self._barrier.wait()
            both = (
                self._slots[0] + self._slots[1]
                if gather is None
                else torch.cat(self._slots, gather)
            )
            self._barrier.wait()  # both have read the slots before either writes them again
        except BaseException:
            self._barrier.abort()  # the other rank's wait fails at once instead of timing out
            raise
        return both


def halves(tensor: torch.Tensor, dim: int) -> tuple[torch.Tensor, ...]:
    """``tensor`` in two contiguous halves along ``dim`` (each device's shard)."""
    return tuple(part.contiguous() for part in tensor.chunk(2, dim))


# --- the MLP ----------------------------------------------------------------------------------


def mlp_share(model: torch.nn.Module, x: torch.Tensor) -> Callable[[int], torch.Tensor]:
    """The tensor-parallel MLP's share of a rank: rows of linear 0, columns of linear 1."""
    first, second = model[0], model[1]  # type: ignore[index]
    w1, b1, w2 = halves(first.weight, 0), halves(first.bias, 0), halves(second.weight, 1)
    total = PairSum()

    def share(rank: int) -> torch.Tensor:
        return total(rank, F.linear(F.linear(x, w1[rank], b1[rank]), w2[rank])) + second.bias

    return share


# --- data parallel ----------------------------------------------------------------------------


def batch_share(model: Callable[[torch.Tensor], Any], x: torch.Tensor) -> Callable[[int], Any]:
    """A data-parallel share: the whole model on the rank's half of the batch."""
    parts = halves(x, 0)
    return lambda rank: model(parts[rank])


# --- the Llama on tp=2 ------------------------------------------------------------------------


class LlamaTpShare:
    """transformers' ``LlamaForCausalLM`` split as examples/llama.py splits it on tp=2;
    ``share(rank)`` is the rank's forward of ``ids``, the full logits (gathered) its result."""

    def __init__(self, ref: Any, ids: torch.Tensor) -> None:
        from examples.llama import rotary_cos_sin

        config = ref.config
        self.ids, self.eps = ids, config.rms_norm_eps
        self.head_dim = config.hidden_size // config.num_attention_heads
        self.heads = config.num_attention_heads // 2
        self.kv_heads = config.num_key_value_heads // 2
        self.config, self.rotary = config, rotary_cos_sin
        self.total = PairSum()
        self.embed = halves(ref.model.embed_tokens.weight, 0)
        self.layers = [self._layer(layer) for layer in ref.model.layers]
        self.norm = ref.model.norm.weight
        self.head = halves(ref.lm_head.weight, 0)

    @staticmethod
    def _layer(layer: Any) -> dict[str, Any]:
        attn, mlp = layer.self_attn, layer.mlp
        cols = {n: halves(getattr(attn, n).weight, 0) for n in ("q_proj", "k_proj", "v_proj")}
        cols |= {n: halves(getattr(mlp, n).weight, 0) for n in ("gate_proj", "up_proj")}
        rows = {
            "o_proj": halves(attn.o_proj.weight, 1),
            "down_proj": halves(mlp.down_proj.weight, 1),
        }
        norms = {"in": layer.input_layernorm.weight, "post": layer.post_attention_layernorm.weight}
        return cols | rows | norms

    def _embedding(self, rank: int) -> torch.Tensor:
        # vocab-sharded: the rank's rows looked up, the others zero, summed over the ranks
        rows = self.embed[rank].shape[0]
        local = self.ids - rank * rows
        outside = (local < 0) | (local >= rows)
        found = F.embedding(local.masked_fill(outside, 0), self.embed[rank])
        return self.total(rank, found.masked_fill(outside[..., None], 0.0))

    def _attention(self, rank: int, w: dict[str, Any], x: torch.Tensor, cos_sin: Any) -> Any:
        batch, seq, _ = x.shape

        def split(name: str, heads: int) -> torch.Tensor:
            out = F.linear(x, w[name][rank]).view(batch, seq, heads, self.head_dim)
            return out.transpose(1, 2)

        q = apply_rotary_emb(split("q_proj", self.heads), *cos_sin)
        k = apply_rotary_emb(split("k_proj", self.kv_heads), *cos_sin)
        v = split("v_proj", self.kv_heads)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        out = out.transpose(1, 2).reshape(batch, seq, self.heads * self.head_dim)
        return self.total(rank, F.linear(out, w["o_proj"][rank]))

    def _mlp(self, rank: int, w: dict[str, Any], x: torch.Tensor) -> torch.Tensor:
        inner = F.silu(F.linear(x, w["gate_proj"][rank])) * F.linear(x, w["up_proj"][rank])
        return self.total(rank, F.linear(inner, w["down_proj"][rank]))

    def __call__(self, rank: int) -> torch.Tensor:
        h = self._embedding(rank)
        cos_sin = self.rotary(self.config, self.ids.shape[1])
        for w in self.layers:
            h = h + self._attention(
                rank, w, F.rms_norm(h, h.shape[-1:], w["in"], self.eps), cos_sin
            )
            h = h + self._mlp(rank, w, F.rms_norm(h, h.shape[-1:], w["post"], self.eps))
        h = F.rms_norm(h, h.shape[-1:], self.norm, self.eps)
        return self.total(rank, F.linear(h, self.head[rank]), gather=-1)
