"""The linear layers that replace nn.Linear: int8, int4, w8a8 and int4-dyn kernels, each with the dense weight for
large calls (or, for w8a8 on a CPU with VNNI, its int8 weights with activations scaled per row)."""

from __future__ import annotations

import warnings

import torch
from torch import nn

from engine.quant.cpu import cpu_has_vnni, onednn_has_vnni
from engine.quant.grids import FourBitGrid

INT8_MAX_ROWS = 4  # token rows per call (batch x tokens per row) up to which the int8 kernel is the faster one
INT4_MAX_ROWS = 8  # the same for the int4 kernel
W8A8_MAX_ROWS = 64  # a cap, not a break-even: the kernel is still faster than bf16 there (docs/ENGINE.md);
# a prompt's chunk of more rows is not rounded with one scale for hundreds of tokens: it goes through
# the int8 weights with a scale per row where the CPU has VNNI, else the dense weights (a short
# remainder after the prefix cache goes through w8a8)
INT4_ONE_ROW = 1  # int4-w8a8: calls of up to this many token rows read a 4-bit layer's codes (int4 is the faster
# kernel at one row only: benchmarks/bench_kernels.py, docs/ENGINE.md)
INT4_OUT_MULTIPLE = 16  # the int4 kernel packs output features in blocks of 16
# the buffers only calls of more than max_rows rows read (not part of a decoding step's bytes)
LARGE_CALL_BUFFERS = ("weight_dense", "large_int8", "large_scales")
QUANTIZE_ROWS = 128  # rows of a weight _int8_per_channel converts at once (~1 MB of fp32 for the bundled models)


