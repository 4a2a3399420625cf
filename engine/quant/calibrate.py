"""`auto` decided by what decodes fastest on this machine, not by one CPU flag.

A decode step reads every weight once, so its time is the time of the model's linear layers: the formats differ in
bytes a weight and in kernels (fbgemm's int8 products, torch's int4 and bf16 kernels), and which one wins depends on
the CPU (AVX-512 VNNI and native bf16, or AVX2 only, where bf16 is emulated) and on its memory. At the first start of
a model, `calibrate` times one decoder layer's linear layers, in the model's shapes and with random weights, in each
candidate (dtype, weight format), for one token row (an editor's plain step) and eight (a batch of candidates or a
verify pass), interleaved so that the machine's noise hits all alike: 10-15 s for the bundled models. The step
time of the whole model is that layer's time scaled to its linear weights (the output head counted at the layers'
cost per weight).
The fastest by the sum of the two row counts is chosen (near-equals, within MARGIN: the earlier candidate) and
cached in `calibration.json` of the cache directory, under the CPU's description (with the instruction-set caps of
torch's libraries: a capped run is another machine), torch's version, the threads and the shapes; `--dtype` and
`--weights` still override.
"""

from __future__ import annotations

import json
import logging
import math
import os
import platform
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from types import SimpleNamespace

import torch
from torch import nn

from engine.quant.cpu import cpu_description
from engine.quant.grids import INT4_GROUP, FourBitGrid
from engine.quant.weights import quantize_int4, quantize_int4_dyn, quantize_int8, quantize_w8a8

log = logging.getLogger(__name__)

CALIBRATION_FILE = "calibration.json"
# bump when what is timed changes (ROWS, CACHE_BYTES, the layer): older entries are not reused; 2: the stacked
# projections lean layers call (engine/models/lean.py)
CALIBRATION_VERSION = 2
ROWS = (1, 8)  # token rows of the timed calls: a plain one-row step and a batch (or verify pass) of eight
CACHE_BYTES = 256 * 2**20  # fp32 weights streamed per timed pass, past any CPU's last-level cache
ROUNDS = 5  # timed rounds per candidate and row count (after one to warm up); the median counts
# a candidate later in the list must be this much faster than an earlier one to be chosen over it: two formats
# within the machine's noise (bf16/int4-w8a8 and fp32/w8a8 on an AVX-512 CPU: 178 and 173 ms in one run, 216 and
# 245 in another) go to the first, so that a noisy first start does not decide between near-equals
MARGIN = 0.10
# (dtype, weights) a bundled model may run in: its lossy formats are measured on HumanEval (docs/MEASUREMENTS.md)
BUNDLED_CANDIDATES = (
    ("bfloat16", "int4-w8a8"),
    ("float32", "w8a8"),  # int4-w8a8's 4-bit path is 15x slower on fp32 activations (bench_formats): not offered
    ("bfloat16", "native"),
    ("float32", "native"),
    ("float32", "int8"),
)
# on ARM (no fbgemm, so candidates_for drops the w8a8 formats), torch's KleidiAI int4 kernel; on x86 it runs a
# slow reference path, so it is offered there only when asked for
ARM_CANDIDATES = (("float32", "int4-dyn"), ("bfloat16", "int4-dyn"))
ARM_MACHINES = ("aarch64", "arm64")
# a user's model stays in its own weights (a lossy format's accuracy is not measured for it): only the dtype varies
NATIVE_CANDIDATES = (("bfloat16", "native"), ("float32", "native"))
CPU_DTYPES = ("bfloat16", "float32")  # fp16 matmuls are slow on CPUs without AVX-512 FP16: not offered to auto


@dataclass(frozen=True)
class Shapes:
    """The linear layers of a Qwen2/Llama-style decoder, as its config gives them."""

    hidden: int
    kv: int  # output features of the key and value projections
    ff: int
    layers: int
    vocab: int

    @classmethod
    def of(cls, config) -> Shapes:
        heads = config.num_attention_heads
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
        kv_heads = getattr(config, "num_key_value_heads", None) or heads
        hidden, layers = config.hidden_size, config.num_hidden_layers
        found = cls(hidden, kv_heads * head_dim, config.intermediate_size, layers, config.vocab_size)
        if not all(isinstance(v, int) and v > 0 for v in asdict(found).values()):
            raise ValueError(f"a decoder's shapes were expected, the config gives {asdict(found)}")
        return found

    def layer_weights(self) -> int:
        return 2 * self.hidden * self.hidden + 2 * self.kv * self.hidden + 3 * self.ff * self.hidden

    def model_weights(self) -> int:
        return self.layers * self.layer_weights() + self.vocab * self.hidden


