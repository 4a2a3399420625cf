"""Weight formats for CPU decoding: fewer bytes per step where decoding is memory-bound.

Decoding a few rows is memory-bound: each step reads every weight once, so the time per step follows the bytes of
the weights. Four formats replace the linear layers of the decoder and the output head (the embedding table
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
- int4-w8a8: w8a8's layers, where those on a 4-bit grid (as int4 finds them) read their 4-bit codes for calls of
  one token row (INT4_ONE_ROW: one row is memory-bound, and the codes are half of int8's bytes), the integer
  products from two rows on. A plain step of k=1 reads the GGUF's own codes; a verify pass or k > 1 reads w8a8.
- int4-dyn (for ARM, where fbgemm is missing): `Int4DynLinear` for the layers on a 4-bit grid, the GGUF's codes times
  activations rounded to 8 bits per row (`torch._dyn_quant_matmul_4bit`: KleidiAI on aarch64), `Int8Linear` for
  the others. On x86 torch runs a slow reference path: auto offers it on aarch64 only (docs/CPU.md).

The weight-only kernels turn weights back into floats and stop paying beyond a few rows; fbgemm's integer products stay
memory-bound to 8 rows (`python -m benchmarks.bench_kernels`; the figures are in docs/MEASUREMENTS.md). So each layer
keeps its original weight too, and a call of more token rows than its kernel pays for (INT8_MAX_ROWS, INT4_MAX_ROWS) or
than w8a8 is allowed (W8A8_MAX_ROWS, a chosen cap) uses it; a w8a8 layer on a CPU with VNNI keeps its int8 weights
instead and rounds such a call's activations with a scale per row (kernels.DynamicInt8Linear). Accuracy is
measured, not assumed: benchmarks/eval_humaneval.py --weights int8|int4|w8a8|int4-w8a8 (docs/MEASUREMENTS.md).

Here: the formats' names, the swap of a model's linear layers, the `auto` policy and the bytes a step reads. The
layers are in engine/quant/kernels.py, the 4-bit grids in engine/quant/grids.py (their disk cache:
engine/quant/grid_cache.py), the CPU's features in engine/quant/cpu.py; each module's constants open it.
"""

from __future__ import annotations

import logging
from pathlib import Path

import torch
from torch import nn

from engine.converted import owned_model_dir
from engine.models.lean import fuse_projections
from engine.quant.grid_cache import grid_cache_file, grid_fits, load_grids, save_grids
from engine.quant.grids import GRID_TOLERANCE, INT4_GROUP, FourBitGrid
from engine.quant.kernels import (
    INT4_MAX_ROWS,
    INT4_ONE_ROW,
    INT4_OUT_MULTIPLE,
    INT8_MAX_ROWS,
    LARGE_CALL_BUFFERS,
    W8A8_MAX_ROWS,
    DynamicInt8Linear,
    Int4DynLinear,
    Int4Linear,
    Int8Linear,
)
from engine.settings import WEIGHT_FORMATS

__all__ = [
    "WEIGHT_FORMATS",
    "W8A8_OUTLIER_LAYERS",
    "W8A8_OUTLIER_THRESHOLD",
    "check_weight_format",
    "apply_weight_format",
    "auto_weight_format",
    "quantize_int8",
    "quantize_int4",
    "quantize_int4_dyn",
    "quantize_w8a8",
    "weight_bytes",
    # re-exported from the modules that hold them
    "INT8_MAX_ROWS",
    "INT4_MAX_ROWS",
    "W8A8_MAX_ROWS",
    "INT4_ONE_ROW",
    "INT4_GROUP",
    "GRID_TOLERANCE",
    "Int8Linear",
    "Int4Linear",
    "DynamicInt8Linear",
    "FourBitGrid",
]

# layers whose inputs carry outlier channels, the MLP's output projection: one 8-bit scale per call loses several
# times the accuracy there that it loses elsewhere (docs/ENGINE.md)
W8A8_OUTLIER_LAYERS = ("down_proj",)
# their input channels above this (in magnitude) go through floats: a few of thousands, most of the error gone
W8A8_OUTLIER_THRESHOLD = 4.0

logger = logging.getLogger(__name__)


def quantize_int8(model: nn.Module, max_rows: int | None = INT8_MAX_ROWS, lean: bool = True) -> nn.Module:
    """Swap every nn.Linear of the model (decoder layers and output head) for an Int8Linear, in place (`lean`: the
    layers made lean first, their same-input projections stacked: _stack_projections)."""
    _stack_projections(model, {}, lean)
    return _swap_linears(model, "int8", lambda linear: Int8Linear(linear, max_rows))


