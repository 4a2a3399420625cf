"""Scores of candidate groups: generalized self-consistency, log-probability terms, the static policy."""

from __future__ import annotations

import math

import numpy as np


def generalized_self_consistency(similarities: np.ndarray, counts: np.ndarray | None = None) -> np.ndarray:
    """GSC(i): the mean similarity of candidate i to every other candidate (Jain et al., 2024).

    Parameters
    ----------
    similarities : ndarray of shape (n_groups, n_groups)
        Pairwise similarity of distinct candidates.
    counts : ndarray of shape (n_groups,), optional
        How many candidates each distinct text stands for (default: 1 each). Copies vote: a
        candidate's others are the other groups' members and its own group's other copies.

    Returns
    -------
    gsc : ndarray of shape (n_groups,)
        0 for every group when there is a single candidate in all (nobody to agree with).
    """
    n_groups = similarities.shape[0]
    counts = np.ones(n_groups) if counts is None else np.asarray(counts, dtype=np.float64)
    n_candidates = counts.sum()
    if n_candidates <= 1:
        return np.zeros(n_groups)
    # others of one member: every member of every group, minus the member itself.
    return (similarities @ counts - np.diag(similarities)) / (n_candidates - 1)


def mean_logprob(token_logprobs: list[float]) -> float:
    """Mean per-token log-probability; -inf for a candidate without tokens (nothing to vouch for it)."""
    return float(np.mean(token_logprobs)) if len(token_logprobs) else -math.inf


def finding_count(report, name: str) -> int:
    """`report.errors` / `report.warnings` / `report.type_errors` as a count, whether the report gives a number or a
    list (0 when it has no such field)."""
    value = getattr(report, name, 0)
    return int(value) if isinstance(value, (int, float)) else len(value)


def static_penalty_fraction(report, settings) -> float:
    """The static policy's cost of one report, as a fraction of the call's largest |score|.

    Parameters
    ----------
    report : object with `complete`, `errors`, `warnings` (static_eval.CandidateReport), or None
    settings : RankSettings

    Returns
    -------
    fraction : float
        error_penalty per error + warning_penalty per warning + type_penalty per type error + incomplete_penalty
        if cut off.
    """
    if report is None:
        return 0.0
    fraction = settings.error_penalty * finding_count(report, "errors")
    fraction += settings.warning_penalty * finding_count(report, "warnings")
    fraction += settings.type_penalty * finding_count(report, "type_errors")
    if not getattr(report, "complete", True):
        fraction += settings.incomplete_penalty
    return fraction