@dataclass
class Calibration:
    """The chosen (dtype, weights), why, and the estimated step time of every candidate (ms by token rows)."""

    dtype: str
    weights: str
    step_ms: dict[str, dict[str, float]]  # "dtype/weights" -> {"1": ms, "8": ms}
    machine: str
    measured_s: float
    cached: bool = False

    def reason(self) -> str:
        """Why the chosen format, for the page and /v1/models: what it beat, in step times on this machine."""
        times = {name: sum(rows.values()) for name, rows in self.step_ms.items()}
        chosen = f"{self.dtype}/{self.weights}"
        if len(times) < 2:
            return "the only format allowed here"
        others = sorted((ms, name) for name, ms in times.items() if name != chosen)
        runner_ms, runner = others[0]
        rows = " + ".join(f"{r} row{'s' if r != '1' else ''}" for r in self.step_ms[chosen])
        timed = f"of {len(times)} formats timed on this CPU ({self.machine}): {times[chosen]:.0f} ms a step ({rows})"
        if times[chosen] <= runner_ms:
            return f"fastest {timed} against {runner_ms:.0f} ms for {runner}"
        return f"preferred {timed}, within {MARGIN:.0%} of the fastest, {runner} at {runner_ms:.0f} ms"


def candidates_for(bundled: bool, dtype: str, weights: str) -> list[tuple[str, str]]:
    """The (dtype, weights) pairs `auto` chooses among: a weight format asked for is timed in both dtypes, a dtype
    asked for keeps the candidates in it."""
    if weights != "auto":
        return [(d, weights) for d in CPU_DTYPES if dtype in ("auto", d)]
    pool = NATIVE_CANDIDATES
    if bundled:
        pool = BUNDLED_CANDIDATES + (ARM_CANDIDATES if platform.machine().lower() in ARM_MACHINES else ())
        if torch.backends.quantized.engine not in ("x86", "fbgemm"):  # w8a8's accuracy is measured on fbgemm only
            pool = tuple(pair for pair in pool if "w8a8" not in pair[1])
    return [(d, w) for d, w in pool if dtype in ("auto", d)]


def calibrate(shapes: Shapes, pairs: list[tuple[str, str]], cache_dir: Path | None) -> Calibration:
    """The fastest of `pairs` for a model of these shapes here: read from the cache when this machine timed them
    before, else timed now (10-15 s for the bundled models) and saved."""
    key = _cache_key(shapes, pairs)
    cache_file = None if cache_dir is None else Path(cache_dir) / CALIBRATION_FILE
    saved = _read(cache_file).get(key)
    if isinstance(saved, dict):
        try:
            return Calibration(**{**saved, "cached": True})
        except TypeError:  # an entry of another layout: timed again
            log.warning("%s holds an entry of another layout: the formats are timed again", cache_file)
    started = time.perf_counter()
    step_ms = time_formats(shapes, pairs)
    if not step_ms:
        raise RuntimeError(f"none of the formats {', '.join(map(_name, pairs))} runs on this machine")
    best = pick([pair for pair in pairs if _name(pair) in step_ms], step_ms)
    found = Calibration(best[0], best[1], step_ms, _machine(), round(time.perf_counter() - started, 1))
    log.info("formats timed in %.1f s: %s", found.measured_s, found.reason())
    if cache_file is not None:
        _write(cache_file, {**_read(cache_file), key: {k: v for k, v in asdict(found).items() if k != "cached"}})
    return found


def pick(pairs: list[tuple[str, str]], step_ms: dict[str, dict[str, float]]) -> tuple[str, str]:
    """The first of `pairs` (in order of preference) within MARGIN of the fastest, by the sum over ROWS."""
    totals = [sum(step_ms[_name(pair)].values()) for pair in pairs]
    return next(pair for pair, total in zip(pairs, totals) if total <= min(totals) * (1 + MARGIN))


