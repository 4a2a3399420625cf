"""Lean decoder layers for Llama-style models (transformers' Llama and Qwen2): the same arithmetic as transformers'
layer with less Python between the kernels, and the projections that read the same input fused into one call.

Why (issue 46, docs/CPU.md): a one-row decode step of the bundled 1.5B spent about 11 of its 41-45 ms between
operators. Each transformers layer makes about twenty module calls (the attention, the MLP, two norms, seven
projections, each through its kernel's own module, the activation) and applies the rotary embedding and the norms
through helpers. A LeanDecoderLayer computes the same thing in one function: the norms and the rotary embedding
inline, op for op as transformers writes them, and each projection called once per input it reads.

Fusing: where a weight format is applied (engine/quant/weights.py), the projections that read one input (q, k and v;
gate and up) are stacked into one linear layer, so a one-row step makes four kernel calls a layer instead of seven
and each call covers more output features. Only neighbours of the same kind are stacked (the same bias, dtype and,
for int4-w8a8, whether their weights lie on a 4-bit grid: a GGUF keeps some v projections in 6 bits, and stacking
them with q and k would take the 4-bit kernel from q and k). Each output feature's products are those of its own
weight row: with the integer kernels a stacked call computes what the separate calls did, bit for bit (tested);
a float GEMM may block a wider weight differently and round within float precision.

The layer keeps transformers' keywords and cache interface (RaggedKVCache, DynamicCache, a packed call's rows), and
calls the attention function the model's config names (engine/attention.py's packed SDPA while the engine runs).
Not kept: the attention weights transformers records from each attention module's own forward (output_attentions),
which no longer runs; the engine never asks for them. Lean layers come with a weight format (the CPU's formats);
a model in its native weights keeps transformers' layers.
"""

from __future__ import annotations

import functools
import sys
from dataclasses import dataclass

import torch
from torch import nn
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

LEAN_LAYERS = {"llama": "LlamaDecoderLayer", "qwen2": "Qwen2DecoderLayer"}  # model type -> the layer it mirrors
ATTENTION_INPUTS = ("q_proj", "k_proj", "v_proj")  # projections of the normed hidden state, in this order
MLP_INPUTS = ("gate_proj", "up_proj")  # projections of the second normed hidden state


@dataclass(frozen=True)
class Projections:
    """How a module's projections of one input are computed: per call, the attribute of the linear layer and the
    widths its output splits into (one width: a projection of its own; several: stacked ones, in order)."""

    calls: tuple[tuple[str, tuple[int, ...]], ...]

    @staticmethod
    def separate(owner: nn.Module, names: tuple[str, ...]) -> Projections:
        return Projections(tuple((name, (getattr(owner, name).out_features,)) for name in names))

    def apply(self, owner: nn.Module, x: torch.Tensor) -> list[torch.Tensor]:
        """x [..., in] -> each projection's output [..., out_i], in the order of the names."""
        outputs = []
        for name, widths in self.calls:
            y = getattr(owner, name)(x)
            outputs.extend(y.split(widths, dim=-1) if len(widths) > 1 else (y,))
        return outputs


def rms_norm(x: torch.Tensor, norm: nn.Module) -> torch.Tensor:
    """transformers' Llama/Qwen2 RMSNorm, op for op: normalized in fp32, scaled in the input's dtype."""
    h = x.to(torch.float32)
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + norm.variance_epsilon)
    return norm.weight * h.to(x.dtype)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class LeanDecoderLayer(nn.Module):
    """A Llama/Qwen2 decoder layer's forward in one function, over the layer's own modules (the weights and their
    names stay; a stacked projection is named after its parts, e.g. `q_k_v_proj`). Not made directly: make_lean
    turns a layer into `Lean<its class>`, a subclass of both, so that it stays what transformers looks for (the
    hidden states it records per layer, a layer counted by its class)."""

    def _adopt(self) -> None:
        """The lean forward's view of the layer's modules (called once the layer is of its lean class)."""
        self.attention_inputs = Projections.separate(self.self_attn, ATTENTION_INPUTS)
        self.mlp_inputs = Projections.separate(self.mlp, MLP_INPUTS)
        # the eager attention transformers falls back to for this model (its own module's)
        self.eager_attention = sys.modules[type(self.self_attn).__module__].eager_attention_forward
        self.silu = getattr(self.self_attn.config, "hidden_act", None) == "silu"  # else the MLP's own act_fn
        # Qwen2 hands its attention function the layer's sliding window (None where it has none); Llama does not
        window = getattr(self.self_attn, "sliding_window", None)
        self.attention_keywords = {"sliding_window": window} if hasattr(self.self_attn, "sliding_window") else {}

    def forward(
        self,
        hidden_states: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        cache=None,
        use_cache: bool | None = False,
        position_embeddings: tuple[torch.Tensor, torch.Tensor] | None = None,
        past_key_values=None,
        **kwargs,
    ) -> torch.Tensor:
        cache = cache if cache is not None else past_key_values
        kwargs = {"position_ids": position_ids, "use_cache": use_cache, **kwargs}  # on to the cache and attention
        normed = rms_norm(hidden_states, self.input_layernorm)
        hidden_states = hidden_states + self._attend(normed, attention_mask, position_embeddings, cache, kwargs)
        normed = rms_norm(hidden_states, self.post_attention_layernorm)
        gate, up = self.mlp_inputs.apply(self.mlp, normed)
        activated = nn.functional.silu(gate) if self.silu else self.mlp.act_fn(gate)
        return hidden_states + self.mlp.down_proj(activated * up)

    def _attend(self, x, attention_mask, position_embeddings, cache, kwargs) -> torch.Tensor:
        """Self-attention of x [B, q, hidden] (a packed call: [1, N, hidden]) -> its output projection."""
        attn = self.self_attn
        heads = (*x.shape[:-1], -1, attn.head_dim)
        query, key, value = (y.view(heads).transpose(1, 2) for y in self.attention_inputs.apply(attn, x))
        cos, sin = (part.unsqueeze(1) for part in position_embeddings)
        query = query * cos + rotate_half(query) * sin
        key = key * cos + rotate_half(key) * sin
        if cache is not None:
            key, value = cache.update(key, value, attn.layer_idx, kwargs=kwargs)
        attention = ALL_ATTENTION_FUNCTIONS.get_interface(attn.config._attn_implementation, self.eager_attention)
        out, _ = attention(
            attn,
            query,
            key,
            value,
            attention_mask,
            dropout=attn.attention_dropout if self.training else 0.0,
            scaling=attn.scaling,
            **self.attention_keywords,
            **kwargs,
        )
        return attn.o_proj(out.reshape(*x.shape[:-1], -1).contiguous())


