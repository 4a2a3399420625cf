"""The disk cache of quantize_int4's FourBitGrid fits: one file per dtype in a converted model's directory."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import torch
from torch import nn

from engine.quant.grids import FourBitGrid

GRID_CACHE = "int4-grids-v1-{dtype}.pt"  # quantize_int4's fits, in a converted model's directory; bump the version
# when INT4_GROUP, GRID_TOLERANCE, OFF_GRID or the fit (engine/quant/grids.py)
# change

logger = logging.getLogger(__name__)


def grid_cache_file(cache_dir: Path | None, model: nn.Module) -> Path | None:
    """Where the fits of `model` (in its parameters' dtype) are kept under `cache_dir`; None without one."""
    if cache_dir is None:
        return None
    return Path(cache_dir) / GRID_CACHE.format(dtype=str(next(model.parameters()).dtype).removeprefix("torch."))


def save_grids(path: Path, grids: dict[str, FourBitGrid | None]) -> None:
    """Save the fits (codes two to a byte), atomically; a failure to write only costs the next start a refit."""
    stored = {
        name: None
        if grid is None
        else {
            "codes": grid.codes[:, 0::2] | (grid.codes[:, 1::2] << 4),
            "step": grid.step,
            "low": grid.low,
            "group": grid.group,
            "distance": grid.distance,
        }
        for name, grid in grids.items()
    }
    partial = path.with_name(f"{path.name}.{os.getpid()}.partial")  # one per process: two may fit at once
    try:
        torch.save(stored, partial)
        partial.replace(path)
    except (OSError, RuntimeError) as err:  # torch.save raises RuntimeError for a file it cannot write
        logger.warning("could not save the int4 grids to %s: %s", path, err)
        partial.unlink(missing_ok=True)


def load_grids(path: Path | None) -> dict[str, FourBitGrid | None]:
    """The fits save_grids saved at `path`; {} when there are none or the file is unreadable (then: refit)."""
    if path is None or not path.exists():
        return {}
    try:
        stored = torch.load(path, weights_only=True)
        grids = {}
        for name, entry in stored.items():
            if entry is None:
                grids[name] = None
                continue
            packed = entry["codes"]  # [out, in / 2] uint8
            codes = torch.stack([packed & 15, packed >> 4], dim=-1).reshape(packed.shape[0], -1)
            grids[name] = FourBitGrid(codes, entry["step"], entry["low"], entry["group"], entry["distance"])
        return grids
    except Exception as err:  # noqa: BLE001 - a damaged cache must not stop the model from loading
        logger.warning("ignoring the int4 grid cache %s (%s): fitting again", path, err)
        return {}


def grid_fits(grid: FourBitGrid | None, linear: nn.Linear) -> bool:
    """A cached grid (or None: not 4-bit) belongs to this layer: its shapes match (else the layer is refitted)."""
    if grid is None:
        return True
    out_features, in_features = linear.weight.shape
    return tuple(grid.codes.shape) == (out_features, in_features) and tuple(grid.step.shape) == (
        out_features,
        in_features // grid.group,
    )
