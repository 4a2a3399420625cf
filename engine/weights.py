"""Weight formats for CPU decoding: fewer bytes per step where decoding is memory-bound.

Decoding a few rows is memory-bound: each step reads every weight once, so the time per step follows the bytes of
the weights. Three formats replace the linear layers of the decoder and the output head (the embedding table
stays: a lookup reads one row per token):

- int8: `Int8Linear`, per output channel symmetric int8 and one scale (round to nearest), multiplied by
  `torch._weight_int8pack_mm`. Lossy by at most half a step per weight.
- int4: `Int4Linear` for every layer whose weights already lie on a 4-bit grid per group of 32 (as a Q4_K GGUF
  stores them: 32 weights share one step and one offset, 16 levels; the bundled models come from such files), so
  the int4 codes are exactly the GGUF's (step and offset rounded to the model's dtype); `Int8Linear` for the
  other layers (the GGUF's 5-, 6- and 8-bit tensors, or any model's full-precision ones).
  `torch._weight_int4pack_mm_for_cpu` multiplies.
- w8a8: `DynamicInt8Linear`, int8 weights as int8's and the activations of each call rounded to 8 bits (one scale
  for the call), multiplied in integers by fbgemm (`quantized::linear_dynamic`); the MLP's down projections, whose
  inputs carry outlier channels, multiply those channels in floats (W8A8_OUTLIER_LAYERS).

The weight-only kernels turn weights back into floats and stop paying beyond a few rows; fbgemm's integer products
stay memory-bound to 8 rows (`python -m benchmarks.bench_kernels`; the figures are in the README). So each layer
keeps its original weight too, and a call of more token rows than its kernel pays for (INT8_MAX_ROWS,
INT4_MAX_ROWS) or than w8a8 is allowed (W8A8_MAX_ROWS, a chosen cap) uses it. Accuracy is measured, not assumed:
benchmarks/eval_humaneval.py --weights int8|int4|w8a8 (README).
"""
from __future__ import annotations

import functools
import logging
import os
import warnings
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from engine.loading import owned_model_dir

WEIGHT_FORMATS = ("auto", "native", "int8", "int4", "w8a8")   # native: as loaded (--dtype); int8: Int8Linear
        # layers; int4: Int4Linear where the weights are 4-bit already, Int8Linear elsewhere; w8a8: DynamicInt8Linear
        # layers; auto: auto_weight_format
INT8_MAX_ROWS = 4   # token rows per call (batch x tokens per row) up to which the int8 kernel is the faster one
INT4_MAX_ROWS = 8   # the same for the int4 kernel
W8A8_MAX_ROWS = 64  # a cap, not a break-even: the kernel is still ~2x faster than bf16 at 64 rows (kern2 probe,
                    # this session); a longer prompt's prefill reads the dense weights, so its error is not shared
                    # across hundreds of tokens
W8A8_OUTLIER_LAYERS = ("down_proj",)   # layers whose inputs carry outlier channels: the MLP's output projection
                                       # (measured on real code, 1.5B: with one 8-bit scale per call, 5% relative
                                       # error at 1 row, 9% at 8, 13% at 32, vs 1-2% for q/k/v/o/gate/up)
W8A8_OUTLIER_THRESHOLD = 4.0   # their input channels above this (in magnitude) go through floats: measured there,
                               # 2.8-3.6% relative error, 15 (1 row) to 200 (32 rows) channels of 8960 on average
QUANTIZE_ROWS = 128  # rows of a weight _int8_per_channel converts at once (~1 MB of fp32 for the bundled models)
INT4_GROUP = 32     # weights per group of one step and one offset (a Q4_K sub-block)
INT4_OUT_MULTIPLE = 16   # the int4 kernel packs output features in blocks of 16
GRID_TOLERANCE = 0.05   # RMS distance to the fitted grid, in steps of (max - min) / 15, below which a layer is 4-bit
                        # already (measured: ~0.01 for a Q4_K tensor loaded in bf16, 0.0000 in fp32; ~0.27 others)

logger = logging.getLogger(__name__)