def _decoder_layers(model: nn.Module) -> nn.ModuleList | None:
    """The model's decoder layers when they are the Llama/Qwen2 layers LeanDecoderLayer mirrors, else None."""
    config = getattr(model, "config", None)
    expected = LEAN_LAYERS.get(getattr(config, "model_type", None))
    layers = getattr(getattr(model, "model", None), "layers", None)
    if expected is None or not isinstance(layers, nn.ModuleList) or len(layers) == 0:
        return None
    for layer in layers:
        if type(layer).__name__ != expected and not isinstance(layer, LeanDecoderLayer):
            return None
    return layers


@functools.cache
def _lean_class(layer_class: type) -> type:
    """`Lean<layer_class>`: the lean forward first, the layer's own class behind it."""
    return type(f"Lean{layer_class.__name__}", (LeanDecoderLayer, layer_class), {})


def make_lean(model: nn.Module) -> list[tuple[str, LeanDecoderLayer]]:
    """Make a Llama/Qwen2 model's decoder layers lean, in place: each becomes an instance of its lean class (the
    same object, modules and weights); returns (name, layer) for each, [] for any other model."""
    layers = _decoder_layers(model)
    if layers is None:
        return []
    for layer in layers:
        if not isinstance(layer, LeanDecoderLayer):
            layer.__class__ = _lean_class(type(layer))
            layer._adopt()
    prefix = next(name for name, module in model.named_modules() if module is layers)
    return [(f"{prefix}.{index}", layer) for index, layer in enumerate(layers)]


def fuse_projections(model: nn.Module, kind) -> dict[str, tuple[str, ...]]:
    """Make the model's layers lean and stack each run of neighbouring same-input projections (q, k, v; gate, up)
    that are nn.Linear of one kind into one nn.Linear, in place. kind(full name) -> a value that must be equal
    within a run (besides bias, dtype and device). Returns {stacked layer's full name: its parts' full names}."""
    stacked = {}
    for prefix, layer in make_lean(model):
        for part_of, names, attribute in (
            ("self_attn", ATTENTION_INPUTS, "attention_inputs"),
            ("mlp", MLP_INPUTS, "mlp_inputs"),
        ):
            owner, owner_name = getattr(layer, part_of), f"{prefix}.{part_of}"
            if tuple(name for name, _ in getattr(layer, attribute).calls) != names:
                continue  # stacked already
            calls = []
            for run in _runs(owner, names, lambda name, n=owner_name: kind(f"{n}.{name}")):
                if len(run) == 1:
                    calls.append((run[0], (getattr(owner, run[0]).out_features,)))
                    continue
                name = "_".join(part.removesuffix("_proj") for part in run) + "_proj"
                parts = [getattr(owner, part) for part in run]
                setattr(owner, name, _stack(parts))
                for part in run:
                    delattr(owner, part)
                calls.append((name, tuple(part.out_features for part in parts)))
                stacked[f"{owner_name}.{name}"] = tuple(f"{owner_name}.{part}" for part in run)
            setattr(layer, attribute, Projections(tuple(calls)))
    return stacked


def _runs(owner: nn.Module, names: tuple[str, ...], kind) -> list[list[str]]:
    """The names split into runs of neighbours that can be stacked: nn.Linear of the same kind, bias, dtype, device."""

    def key(name: str):
        linear = getattr(owner, name)
        if type(linear) is not nn.Linear:
            return object()  # equal to nothing: a layer already in another format stays alone
        return (kind(name), linear.bias is None, linear.weight.dtype, linear.weight.device, linear.in_features)

    runs: list[list[str]] = []
    previous = None
    for name in names:
        current = key(name)
        if runs and current == previous:
            runs[-1].append(name)
        else:
            runs.append([name])
        previous = current
    return runs


def _stack(parts: list[nn.Linear]) -> nn.Linear:
    """One nn.Linear whose output features are the parts' in order."""
    first = parts[0]
    out_features = sum(part.out_features for part in parts)
    stacked = nn.Linear(first.in_features, out_features, bias=first.bias is not None, device="meta")
    stacked.weight = nn.Parameter(torch.cat([part.weight.detach() for part in parts]), requires_grad=False)
    if first.bias is not None:
        stacked.bias = nn.Parameter(torch.cat([part.bias.detach() for part in parts]), requires_grad=False)
    return stacked
