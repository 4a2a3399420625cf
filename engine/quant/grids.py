"""FourBitGrid: fitting a weight's 4-bit grid per group (as a Q4_K GGUF stores one), or finding it has none."""

from __future__ import annotations

from dataclasses import dataclass

import torch

INT4_GROUP = 32  # weights per group of one step and one offset (a Q4_K sub-block)
GRID_TOLERANCE = 0.05  # RMS distance to the fitted grid, in steps of (max - min) / 15, below which a layer is 4-bit
# already (measured: ~0.01 for a Q4_K tensor loaded in bf16, 0.0000 in fp32; ~0.27 others)
SAMPLE_GROUPS = 4096  # groups FourBitGrid.fit looks at before fitting a whole tensor
CHUNK_GROUPS = 65536  # groups fitted at once (8 MB of fp32)
OFF_GRID = 0.1  # a group farther than this from its fit is refit with fewer steps (bf16 rounding leaves
# ~0.01-0.03 steps; a Q4_K block of 14 steps fitted with 15 lies ~0.29 away)


@dataclass
class FourBitGrid:
    """Weights [out, in] as low + code * step per group of `group` weights along `in`; codes 0..15."""

    codes: torch.Tensor  # [out, in] uint8
    step: torch.Tensor  # [out, in / group] float32
    low: torch.Tensor  # [out, in / group] float32
    group: int
    distance: float  # RMS of weight - fit, in units of (max - min) / 15 of each group

    @classmethod
    def fit(
        cls, weight: torch.Tensor, group: int = INT4_GROUP, tolerance: float | None = GRID_TOLERANCE
    ) -> FourBitGrid | None:
        """The best 4-bit grid per group: the step is (max - min) / s for the s in 15..1 that fits best (a Q4_K
        block need not use all 16 levels: measured, 21% of the bundled 1.5B's groups span 14 steps). None when
        `in` is not a multiple of `group`, or when the weights lie farther than `tolerance` from the fit (judged
        on a sample of groups first, so a tensor that is not 4-bit costs little; None: fit whatever the weights)."""
        out_features, in_features = weight.shape
        if in_features % group:
            return None
        groups = weight.detach().reshape(-1, group)  # [R, group], as stored
        if tolerance is not None and groups.shape[0] > SAMPLE_GROUPS:  # smaller: the whole fit below is as cheap
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

    @classmethod
    def stack(cls, grids: list[FourBitGrid]) -> FourBitGrid:
        """The grid of the layers' weights stacked along `out` (as engine/models/lean.py stacks projections)."""
        if len({grid.group for grid in grids}) != 1:
            raise ValueError(f"grids of groups {[grid.group for grid in grids]} cannot be stacked")
        return cls(
            torch.cat([grid.codes for grid in grids]),
            torch.cat([grid.step for grid in grids]),
            torch.cat([grid.low for grid in grids]),
            grids[0].group,
            max(grid.distance for grid in grids),
        )


def _fit_groups(groups: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(codes [R, G] uint8, step [R], low [R], error [R]) of the best grid per group (fp32 [R, G]); error is the
    RMS distance in units of (max - min) / 15. Spans below 14 are tried only while most groups fit."""
    low, high = groups.amin(dim=1), groups.amax(dim=1)  # [R]
    unit = ((high - low) / 15).clamp(min=torch.finfo(torch.float32).tiny)  # [R]
    step, error = unit.clone(), _grid_error(groups, low, unit)  # [R], [R] in units of `unit`
    for span in range(14, 0, -1):
        todo = (error > OFF_GRID).nonzero().squeeze(1)  # groups not on a grid yet
        if todo.numel() == 0 or (span < 14 and todo.numel() > groups.shape[0] // 2):
            break  # all fit, or these weights are not 4-bit (no need to try every span on them)
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
    position = (groups - low[:, None]).mul_(step.reciprocal()[:, None])  # in place: these arrays are large
    return position.sub_(position.round()).square_().mean(dim=1).sqrt_()
