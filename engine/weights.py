"""Weight formats for CPU decoding: int8 weight-only linear layers (half the bytes of bf16 per step).

Decoding a few rows is memory-bound: each step reads every weight once, so the time per step follows the bytes of
the weights. `quantize_int8(model)` replaces every linear layer of the decoder and the output head with an
`Int8Linear`: per output channel, symmetric int8 weights and one scale (round to nearest), multiplied by
`torch._weight_int8pack_mm` with activations in the model's dtype. The embedding table stays as it is (a lookup
reads one row per token). Accuracy is measured, not assumed: benchmarks/eval_humaneval.py --weights int8.

That kernel does not scale with the rows of a call: measured here (bundled 1.5B, one forward, 300 cached tokens,
bf16 activations), int8 against bf16 is 2.11x faster at 1 row, 1.33-1.49x at 4, but 0.85x at 8 and 0.46x at 32
(8 rows x 4 tokens). So each layer keeps its original weight too (1.5x the memory of bf16 alone) and a call with more
than INT8_MAX_ROWS token rows uses it: the int8 bytes serve the memory-bound tail, the dense ones full batches.
"""
from __future__ import annotations

import torch
from torch import nn

WEIGHT_FORMATS = ("native", "int8")   # native: the weights as loaded (--dtype); int8: Int8Linear layers
INT8_MAX_ROWS = 4   # token rows per call (batch x tokens per row) up to which the int8 kernel is the faster one


class Int8Linear(nn.Module):
    """y = x @ (q * scale).T + bias, with q the int8 weights [out, in] and scale [out] in the activations' dtype;
    a call of more than `max_rows` token rows uses the original weight instead (None: always int8)."""

    def __init__(self, linear: nn.Linear, max_rows: int | None = INT8_MAX_ROWS):
        super().__init__()
        weight = linear.weight.detach().float()                                   # [out, in]
        tiny = torch.finfo(linear.weight.dtype).tiny
        scales = (weight.abs().amax(dim=1) / 127.0).clamp(min=tiny).to(linear.weight.dtype)  # [out], as stored
        self.in_features, self.out_features = linear.in_features, linear.out_features
        # round against the stored scales, so each weight is off by at most half a step of its own scale
        self.register_buffer("weight_int8", torch.round(weight / scales.float()[:, None]).clamp(-127, 127)
                             .to(torch.int8).contiguous())
        self.register_buffer("scales", scales)
        self.max_rows = max_rows
        # the original weight (a tied head's is the embedding table itself: no copy); not saved with the model
        self.register_buffer("weight_dense", None if max_rows is None else linear.weight.detach(), persistent=False)
        self.bias = None if linear.bias is None else nn.Parameter(linear.bias.detach(), requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.reshape(-1, self.in_features).contiguous()                      # [M, in]
        if self.weight_dense is not None and flat.shape[0] > self.max_rows:
            out = torch.nn.functional.linear(flat, self.weight_dense, self.bias)      # [M, out], as the original
        else:
            out = torch._weight_int8pack_mm(flat.to(self.scales.dtype), self.weight_int8, self.scales)  # [M, out]
            out = out if self.bias is None else out + self.bias
        return out.to(x.dtype).reshape(*x.shape[:-1], self.out_features)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


def quantize_int8(model: nn.Module, max_rows: int | None = INT8_MAX_ROWS) -> nn.Module:
    """Swap every nn.Linear of the model (decoder layers and output head) for an Int8Linear, in place. A tied
    output head gets its own int8 copy; the embedding keeps the original table, and transformers is told the two
    are no longer tied (else tie_weights() would hang the table on the int8 head as an unused `weight`)."""
    swaps = [(parent, name, child) for parent in model.modules() for name, child in parent.named_children()
             if isinstance(child, nn.Linear)]
    swapped = {f"{name}.weight" for name, module in model.named_modules() if isinstance(module, nn.Linear)}
    for parent, name, child in swaps:
        setattr(parent, name, Int8Linear(child, max_rows))
    if getattr(model.config, "tie_word_embeddings", False):
        model.config.tie_word_embeddings = False
    tied = getattr(model, "all_tied_weights_keys", None)
    if tied:
        model.all_tied_weights_keys = {target: source for target, source in tied.items() if target not in swapped}
    model.weight_format = "int8"
    return model


def check_weight_format(weights: str) -> None:
    """Raise ValueError naming the allowed formats unless `weights` is one of WEIGHT_FORMATS."""
    if weights not in WEIGHT_FORMATS:
        raise ValueError(f"weights={weights!r} is unknown: choose one of {', '.join(WEIGHT_FORMATS)}")


def apply_weight_format(model: nn.Module | None, weights: str) -> nn.Module | None:
    """The model in the named weight format (see WEIGHT_FORMATS); None stays None."""
    check_weight_format(weights)
    if model is None or weights == "native" or getattr(model, "weight_format", "native") == weights:
        return model
    device = next(model.parameters()).device
    if device.type != "cpu":
        raise ValueError(f"weights='int8' is for decoding on a CPU (its kernel is checked there only); the model is "
                         f"on {device}: use weights='native'")
    return quantize_int8(model)


def weight_bytes(model: nn.Module) -> int:
    """Bytes a decoding step of one row reads: every parameter and buffer but the embedding table (a lookup reads a
    row) and the dense weights int8 layers keep for large calls."""
    embedding = model.get_input_embeddings().weight
    buffers = [b for name, b in model.named_buffers() if not name.endswith("weight_dense")]
    tensors = {id(t): t for t in list(model.parameters()) + buffers}
    head = model.get_output_embeddings()
    head_is_table = head is not None and getattr(head, "weight", None) is embedding
    return sum(t.numel() * t.element_size() for key, t in tensors.items()
               if key != id(embedding) or head_is_table)
