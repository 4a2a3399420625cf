"""Search until the examples pass: when no candidate of a run passes every check and the budget has time left, the
pipeline draws k more rows (a new seed, every row sampled) and checks them, round after round, until one passes,
the budget ends or the rounds run out. The user's k is the number of candidates shown, not a ceiling on the search.

This module holds the rule (`SearchSettings.why_stop`), the request of each further round, and how the rounds'
results add up; app/service.py runs the rounds.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from engine import GenerationRequest, GenerationResult, GenerationStats

# why the search ended (Search.reason); the first round always runs
PASSED = "a candidate passes every check"
NO_CHECKS = "no checks ran, so there is nothing to search for"
GREEDY = "temperature 0 has one answer"
OFF = "the search is off for this request"
BUDGET = "the budget has too little time left for another round"
ROUNDS = "the round limit was reached"
STOPPED = "the run was stopped"
# the prompt's counts, the same in every round (its first reading is the one reported); every other count adds up
PROMPT_COUNTS = ("prompt_tokens", "cached_prompt_tokens", "moved_prompt_tokens", "prompt_read_tokens")
SEED_STRIDE = 1_000_003  # round r of seed s samples with seed s + r * SEED_STRIDE (other requests' seeds differ by 1)


@dataclass(frozen=True)
class SearchSettings:
    """When another round of k rows is drawn."""

    max_rounds: int = 8  # rounds at most, the first included (k * max_rounds rows)
    min_left_s: float = 1.0  # a round starts only with this much of the budget left,
    min_left_share: float = 0.5  # and at least this share of the time the last round took (rows, analysis, checks)

    def __post_init__(self):
        if not 1 <= self.max_rounds <= 64:
            raise ValueError(f"max_rounds={self.max_rounds!r} is out of range: it must be in 1..64")
        if not 0 <= self.min_left_s <= 3600:  # NaN fails too
            raise ValueError(f"min_left_s={self.min_left_s!r} is out of range: it must be in 0..3600 seconds")
        if not 0 <= self.min_left_share <= 10:
            raise ValueError(f"min_left_share={self.min_left_share!r} is out of range: it must be in 0..10")

    def why_stop(
        self,
        rounds: int,
        left_s: float,
        last_round_s: float,
        passed: list[int] | None,
        n_checks: int,
        request: GenerationRequest,
        wanted: bool = True,
        stopped: bool = False,
    ) -> str | None:
        """Why no further round is drawn after `rounds` rounds, or None to draw one. `passed`: the checks each row
        passed so far (None where none ran), of `n_checks`; `left_s`: the budget left; `wanted`: the request's
        wish (editors ask for none: their budget is the time to one line); `stopped`: the run was stopped."""
        if stopped:
            return STOPPED
        if passed is not None and any(p == n_checks for p in passed):
            return PASSED
        if passed is None or n_checks == 0:
            return NO_CHECKS
        if not wanted:
            return OFF
        if request.temperature == 0:
            return GREEDY
        if rounds >= self.max_rounds:
            return ROUNDS
        if left_s < max(self.min_left_s, self.min_left_share * last_round_s):
            return BUDGET
        return None


@dataclass(frozen=True)
class Search:
    """What the search did: the rounds drawn, the rows they gave, why it ended (the page and the APIs say it)."""

    rounds: int  # 1: no search beyond the first draw
    drawn: int  # rows over all rounds
    shown: int  # distinct candidates shown (the k best)
    reason: str  # why it ended: one of this module's reasons

    def as_dict(self) -> dict:
        return {"rounds": self.rounds, "drawn": self.drawn, "shown": self.shown, "reason": self.reason}


def round_request(request: GenerationRequest, rounds_done: int, left_s: float) -> GenerationRequest:
    """The request of the round after `rounds_done`: new samples (a seed of its own where the request fixes one), no
    greedy row (it would repeat), the budget that is left."""
    seed = None if request.seed is None else (request.seed + rounds_done * SEED_STRIDE) % 2**31
    return replace(request, seed=seed, greedy_first=False, budget_s=max(left_s, 1e-3))


def combined(before: GenerationResult | None, new: GenerationResult) -> GenerationResult:
    """The rows of earlier rounds then the new round's; the statistics added up (the prompt counted once)."""
    if before is None:
        return new
    one, two = before.stats, new.stats
    summed = {
        f.name: getattr(one, f.name) + getattr(two, f.name)
        for f in fields(GenerationStats)
        if f.name not in PROMPT_COUNTS and f.name != "drafter_choices"
    }
    choices = dict(one.drafter_choices)
    for name, steps in two.drafter_choices.items():
        choices[name] = choices.get(name, 0) + steps
    stats = GenerationStats(**summed, drafter_choices=choices, **{name: getattr(one, name) for name in PROMPT_COUNTS})
    return GenerationResult(list(before.candidates) + list(new.candidates), stats)
