"""Weight formats for CPU decoding: int8 weight-only linear layers (half the bytes of bf16 per step).

Decoding a few rows is memory-bound: each step reads every weight once, so the time per step follows the bytes of
the weights. `quantize_int8(model)` replaces every linear layer of the decoder and the output head with an
`Int8Linear`: per output channel, symmetric int8 weights and one scale (round to nearest), multiplied by
`torch._weight_int8pack_mm` with activations in the model's dtype. The embedding table stays as it is (a lookup
reads one row per token). Accuracy is measured, not assumed: benchmarks/eval_humaneval.py --weights int8.
"""
from __future__ import annotations

import torch
from torch import nn

WEIGHT_FORMATS = ("native", "int8")   # native: the weights as loaded (--dtype); int8: Int8Linear layers


class Int8Linear(nn.Module):
    """y = x @ (q * scale).T + bias, with q the int8 weights [out, in] and scale [out] in the activations' dtype."""

    def __init__(self, linear: nn.Linear):
        super().__init__()
        weight = linear.weight.detach().float()                                   # [out, in]
        tiny = torch.finfo(linear.weight.dtype).tiny
        scales = (weight.abs().amax(dim=1) / 127.0).clamp(min=tiny).to(linear.weight.dtype)  # [out], as stored
        self.in_features, self.out_features = linear.in_features, linear.out_features
        # round against the stored scales, so each weight is off by at most half a step of its own scale
        self.register_buffer("weight_int8", torch.round(weight / scales.float()[:, None]).clamp(-127, 127)
                             .to(torch.int8).contiguous())
        self.register_buffer("scales", scales)
        self.bias = None if linear.bias is None else nn.Parameter(linear.bias.detach(), requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.reshape(-1, self.in_features).contiguous()                      # [M, in]
        out = torch._weight_int8pack_mm(flat.to(self.scales.dtype), self.weight_int8, self.scales)   # [M, out]
        if self.bias is not None:
            out = out + self.bias
        return out.to(x.dtype).reshape(*x.shape[:-1], self.out_features)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


def quantize_int8(model: nn.Module) -> nn.Module:
    """Swap every nn.Linear of the model (decoder layers and output head) for an Int8Linear, in place. A tied
    output head gets its own int8 copy; the embedding keeps the original table, and transformers is told the two
    are no longer tied (else tie_weights() would hang the table on the int8 head as an unused `weight`)."""
    swaps = [(parent, name, child) for parent in model.modules() for name, child in parent.named_children()
             if isinstance(child, nn.Linear)]
    swapped = {f"{name}.weight" for name, module in model.named_modules() if isinstance(module, nn.Linear)}
    for parent, name, child in swaps:
        setattr(parent, name, Int8Linear(child))
    if getattr(model.config, "tie_word_embeddings", False):
        model.config.tie_word_embeddings = False
    tied = getattr(model, "all_tied_weights_keys", None)
    if tied:
        model.all_tied_weights_keys = {target: source for target, source in tied.items() if target not in swapped}
    model.weight_format = "int8"
    return model


def apply_weight_format(model: nn.Module | None, weights: str) -> nn.Module | None:
    """The model in the named weight format (see WEIGHT_FORMATS); None stays None."""
    if weights not in WEIGHT_FORMATS:
        raise ValueError(f"weights={weights!r} is unknown: choose one of {', '.join(WEIGHT_FORMATS)}")
    if model is None or weights == "native" or getattr(model, "weight_format", "native") == weights:
        return model
    device = next(model.parameters()).device
    if device.type != "cpu":
        raise ValueError(f"weights='int8' is for decoding on a CPU (its kernel is checked there only); the model is "
                         f"on {device}: use weights='native'")
    return quantize_int8(model)


def weight_bytes(model: nn.Module) -> int:
    """Bytes a decoding step reads: every parameter and buffer but the embedding table (a lookup reads a row)."""
    embedding = model.get_input_embeddings().weight
    tensors = {id(t): t for t in list(model.parameters()) + list(model.buffers())}
    head = model.get_output_embeddings()
    head_is_table = head is not None and getattr(head, "weight", None) is embedding
    return sum(t.numel() * t.element_size() for key, t in tensors.items()
               if key != id(embedding) or head_is_table)
