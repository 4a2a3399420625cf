"""The (dtype, weights) a model loads in: what the user asked for, or, for `auto` on a CPU, the candidate formats
timed on this machine (engine/quant/calibrate.py) and the fastest chosen. Where nothing is timed (a tiny test model,
a GPU, a model whose shapes are not a decoder's), `auto` keeps the CPU-flag policy of pick_dtype and
auto_weight_format."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from engine.models.loading import BUNDLED_PREFIX, default_cache_dir, pick_device, resolve_spec
from engine.models.tiny import TINY_PREFIX
from engine.quant.calibrate import Shapes, calibrate, candidates_for

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class FormatChoice:
    """The dtype and weight format a model loads in ("auto" where the flag policy decides at load), and why."""

    dtype: str
    weights: str
    reason: str


def choose_formats(
    spec: str, cache_dir: Path | None = None, dtype: str = "auto", weights: str = "auto", progress: bool = True
) -> FormatChoice:
    """The formats for `spec`: as asked, or timed here (10-15 s at a model's first start, then cached)."""
    if dtype != "auto" and weights != "auto":
        return FormatChoice(dtype, weights, "as asked (--dtype and --weights)")
    if spec.startswith(TINY_PREFIX):
        return FormatChoice(dtype, weights, "a tiny test model: formats are not timed")
    if pick_device().type != "cpu":
        return FormatChoice(dtype, weights, "on a GPU: formats are not timed")
    pairs = candidates_for(spec.startswith(BUNDLED_PREFIX), dtype, weights)
    if len(pairs) < 2:  # nothing to choose between (or nothing auto may pick: the flag policy)
        return FormatChoice(*(pairs[0] if pairs else (dtype, weights)), "the only format allowed here")
    try:
        from transformers import AutoConfig

        shapes = Shapes.of(AutoConfig.from_pretrained(resolve_spec(spec, cache_dir, progress)))
    except (AttributeError, OSError, ValueError) as err:  # not a decoder this module knows: the flag policy
        log.warning("formats of %s not timed (%s): auto follows the CPU's flags", spec, err)
        return FormatChoice(dtype, weights, f"by the CPU's flags (the model's shapes are unknown: {err})")
    try:
        found = calibrate(shapes, pairs, Path(cache_dir) if cache_dir else default_cache_dir())
    except Exception as err:  # noqa: BLE001 - timing is an optimisation: a model that loads must still load
        log.exception("timing the formats of %s failed: auto follows the CPU's flags", spec)
        return FormatChoice(dtype, weights, f"by the CPU's flags (timing the formats failed: {err})")
    when = "timed at an earlier start" if found.cached else "timed now"
    return FormatChoice(found.dtype, found.weights, f"{found.reason()} ({when})")


def as_loaded(model, chosen: FormatChoice) -> FormatChoice:
    """`chosen` with the dtype and weight format the loaded model really has (where `auto` was left to the flag
    policy, what that policy made of it)."""
    dtype = str(next(model.parameters()).dtype).removeprefix("torch.")
    return FormatChoice(dtype, getattr(model, "weight_format", "native"), chosen.reason)
