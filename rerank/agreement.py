"""Dual agreement (CodeT, Chen et al. 2022): where the checks are tests the model wrote, some of them wrong, a
candidate is worth as much as the agreement behind it: the candidates that pass exactly the same tests form a group,
and the group's score is its size times the number of tests it passes. A wrong test that few candidates pass, or a
wrong candidate that few others agree with, weighs little."""

from __future__ import annotations

from collections import Counter


def dual_agreement(passed: list[tuple[bool, ...]]) -> list[float]:
    """Each candidate's group score, from which of the tests it passed (one tuple per candidate, in the tests'
    order). No test, or none passed by anyone: every score is 0 (nothing to tell them apart)."""
    sizes = Counter(passed)
    return [float(sizes[row] * sum(row)) for row in passed]