class _LowByteLinear(nn.Module):
    """A linear layer whose weights are also held in a smaller format: a call of up to `max_rows` token rows uses
    the small format's kernel (`_small`), a larger one the original weight (None: always the small format, and
    no original weight is kept). `transpose_dense` keeps the original weight in any case, as [in, out] (a copy):
    whole input channels are then contiguous rows, for a kernel that reads a few of them."""

    def __init__(self, linear: nn.Linear, max_rows: int | None, transpose_dense: bool = False):
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.max_rows = max_rows
        self.dense_transposed = transpose_dense
        weight = linear.weight.detach()
        # the original weight (a tied head's is the embedding table itself: no copy); not saved with the model
        self.register_buffer("weight_dense", weight.t().contiguous() if transpose_dense else
                             None if max_rows is None else weight, persistent=False)
        self.bias = None if linear.bias is None else nn.Parameter(linear.bias.detach(), requires_grad=False)

    def dense_weight(self) -> torch.Tensor:
        """The original weight, [out, in] (a view when it is stored transposed)."""
        return self.weight_dense.t() if self.dense_transposed else self.weight_dense

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.reshape(-1, self.in_features).contiguous()                      # [M, in]
        if self.max_rows is not None and flat.shape[0] > self.max_rows:
            out = torch.nn.functional.linear(flat, self.dense_weight(), self.bias)    # [M, out], as the original
        else:
            out = self._small(flat)                                                   # [M, out]
            out = out if self.bias is None else out + self.bias
        return out.to(x.dtype).reshape(*x.shape[:-1], self.out_features)

    def _small(self, flat: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


def _int8_per_channel(weight: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """(q [out, in] int8, scales [out] in `dtype`): symmetric int8 per output channel, rounded against the scales
    as stored, so each weight is off by at most half a step of its own scale."""
    weight = weight.detach()                                                      # [out, in]
    scales = (weight.abs().amax(dim=1).float() / 127.0).clamp(min=torch.finfo(dtype).tiny).to(dtype)   # [out]
    q = torch.empty(weight.shape, dtype=torch.int8, device=weight.device)
    for rows in range(0, weight.shape[0], QUANTIZE_ROWS):      # a few rows at a time: the passes stay in cache
        chunk = slice(rows, rows + QUANTIZE_ROWS)
        values = weight[chunk].to(torch.float32, copy=True)    # a copy: an fp32 weight is divided in place below
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


class DynamicInt8Linear(_LowByteLinear):
    """y = x @ (q * scale).T + bias with int8 products: the weights as Int8Linear's, the activations of each call
    quantized to 8 bits on the fly (one scale and offset for the whole call: fbgemm's `quantized::linear_dynamic`,
    in fp32). The only kernel here that stays memory-bound beyond one row (bench_kernels), but its error follows
    the call's largest activation, and the rows of one call share that error. So for a layer whose inputs carry
    outlier channels (W8A8_OUTLIER_LAYERS), `outlier_threshold` splits them off as LLM.int8() does: the input
    channels where some row of the call exceeds it in magnitude are multiplied in floats with those channels'
    original weights (rows of a dense copy kept as [in, out]), the rest in int8."""

    def __init__(self, linear: nn.Linear, max_rows: int | None = W8A8_MAX_ROWS,
                 outlier_threshold: float | None = None):
        # a split reads the outlier channels' original weights: rows of [in, out]
        super().__init__(linear, max_rows, transpose_dense=outlier_threshold is not None)
        self.outlier_threshold = outlier_threshold
        weight_int8, scales = _int8_per_channel(linear.weight, torch.float32)
        zeros = torch.zeros(self.out_features, dtype=torch.long)
        with warnings.catch_warnings():   # torch 2.13 deprecates quantized tensors (requirements.txt pins it)
            warnings.filterwarnings("ignore", message=".*quantized tensor creation functions.*")
            quantized = torch._make_per_channel_quantized_tensor(weight_int8, scales.double(), zeros, 0)
        self.packed = torch.ops.quantized.linear_prepack(quantized, None)   # fbgemm's layout; not a tensor
        self.packed_bytes = weight_int8.numel() + 4 * self.out_features       # int8 weights, fp32 scales
        self.reduce_range = not _cpu_has_vnni()

    def _small(self, flat: torch.Tensor) -> torch.Tensor:
        x = flat.float()                                                                  # [M, in]
        if self.outlier_threshold is None:
            return self._integer_products(x)
        loud = (x.abs() > self.outlier_threshold).any(dim=0).nonzero().squeeze(1)        # [L] outlier channels
        if loud.numel() == 0:
            return self._integer_products(x)
        out = self._integer_products(x.index_fill(1, loud, 0.0))                         # [M, out]; x untouched
        # the loud channels' weights are L contiguous rows of the [in, out] copy (measured, 1 row and 100 loud
        # channels: 0.03 ms to gather, against 0.38 ms for columns of [out, in], per call of 28 per step)
        return out.addmm_(x[:, loud], self.weight_dense.index_select(0, loud).float())   # [M, L] @ [L, out]

    def _integer_products(self, x: torch.Tensor) -> torch.Tensor:
        """fbgemm: x [M, in] fp32 rounded to 8 (or 7) bits with one scale for the call, times the int8 weights."""
        return torch.ops.quantized.linear_dynamic(x, self.packed, self.reduce_range)


@functools.cache
def _cpu_has_vnni() -> bool:
    """Whether fbgemm sums int8 products in 32 bits here (AVX-512 VNNI: fbgemm looks for no other VNNI): then it
    may use all 8 bits of the activations; otherwise pairs of products are summed in 16 bits, and 7-bit
    activations keep that sum from saturating."""
    try:
        flags = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return False
    return "avx512_vnni" in flags


@dataclass
class FourBitGrid:
    """Weights [out, in] as low + code * step per group of `group` weights along `in`; codes 0..15."""

    codes: torch.Tensor      # [out, in] uint8
    step: torch.Tensor       # [out, in / group] float32
    low: torch.Tensor        # [out, in / group] float32
    group: int
    distance: float          # RMS of weight - fit, in units of (max - min) / 15 of each group

    @classmethod
    def fit(cls, weight: torch.Tensor, group: int = INT4_GROUP,
            tolerance: float | None = GRID_TOLERANCE) -> "FourBitGrid | None":
        """The best 4-bit grid per group: the step is (max - min) / s for the s in 15..1 that fits best (a Q4_K
        block need not use all 16 levels: measured, 21% of the bundled 1.5B's groups span 14 steps). None when
        `in` is not a multiple of `group`, or when the weights lie farther than `tolerance` from the fit (judged
        on a sample of groups first, so a tensor that is not 4-bit costs little; None: fit whatever the weights)."""
        out_features, in_features = weight.shape
        if in_features % group:
            return None
        groups = weight.detach().reshape(-1, group)                              # [R, group], as stored
        if tolerance is not None and groups.shape[0] > SAMPLE_GROUPS:   # smaller: the whole fit below is as cheap
            sample = groups[torch.linspace(0, groups.shape[0] - 1, SAMPLE_GROUPS).long().unique()]
            if _rms(_fit_groups(sample.float())[3]) > tolerance:
                return None
        # chunks of groups small enough to stay in the CPU's caches through the passes of _fit_groups
        parts = [_fit_groups(chunk.float()) for chunk in groups.split(CHUNK_GROUPS)]
        codes, step, low, error = (torch.cat(columns) for columns in zip(*parts))
        distance = _rms(error)
        if tolerance is not None and distance > tolerance:
            return None
        shape = (out_features, in_features // group)
        return cls(codes.reshape(out_features, in_features), step.reshape(shape), low.reshape(shape), group, distance)


SAMPLE_GROUPS = 4096      # groups FourBitGrid.fit looks at before fitting a whole tensor
CHUNK_GROUPS = 65536      # groups fitted at once (8 MB of fp32)
OFF_GRID = 0.1            # a group farther than this from its fit is refit with fewer steps (bf16 rounding leaves
                          # ~0.01-0.03 steps; a Q4_K block of 14 steps fitted with 15 lies ~0.29 away)


def _fit_groups(groups: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(codes [R, G] uint8, step [R], low [R], error [R]) of the best grid per group (fp32 [R, G]); error is the
    RMS distance in units of (max - min) / 15. Spans below 14 are tried only while most groups fit."""
    low, high = groups.amin(dim=1), groups.amax(dim=1)                            # [R]
    unit = ((high - low) / 15).clamp(min=torch.finfo(torch.float32).tiny)         # [R]
    step, error = unit.clone(), _grid_error(groups, low, unit)                    # [R], [R] in units of `unit`
    for span in range(14, 0, -1):
        todo = (error > OFF_GRID).nonzero().squeeze(1)                           # groups not on a grid yet
        if todo.numel() == 0 or (span < 14 and todo.numel() > groups.shape[0] // 2):
            break   # all fit, or these weights are not 4-bit (no need to try every span on them)
        trial = ((high[todo] - low[todo]) / span).clamp(min=unit[todo])
        trial_error = _grid_error(groups[todo], low[todo], trial) * trial / unit[todo]
        better = trial_error < error[todo]
        step[todo[better]], error[todo[better]] = trial[better], trial_error[better]
    codes = (groups - low[:, None]).div_(step[:, None]).round_().clamp_(0, 15).to(torch.uint8)
    return codes, step, low, error


def _rms(values: torch.Tensor) -> float:
    return float(values.pow(2).mean().sqrt())


def _grid_error(groups: torch.Tensor, low: torch.Tensor, step: torch.Tensor) -> torch.Tensor:
    """RMS distance of each group's weights to the grid low + k * step, in steps: [R, G], [R], [R] -> [R]."""
    position = (groups - low[:, None]).mul_(step.reciprocal()[:, None])     # in place: these arrays are large
    return position.sub_(position.round()).square_().mean(dim=1).sqrt_()


class Int4Linear(_LowByteLinear):
    """y = x @ W.T + bias with W = (code - 8) * scale + zero per group of weights (scale = the grid's step,
    zero = low + 8 steps, in the activations' dtype), packed for `torch._weight_int4pack_mm_for_cpu`."""

    def __init__(self, linear: nn.Linear, grid: FourBitGrid, max_rows: int | None = INT4_MAX_ROWS):
        super().__init__(linear, max_rows)
        self.group = grid.group
        scales_and_zeros = torch.stack([grid.step, grid.low + 8 * grid.step], dim=-1)      # [out, in/G, 2]
        self.register_buffer("weight_int4", torch._convert_weight_to_int4pack_for_cpu(grid.codes.to(torch.int32), 1))
        self.register_buffer("scales_and_zeros", scales_and_zeros.transpose(0, 1).contiguous()
                             .to(linear.weight.dtype))                                    # [in/G, out, 2]

    def _small(self, flat: torch.Tensor) -> torch.Tensor:
        return torch._weight_int4pack_mm_for_cpu(flat.to(self.scales_and_zeros.dtype), self.weight_int4, self.group,
                                                 self.scales_and_zeros)


def quantize_int8(model: nn.Module, max_rows: int | None = INT8_MAX_ROWS) -> nn.Module:
    """Swap every nn.Linear of the model (decoder layers and output head) for an Int8Linear, in place."""
    return _swap_linears(model, "int8", lambda linear: Int8Linear(linear, max_rows))


def quantize_int4(model: nn.Module, int4_max_rows: int | None = INT4_MAX_ROWS,
                  int8_max_rows: int | None = INT8_MAX_ROWS, cache_dir: Path | None = None) -> nn.Module:
    """Swap every nn.Linear of the model for an Int4Linear where its weights lie on a 4-bit grid already (within
    GRID_TOLERANCE), else for an Int8Linear, in place; logs how many of each. With `cache_dir`, the grids are read
    from there when an earlier call saved them (fitting the bundled 1.5B takes one to two minutes here) and saved."""
    cache_file = None if cache_dir is None else Path(cache_dir) / GRID_CACHE.format(
        dtype=str(next(model.parameters()).dtype).removeprefix("torch."))
    cached = _load_grids(cache_file)
    names = {id(module): name for name, module in model.named_modules()}
    grids: dict[str, FourBitGrid | None] = {}

    fitted: set[str] = set()

    def swap(linear: nn.Linear) -> nn.Module:
        name = names[id(linear)]
        if name in cached and _fits(cached[name], linear):
            grid = cached[name]
        else:
            grid = FourBitGrid.fit(linear.weight) if linear.out_features % INT4_OUT_MULTIPLE == 0 else None
            fitted.add(name)
        grids[name] = grid
        return Int8Linear(linear, int8_max_rows) if grid is None else Int4Linear(linear, grid, int4_max_rows)

    _swap_linears(model, "int4", swap)
    if cache_file is not None and fitted:
        _save_grids(cache_file, {**cached, **grids})   # cached fits of layers not in this model stay
    four_bit = sum(grid is not None for grid in grids.values())
    logger.info("int4 treatment: %d linear layers on a 4-bit grid (int4), %d not (int8); %d grids from the cache",
                four_bit, len(grids) - four_bit, len(grids) - len(fitted))
    return model


def quantize_w8a8(model: nn.Module) -> nn.Module:
    """Swap every nn.Linear of the model for a DynamicInt8Linear, in place; those named in W8A8_OUTLIER_LAYERS
    split their outlier channels off (W8A8_OUTLIER_THRESHOLD)."""
    names = {id(module): name.rsplit(".", 1)[-1] for name, module in model.named_modules()}
    split = sum(names[id(m)] in W8A8_OUTLIER_LAYERS for m in model.modules() if isinstance(m, nn.Linear))
    if not split:
        logger.warning("weights w8a8: no layer named %s (the MLP's output projection of Qwen/Llama-style models): "
                       "no layer splits outlier channels off", "/".join(W8A8_OUTLIER_LAYERS))
    _swap_linears(model, "w8a8", lambda linear: DynamicInt8Linear(
        linear, outlier_threshold=W8A8_OUTLIER_THRESHOLD if names[id(linear)] in W8A8_OUTLIER_LAYERS else None))
    logger.info("weights w8a8: every linear layer with 8-bit activations, %d with outlier channels in floats", split)
    return model


GRID_CACHE = "int4-grids-v1-{dtype}.pt"   # quantize_int4's fits, in a converted model's directory; bump the version
                                          # when INT4_GROUP, GRID_TOLERANCE, OFF_GRID or the fit change


def _save_grids(path: Path, grids: dict[str, "FourBitGrid | None"]) -> None:
    """Save the fits (codes two to a byte), atomically; a failure to write only costs the next start a refit."""
    stored = {name: None if grid is None else {
        "codes": grid.codes[:, 0::2] | (grid.codes[:, 1::2] << 4), "step": grid.step, "low": grid.low,
        "group": grid.group, "distance": grid.distance} for name, grid in grids.items()}
    partial = path.with_name(f"{path.name}.{os.getpid()}.partial")   # one per process: two may fit at once
    try:
        torch.save(stored, partial)
        partial.replace(path)
    except (OSError, RuntimeError) as err:   # torch.save raises RuntimeError for a file it cannot write
        logger.warning("could not save the int4 grids to %s: %s", path, err)
        partial.unlink(missing_ok=True)


def _fits(grid: "FourBitGrid | None", linear: nn.Linear) -> bool:
    """A cached grid (or None: not 4-bit) belongs to this layer: its shapes match (else the layer is refitted)."""
    if grid is None:
        return True
    out_features, in_features = linear.weight.shape
    return (tuple(grid.codes.shape) == (out_features, in_features)
            and tuple(grid.step.shape) == (out_features, in_features // grid.group))


def _load_grids(path: Path | None) -> dict[str, "FourBitGrid | None"]:
    """The fits _save_grids saved at `path`; {} when there are none or the file is unreadable (then: refit)."""
    if path is None or not path.exists():
        return {}
    try:
        stored = torch.load(path, weights_only=True)
        grids = {}
        for name, entry in stored.items():
            if entry is None:
                grids[name] = None
                continue
            packed = entry["codes"]                                              # [out, in / 2] uint8
            codes = torch.stack([packed & 15, packed >> 4], dim=-1).reshape(packed.shape[0], -1)
            grids[name] = FourBitGrid(codes, entry["step"], entry["low"], entry["group"], entry["distance"])
        return grids
    except Exception as err:  # noqa: BLE001 - a damaged cache must not stop the model from loading
        logger.warning("ignoring the int4 grid cache %s (%s): fitting again", path, err)
        return {}


def _swap_linears(model: nn.Module, weight_format: str, make) -> nn.Module:
    """Replace every nn.Linear by make(linear). A tied output head gets its own copy; the embedding keeps the
    original table, and transformers is told the two are no longer tied (else tie_weights() would hang the table
    on the new head as an unused `weight`)."""
    swaps = [(parent, name, child) for parent in model.modules() for name, child in parent.named_children()
             if isinstance(child, nn.Linear)]
    swapped = {f"{name}.weight" for name, module in model.named_modules() if isinstance(module, nn.Linear)}
    for parent, name, child in swaps:
        setattr(parent, name, make(child))
    if getattr(model.config, "tie_word_embeddings", False):
        model.config.tie_word_embeddings = False
    tied = getattr(model, "all_tied_weights_keys", None)
    if tied:
        model.all_tied_weights_keys = {target: source for target, source in tied.items() if target not in swapped}
    model.weight_format = weight_format
    return model


def check_weight_format(weights: str) -> None:
    """Raise ValueError naming the allowed formats unless `weights` is one of WEIGHT_FORMATS."""
    if weights not in WEIGHT_FORMATS:
        raise ValueError(f"weights={weights!r} is unknown: choose one of {', '.join(WEIGHT_FORMATS)}")


def apply_weight_format(model: nn.Module | None, weights: str) -> nn.Module | None:
    """The model in the named weight format (see WEIGHT_FORMATS); None stays None."""
    check_weight_format(weights)
    if weights == "auto":
        weights = auto_weight_format(model)
    current = "native" if model is None else getattr(model, "weight_format", "native")
    if model is None or weights == current:
        return model
    if current != "native":
        raise ValueError(f"the model is already in weights={current!r}; load a fresh copy for weights={weights!r}")
    device = next(model.parameters()).device
    if device.type != "cpu":
        raise ValueError(f"weights={weights!r} is for decoding on a CPU (its kernels are checked there only); the "
                         f"model is on {device}: use weights='native'")
    if weights == "int8":
        return quantize_int8(model)
    if weights == "w8a8":
        return quantize_w8a8(model)
    return quantize_int4(model, cache_dir=owned_model_dir(model))


def auto_weight_format(model: nn.Module | None) -> str:
    """What weights="auto" means for this model: w8a8 for a bundled model (one of our converted GGUFs) in bf16 on a
    CPU with fbgemm's kernels (x86), where decoding is memory-bound (README: no measured loss of HumanEval pass@1,
    the fastest per token end to end; int4 on other CPUs); else its weights as loaded: a user's model (its
    accuracy in a lossy format is not measured: ask for one), a GPU's kernels, or fp32 (the reference format,
    where a seed's tokens are exact across drafters)."""
    if model is None or owned_model_dir(model) is None:
        return "native"
    parameter = next(model.parameters())
    if parameter.device.type != "cpu" or parameter.dtype != torch.bfloat16:
        return "native"
    return "w8a8" if torch.backends.quantized.engine in ("x86", "fbgemm") else "int4"   # measured with fbgemm only


def weight_bytes(model: nn.Module) -> int:
    """Bytes a decoding step of one row reads: every parameter and buffer but the embedding table (a lookup reads a
    row) and the dense weights the low-byte layers keep for large calls, plus fbgemm's packed weights. Not counted:
    the dense weights of w8a8's outlier channels (a few percent at one row)."""
    embedding = model.get_input_embeddings().weight
    buffers = [b for name, b in model.named_buffers() if not name.endswith("weight_dense")]
    tensors = {id(t): t for t in list(model.parameters()) + buffers}
    head = model.get_output_embeddings()
    head_is_table = head is not None and getattr(head, "weight", None) is embedding
    return sum(t.numel() * t.element_size() for key, t in tensors.items() if key != id(embedding) or head_is_table
               ) + sum(m.packed_bytes for m in model.modules() if isinstance(m, DynamicInt8Linear))