def quantize_int4(
    model: nn.Module,
    int4_max_rows: int | None = INT4_MAX_ROWS,
    int8_max_rows: int | None = INT8_MAX_ROWS,
    cache_dir: Path | None = None,
    grids: dict[str, FourBitGrid | None] | None = None,
    lean: bool = True,
) -> nn.Module:
    """Swap every nn.Linear of the model for an Int4Linear where its weights lie on a 4-bit grid already (within
    GRID_TOLERANCE), else for an Int8Linear, in place; logs how many of each. With `cache_dir`, the grids are read
    from there when an earlier call saved them (fitting the bundled 1.5B takes one to two minutes here) and saved.
    `grids` given (as four_bit_grids returns them): no fit at all. `lean` as quantize_int8's."""
    grids = _stack_projections(model, four_bit_grids(model, cache_dir) if grids is None else grids, lean)
    names = {id(module): name for name, module in model.named_modules()}
    _swap_linears(
        model,
        "int4",
        lambda linear: (
            Int8Linear(linear, int8_max_rows)
            if grids[names[id(linear)]] is None
            else Int4Linear(linear, grids[names[id(linear)]], int4_max_rows)
        ),
    )
    return model


def quantize_int4_dyn(
    model: nn.Module,
    cache_dir: Path | None = None,
    grids: dict[str, FourBitGrid | None] | None = None,
    lean: bool = True,
) -> nn.Module:
    """Swap every nn.Linear of the model for an Int4DynLinear where its weights lie on a 4-bit grid, else for an
    Int8Linear, in place (the int4-dyn format; grids as quantize_int4 finds or is given them; `lean` as
    quantize_int8's)."""
    grids = _stack_projections(model, four_bit_grids(model, cache_dir) if grids is None else grids, lean)
    names = {id(module): name for name, module in model.named_modules()}

    def make(linear: nn.Linear) -> nn.Module:
        grid = grids.get(names[id(linear)])
        return Int8Linear(linear) if grid is None else Int4DynLinear(linear, grid)

    return _swap_linears(model, "int4-dyn", make)


def four_bit_grids(model: nn.Module, cache_dir: Path | None) -> dict[str, FourBitGrid | None]:
    """{name: the 4-bit grid its weights lie on, or None} for every nn.Linear of the model; fits read from (and new
    ones saved to) `cache_dir`'s grid cache when one is given; logs how many lie on a grid."""
    cache_file = grid_cache_file(cache_dir, model)
    cached = load_grids(cache_file)
    grids: dict[str, FourBitGrid | None] = {}
    fitted: set[str] = set()
    for name, linear in model.named_modules():
        if not isinstance(linear, nn.Linear):
            continue
        if name in cached and grid_fits(cached[name], linear):
            grids[name] = cached[name]
        else:
            grids[name] = FourBitGrid.fit(linear.weight) if linear.out_features % INT4_OUT_MULTIPLE == 0 else None
            fitted.add(name)
    if cache_file is not None and fitted:
        save_grids(cache_file, {**cached, **grids})  # cached fits of layers not in this model stay
    four_bit = sum(grid is not None for grid in grids.values())
    logger.info(
        "4-bit grids: %d linear layers on one, %d not; %d grids from the cache",
        four_bit,
        len(grids) - four_bit,
        len(grids) - len(fitted),
    )
    return grids


def quantize_w8a8(model: nn.Module, grids: dict[str, FourBitGrid | None] | None = None, lean: bool = True) -> nn.Module:
    """Swap every nn.Linear of the model for a DynamicInt8Linear, in place; those named in W8A8_OUTLIER_LAYERS
    split their outlier channels off (W8A8_OUTLIER_THRESHOLD). With `grids` (four_bit_grids), the layers on a
    4-bit grid read their codes for one-row calls (the int4-w8a8 format). `lean` as quantize_int8's."""
    weight_format = "w8a8" if grids is None else "int4-w8a8"
    grids = _stack_projections(model, grids or {}, lean)
    full_names = {id(module): name for name, module in model.named_modules()}
    names = {key: name.rsplit(".", 1)[-1] for key, name in full_names.items()}
    split = sum(names[id(m)] in W8A8_OUTLIER_LAYERS for m in model.modules() if isinstance(m, nn.Linear))
    if not split:
        logger.warning(
            "weights w8a8: no layer named %s (the MLP's output projection of Qwen/Llama-style models): "
            "no layer splits outlier channels off",
            "/".join(W8A8_OUTLIER_LAYERS),
        )
    _swap_linears(
        model,
        weight_format,
        lambda linear: DynamicInt8Linear(
            linear,
            outlier_threshold=W8A8_OUTLIER_THRESHOLD if names[id(linear)] in W8A8_OUTLIER_LAYERS else None,
            grid=grids.get(full_names[id(linear)]),
        ),
    )
    logger.info(
        "weights %s: every linear layer with 8-bit activations, %d with outlier channels in floats, %d "
        "with 4-bit codes for one row",
        weight_format,
        split,
        sum(grid is not None for grid in grids.values()),
    )
    return model