def time_formats(shapes: Shapes, pairs: list[tuple[str, str]], rounds: int = ROUNDS) -> dict[str, dict[str, float]]:
    """Estimated ms of a decode step of the whole model in each (dtype, weights), by token rows; a format whose
    kernels this machine lacks (fbgemm's off x86, say) is left out, and logged."""
    copies = max(2, math.ceil(CACHE_BYTES / (4 * shapes.layer_weights())))
    blocks = {}
    for pair in pairs:
        try:
            blocks[_name(pair)] = [_block(shapes, *pair, seed) for seed in range(copies)]
            for rows in ROWS:
                _time_pass(blocks[_name(pair)], rows)
        except (RuntimeError, NotImplementedError) as err:  # no kernel for this format here
            blocks.pop(_name(pair), None)
            log.warning("format %s cannot run here, not timed: %s", _name(pair), err)
    scale = shapes.model_weights() / (copies * shapes.layer_weights())
    step_ms: dict[str, dict[str, float]] = {name: {} for name in blocks}
    for rows in ROWS:
        samples: dict[str, list[float]] = {name: [] for name in blocks}
        for _ in range(rounds + 1):  # the first round warms up
            for name, layers in blocks.items():  # interleaved
                samples[name].append(_time_pass(layers, rows))
        for name, times in samples.items():
            step_ms[name][str(rows)] = round(sorted(times[1:])[len(times[1:]) // 2] * scale, 2)
    return step_ms


class _Layer(nn.Module):
    """One decoder layer's linear layers as a lean layer calls them (engine/models/lean.py: q/k/v and gate/up
    stacked), named as Qwen2's (so that w8a8 splits the MLP's down projection's outlier channels as it does in the
    model)."""

    def __init__(self, shapes: Shapes, dtype: torch.dtype, seed: int, four_bit: bool):
        super().__init__()
        self.config = SimpleNamespace(tie_word_embeddings=False)
        self.dtype = dtype
        self.grids: dict[str, FourBitGrid] = {}
        generator = torch.Generator().manual_seed(seed)
        h, kv, ff = shapes.hidden, shapes.kv, shapes.ff
        for name, out_features, in_features in (
            ("q_k_v_proj", h + 2 * kv, h),
            ("o_proj", h, h),
            ("gate_up_proj", 2 * ff, h),
            ("down_proj", h, ff),
        ):
            linear, grid = _on_grid(out_features, in_features, dtype, generator, four_bit)
            self.add_module(name, linear)
            if grid is not None:
                self.grids[name] = grid

    def forward(self, x: torch.Tensor, wide: torch.Tensor) -> None:
        for name, module in self.named_children():
            module(wide if name == "down_proj" else x)


def _on_grid(
    out_features: int, in_features: int, dtype: torch.dtype, generator: torch.Generator, four_bit: bool
) -> tuple[nn.Linear, FourBitGrid | None]:
    """A random linear layer whose weights lie on a 4-bit grid per group (as a Q4_K GGUF's), and that grid; without
    `four_bit`, plain random weights and no grid."""
    linear = nn.Linear(in_features, out_features, bias=False)
    if not four_bit:
        return linear.to(dtype), None
    groups = in_features // INT4_GROUP
    codes = torch.randint(0, 16, (out_features, in_features), generator=generator, dtype=torch.uint8)
    step = torch.rand(out_features, groups, generator=generator) * 0.01 + 0.001
    with torch.no_grad():
        linear.weight.copy_((codes.float() - 8) * step.repeat_interleave(INT4_GROUP, 1))
    return linear.to(dtype), FourBitGrid(codes, step, -8 * step, INT4_GROUP, 0.0)


FOUR_BIT_FORMATS = ("int4", "int4-w8a8", "int4-dyn")


def _block(shapes: Shapes, dtype: str, weights: str, seed: int) -> _Layer:
    four_bit = weights in FOUR_BIT_FORMATS
    if four_bit and (shapes.hidden % INT4_GROUP or shapes.ff % INT4_GROUP):
        raise NotImplementedError(f"{weights} needs layer widths in multiples of {INT4_GROUP}")
    layer = _Layer(shapes, getattr(torch, dtype), seed, four_bit)
    if weights == "int8":
        return quantize_int8(layer)
    if weights == "int4":
        return quantize_int4(layer, grids=layer.grids)
    if weights == "int4-dyn":
        return quantize_int4_dyn(layer, grids=layer.grids)
    if weights in ("w8a8", "int4-w8a8"):
        return quantize_w8a8(layer, layer.grids if weights == "int4-w8a8" else None)
    return layer


def _time_pass(layers: list[_Layer], rows: int) -> float:
    """ms of one call of every linear layer of `layers` on `rows` token rows."""
    x = torch.randn(rows, layers[0].o_proj.in_features, dtype=layers[0].dtype)  # the hidden state's width
    wide = torch.randn(rows, layers[0].down_proj.in_features, dtype=layers[0].dtype)
    started = time.perf_counter()
    with torch.inference_mode():
        for layer in layers:
            layer(x, wide)
    return (time.perf_counter() - started) * 1e3


def _name(pair: tuple[str, str]) -> str:
    return f"{pair[0]}/{pair[1]}"


def _machine() -> str:
    cpu = cpu_description()
    caps = "".join(f", {name}={value}" for name, value in cpu.get("caps", {}).items())
    return f"{cpu['model']}, {' '.join(cpu['isa']) or 'no AVX2'}{caps}"


def _cache_key(shapes: Shapes, pairs: list[tuple[str, str]]) -> str:
    return json.dumps(
        {
            "cpu": cpu_description(),
            "torch": torch.__version__,
            "threads": torch.get_num_threads(),
            "shapes": asdict(shapes),
            "pairs": [_name(p) for p in pairs],
            "method": CALIBRATION_VERSION,
        },
        sort_keys=True,
    )


def _read(path: Path | None) -> dict:
    if path is None or not path.exists():
        return {}
    try:
        found = json.loads(path.read_text())
    except (OSError, ValueError):
        log.warning("%s is unreadable: the formats are timed again", path)
        return {}
    return found if isinstance(found, dict) else {}


def _write(path: Path, data: dict) -> None:
    """Save atomically (a temporary file of its own, so two processes never share one); a directory that cannot be
    written only costs the timing again at the next start."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, partial = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".partial")
        with os.fdopen(handle, "w") as out:
            out.write(json.dumps(data, indent=1))
        os.replace(partial, path)
    except OSError as err:
        log.warning("the formats' timing is not saved (%s): it runs again at the next start", err)