class _LowByteLinear(nn.Module):
    """A linear layer whose weights are also held in a smaller format: a call of up to `max_rows` token rows uses
    the small format's kernel (`_small`), a larger one the original weight (None: always the small format, and
    no original weight is kept). `transpose_dense` keeps the original weight in any case, as [in, out] (a copy):
    whole input channels are then contiguous rows, for a kernel that reads a few of them."""

    def __init__(self, linear: nn.Linear, max_rows: int | None, transpose_dense: bool = False, keep_dense: bool = True):
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.max_rows = max_rows
        self.dense_transposed = transpose_dense
        weight = linear.weight.detach()
        # the original weight (a tied head's is the embedding table itself: no copy); not saved with the model;
        # none where large calls have a kernel of their own (keep_dense=False) and no split needs its rows
        kept = None if max_rows is None or not keep_dense else weight
        self.register_buffer("weight_dense", weight.t().contiguous() if transpose_dense else kept, persistent=False)
        self.bias = None if linear.bias is None else nn.Parameter(linear.bias.detach(), requires_grad=False)

    def dense_weight(self) -> torch.Tensor:
        """The original weight, [out, in] (a view when it is stored transposed). RuntimeError where the layer
        keeps none (a w8a8 layer whose large calls have their own kernel)."""
        if self.weight_dense is None:
            raise RuntimeError(f"{type(self).__name__} keeps no dense weight (max_rows={self.max_rows})")
        return self.weight_dense.t() if self.dense_transposed else self.weight_dense

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.reshape(-1, self.in_features).contiguous()  # [M, in]
        if self.max_rows is not None and flat.shape[0] > self.max_rows:
            out = self._large(flat)  # [M, out]
        else:
            out = self._small(flat)  # [M, out]
            out = out if self.bias is None else out + self.bias
        return out.to(x.dtype).reshape(*x.shape[:-1], self.out_features)

    def _small(self, flat: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def _large(self, flat: torch.Tensor) -> torch.Tensor:
        """A call of more than max_rows rows, bias included: the original layer."""
        return torch.nn.functional.linear(flat, self.dense_weight(), self.bias)  # [M, out]

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


def _int8_per_channel(weight: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """(q [out, in] int8, scales [out] in `dtype`): symmetric int8 per output channel, rounded against the scales
    as stored, so each weight is off by at most half a step of its own scale."""
    weight = weight.detach()  # [out, in]
    scales = (weight.abs().amax(dim=1).float() / 127.0).clamp(min=torch.finfo(dtype).tiny).to(dtype)  # [out]
    q = torch.empty(weight.shape, dtype=torch.int8, device=weight.device)
    for rows in range(0, weight.shape[0], QUANTIZE_ROWS):  # a few rows at a time: the passes stay in cache
        chunk = slice(rows, rows + QUANTIZE_ROWS)
        values = weight[chunk].to(torch.float32, copy=True)  # a copy: an fp32 weight is divided in place below
        q[chunk] = values.div_(scales[chunk].float()[:, None]).round_().clamp_(-127, 127)
    return q, scales


class Int8Linear(_LowByteLinear):
    """y = x @ (q * scale).T + bias, with q the int8 weights [out, in] and scale [out] in the activations' dtype."""

    def __init__(self, linear: nn.Linear, max_rows: int | None = INT8_MAX_ROWS):
        super().__init__(linear, max_rows)
        weight_int8, scales = _int8_per_channel(linear.weight, linear.weight.dtype)
        self.register_buffer("weight_int8", weight_int8)
        self.register_buffer("scales", scales)

    def _small(self, flat: torch.Tensor) -> torch.Tensor:
        return torch._weight_int8pack_mm(flat.to(self.scales.dtype), self.weight_int8, self.scales)


class Int4Linear(_LowByteLinear):
    """y = x @ W.T + bias with W = (code - 8) * scale + zero per group of weights (scale = the grid's step,
    zero = low + 8 steps, in the activations' dtype), packed for `torch._weight_int4pack_mm_for_cpu`."""

    def __init__(self, linear: nn.Linear, grid: FourBitGrid, max_rows: int | None = INT4_MAX_ROWS):
        super().__init__(linear, max_rows)
        self.four_bit = _FourBitCodes(grid, linear.weight.dtype)

    def _small(self, flat: torch.Tensor) -> torch.Tensor:
        return self.four_bit(flat)


class _FourBitCodes(nn.Module):
    """A 4-bit grid's codes, step and offset packed for `torch._weight_int4pack_mm_for_cpu`: x [M, in] -> [M, out]."""

    def __init__(self, grid: FourBitGrid, dtype: torch.dtype):
        super().__init__()
        self.group = grid.group
        scales_and_zeros = torch.stack([grid.step, grid.low + 8 * grid.step], dim=-1)  # [out, in/G, 2]
        self.register_buffer("weight_int4", torch._convert_weight_to_int4pack_for_cpu(grid.codes.to(torch.int32), 1))
        self.register_buffer(
            "scales_and_zeros", scales_and_zeros.transpose(0, 1).contiguous().to(dtype)
        )  # [in/G, out, 2]

    def forward(self, flat: torch.Tensor) -> torch.Tensor:
        return torch._weight_int4pack_mm_for_cpu(
            flat.to(self.scales_and_zeros.dtype), self.weight_int4, self.group, self.scales_and_zeros
        )


class DynamicInt8Linear(_LowByteLinear):
    """y = x @ (q * scale).T + bias with int8 products: the weights as Int8Linear's, the activations of each call
    quantized to 8 bits on the fly (one scale and offset for the whole call: fbgemm's `quantized::linear_dynamic`,
    in fp32). The only kernel here that stays memory-bound beyond one row (bench_kernels), but its error follows
    the call's largest activation, and the rows of one call share that error. So for a layer whose inputs carry
    outlier channels (W8A8_OUTLIER_LAYERS), `outlier_threshold` splits them off as LLM.int8() does: the input
    channels where some row of the call exceeds it in magnitude are multiplied in floats with those channels'
    original weights (rows of a dense copy kept as [in, out]), the rest in int8.

    With a `grid` (the layer's weights on a 4-bit grid: a Q4_K layer of a GGUF), a call of up to INT4_ONE_ROW token
    rows reads the 4-bit codes instead, as Int4Linear does (the int4-w8a8 format): one row is memory-bound, and
    half the bytes of int8 win there, while the integer products win from two rows on.

    A call of more than `max_rows` rows (a prompt's chunk) is compute-bound. With `wide_int8` (the default where
    oneDNN may use AVX-512 VNNI or AMX: onednn_has_vnni) it multiplies the same int8 weights by activations rounded
    to 8 bits with a scale per row (torch._int_mm: 1.6x bf16's products on an AMD EPYC Zen 4, and no row shares
    another's error), outlier channels split off as above, and keeps no dense weight; without it, the original
    weight. Without VNNI oneDNN's int8 products saturate 16-bit sums (measured: not exact), so there the original
    weight stays."""

    def __init__(
        self,
        linear: nn.Linear,
        max_rows: int | None = W8A8_MAX_ROWS,
        outlier_threshold: float | None = None,
        grid: FourBitGrid | None = None,
        wide_int8: bool | None = None,
    ):
        self.wide_int8 = onednn_has_vnni() if wide_int8 is None else wide_int8
        # a split reads the outlier channels' original weights: rows of [in, out]
        super().__init__(linear, max_rows, outlier_threshold is not None, keep_dense=not self.wide_int8)
        self.outlier_threshold = outlier_threshold
        weight_int8, scales = _int8_per_channel(linear.weight, torch.float32)
        if self.wide_int8 and max_rows is not None:  # torch._int_mm's operands: [out, in] int8, read as [in, out]
            self.register_buffer("large_int8", weight_int8, persistent=False)  # made again at every load
            self.register_buffer("large_scales", scales, persistent=False)  # [out] fp32
        zeros = torch.zeros(self.out_features, dtype=torch.long)
        with warnings.catch_warnings():  # torch 2.13 deprecates quantized tensors (requirements.txt pins it)
            warnings.filterwarnings("ignore", message=".*quantized tensor creation functions.*")
            quantized = torch._make_per_channel_quantized_tensor(weight_int8, scales.double(), zeros, 0)
        self.packed = torch.ops.quantized.linear_prepack(quantized, None)  # fbgemm's layout; not a tensor
        self.packed_bytes = weight_int8.numel() + 4 * self.out_features  # int8 weights, fp32 scales
        self.reduce_range = not cpu_has_vnni()
        self.four_bit = None if grid is None else _FourBitCodes(grid, linear.weight.dtype)

    def _small(self, flat: torch.Tensor) -> torch.Tensor:
        if self.four_bit is not None and flat.shape[0] <= INT4_ONE_ROW:
            return self.four_bit(flat)
        return self._split(flat.float(), self._integer_products)

    def _large(self, flat: torch.Tensor) -> torch.Tensor:
        if not self.wide_int8:
            return super()._large(flat)
        out = self._split(flat.float(), self._row_scaled_products)  # [M, out]
        return out if self.bias is None else out.add_(self.bias)

    def _split(self, x: torch.Tensor, products) -> torch.Tensor:
        """products(x) [M, in] -> [M, out], the outlier channels (where some row exceeds outlier_threshold) apart."""
        if self.outlier_threshold is None or x.shape[0] == 0:
            return products(x)
        # [L] outlier channels: each channel's largest magnitude over the rows (less than half the time of testing
        # every entry against the threshold and reducing the booleans over the rows: 23 against 53 us at 8 rows);
        # a NaN counts as quiet, as it did there, so that it cannot hide a loud entry of its channel
        magnitudes = x.abs().nan_to_num_(nan=0.0, posinf=float("inf"))
        loud = (magnitudes.amax(dim=0) > self.outlier_threshold).nonzero().squeeze(1)
        if loud.numel() == 0:
            return products(x)
        out = products(x.index_fill(1, loud, 0.0))  # [M, out]; x untouched
        # the loud channels' weights are L contiguous rows of the [in, out] copy: gathering rows is an order of
        # magnitude faster than gathering columns of [out, in] (docs/ENGINE.md)
        return out.addmm_(x[:, loud], self.weight_dense.index_select(0, loud).float())  # [M, L] @ [L, out]

    def _integer_products(self, x: torch.Tensor) -> torch.Tensor:
        """fbgemm: x [M, in] fp32 rounded to 8 (or 7) bits with one scale for the call, times the int8 weights."""
        return torch.ops.quantized.linear_dynamic(x, self.packed, self.reduce_range)

    def _row_scaled_products(self, x: torch.Tensor) -> torch.Tensor:
        """x [M, in] fp32 rounded to 8 bits with a scale per row, times the int8 weights: [M, out] fp32."""
        row_scales = (x.abs().amax(dim=1, keepdim=True) / 127.0).clamp_(min=torch.finfo(torch.float32).tiny)  # [M, 1]
        x_int8 = x.div(row_scales).round_().to(torch.int8)  # [M, in]
        products = torch._int_mm(x_int8, self.large_int8.t())  # [M, out] int32, exact
        return products.float().mul_(row_scales).mul_(self.large_scales)


class Int4DynLinear(_LowByteLinear):
    """The int4-dyn format, for ARM: a 4-bit layer's codes (as a Q4_K GGUF's) times activations rounded to 8 bits
    per row, by torch's `_dyn_quant_matmul_4bit` (KleidiAI's kernels on aarch64, which take grouped steps in bf16
    only; a reference path elsewhere, so that this layer is tested on x86). That kernel reads symmetric groups,
    (code - 8) * step; the grid's offset, zero = low + 8 steps per group, is added as the sums of x per group times
    those zeros: a matmul of 1/32 of the size, in floats. The GGUF's codes are used as they are, the steps rounded
    to bf16 (as int4-w8a8 rounds them in a bf16 model)."""

    def __init__(self, linear: nn.Linear, grid: FourBitGrid, max_rows: int | None = W8A8_MAX_ROWS):
        super().__init__(linear, max_rows)
        self.group = grid.group
        codes = grid.codes.to(torch.uint8)
        nibbles = codes[:, 0::2] | (codes[:, 1::2] << 4)  # [out, in / 2]: the even index in the low nibble
        self.register_buffer(
            "weight_int4",
            torch.ops.aten._dyn_quant_pack_4bit_weight(
                nibbles, grid.step.to(torch.bfloat16), None, self.group, self.in_features, self.out_features
            ),
        )
        self.register_buffer("zeros", (grid.low + 8 * grid.step).float().t().contiguous())  # [in / G, out]

    def _small(self, flat: torch.Tensor) -> torch.Tensor:
        x = flat.float()  # [M, in]
        symmetric = torch.ops.aten._dyn_quant_matmul_4bit(
            x, self.weight_int4, self.group, self.in_features, self.out_features
        )
        return symmetric.addmm_(x.view(x.shape[0], -1, self.group).sum(-1), self.zeros)  # + [M, in/G] @ [in/G, out]