def _stack_projections(
    model: nn.Module, grids: dict[str, FourBitGrid | None], lean: bool = True
) -> dict[str, FourBitGrid | None]:
    """A Llama/Qwen2 model's layers made lean, their same-input projections stacked where they are of one kind
    (engine/models/lean.py: here, on a 4-bit grid or not); returns the grids by name, a stacked layer's the stack of
    its parts'. Any other model, or lean=False (transformers' own layers, for comparisons), stays as it is."""
    grids = dict(grids)
    if not lean:
        return grids
    stacked = fuse_projections(model, lambda name: grids.get(name) is not None)
    for name, parts in stacked.items():
        part_grids = [grids.pop(part, None) for part in parts]
        grids[name] = None if None in part_grids else FourBitGrid.stack(part_grids)
    if stacked:
        logger.info(
            "lean layers: %d same-input projections stacked into %d layers",
            sum(map(len, stacked.values())),
            len(stacked),
        )
    return grids


def _swap_linears(model: nn.Module, weight_format: str, make) -> nn.Module:
    """Replace every nn.Linear by make(linear). A tied output head gets its own copy; the embedding keeps the
    original table, and transformers is told the two are no longer tied (else tie_weights() would hang the table
    on the new head as an unused `weight`)."""
    swaps = [
        (parent, name, child)
        for parent in model.modules()
        for name, child in parent.named_children()
        if isinstance(child, nn.Linear)
    ]
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


def apply_weight_format(model: nn.Module | None, weights: str, lean: bool = True) -> nn.Module | None:
    """The model in the named weight format (see WEIGHT_FORMATS); None stays None. `lean`: a Llama/Qwen2 model's
    layers made lean and their same-input projections stacked (engine/models/lean.py); False keeps transformers'
    own layers (the same numbers, slower: benchmarks/bench_lean.py)."""
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
        raise ValueError(
            f"weights={weights!r} is for decoding on a CPU (its kernels are checked there only); the "
            f"model is on {device}: use weights='native'"
        )
    if weights == "int8":
        return quantize_int8(model, lean=lean)
    if weights == "w8a8":
        return quantize_w8a8(model, lean=lean)
    if weights == "int4-w8a8":
        return quantize_w8a8(model, four_bit_grids(model, owned_model_dir(model)), lean)
    if weights == "int4-dyn":
        return quantize_int4_dyn(model, cache_dir=owned_model_dir(model), lean=lean)
    return quantize_int4(model, cache_dir=owned_model_dir(model), lean=lean)


def auto_weight_format(model: nn.Module | None) -> str:
    """What weights="auto" means for this model: int4-w8a8 for a bundled model (one of our converted GGUFs) in bf16 on a
    CPU with fbgemm's kernels (x86), where decoding is memory-bound (docs/MEASUREMENTS.md: no measured loss of HumanEval
    pass@1, the fastest end to end: w8a8's integer products from two rows on, the GGUF's 4-bit codes for one row; int4
    on other CPUs); else its weights as loaded: a user's model (its accuracy in a lossy format is not measured: ask for
    one), a GPU's kernels, or fp32 (the reference format, where a seed's tokens are exact across drafters)."""
    if model is None or owned_model_dir(model) is None:
        return "native"
    parameter = next(model.parameters())
    if parameter.device.type != "cpu" or parameter.dtype != torch.bfloat16:
        return "native"
    return "int4-w8a8" if torch.backends.quantized.engine in ("x86", "fbgemm") else "int4"  # measured with fbgemm only


def weight_bytes(model: nn.Module) -> int:
    """Bytes a decoding step of one row reads: every parameter and buffer but the embedding table (a lookup reads a
    row) and the weights the low-byte layers keep for large calls (LARGE_CALL_BUFFERS), plus fbgemm's packed
    weights (where a one-row call does not read 4-bit codes instead). Not counted:
    the dense weights of w8a8's outlier channels (a few percent at one row)."""
    embedding = model.get_input_embeddings().weight
    buffers = [b for name, b in model.named_buffers() if not name.endswith(LARGE_CALL_BUFFERS)]
    tensors = {id(t): t for t in list(model.parameters()) + buffers}
    head = model.get_output_embeddings()
    head_is_table = head is not None and getattr(head, "weight", None) is embedding
    return sum(
        t.numel() * t.element_size() for key, t in tensors.items() if key != id(embedding) or head_is_table
    ) + sum(m.packed_bytes for m in model.modules() if isinstance(m, DynamicInt8Linear) and m.four_bit is None)
