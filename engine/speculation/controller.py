"""Choosing the drafter and draft length each step: BASS's length rule plus measured costs and acceptance."""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field


@dataclass
class ControllerSettings:
    """Knobs of the draft-length controller."""

    start_length: int = 7  # BASS: first draft length
    max_length: int = 32  # BASS: never longer
    max_lookup_length: int = 8  # model-free drafts: longer ones are rarely accepted whole and make verification dear
    min_draft_confidence: float = 0.4  # a model draft stops once every row's newest token is less likely than this
    grow_step: int = 2  # BASS: growth when some row accepted the whole draft
    cost_aware: bool = True  # compare expected tokens/s with plain decoding (length 0) from measured costs
    prior_acceptance: float = 0.6  # per-token acceptance assumed before any observation
    prior_weight: float = 4.0  # how many observed tokens the prior is worth
    decay: float = 0.98  # older observations fade (acceptance drifts within a generation)
    probe_every: int = 12  # steps without speculation before a short probe re-measures acceptance
    min_gain: float = 0.1  # draft only when the expected rate beats plain decoding by this fraction:
    # estimates are noisy, and a wrong guess must not cost more than it can win
    extra_token_cost: float = 0.08  # prior: one more verified token on every row costs this fraction of a plain pass
    model_reprobe_requests: int = 16  # from this many requests after a measured draft model last drafted (at
    # this temperature), a probe may pick it though it must read the prompt
    # first (else a drafter judged in one bad request would never be judged again)
    one_off_spread: int = 8  # a draft model that did not draft last round first pays a one-off (the prompt's
    # prefill, or catching up on the tokens it missed): a plan charges it spread
    # over this many rounds, since the model then drafts on while it pays


class BassLengthRule:
    """BASS's draft length: start at 7; +2 (to 32) when some row accepted all; else shrink, faster when repeated."""

    def __init__(self, settings: ControllerSettings):
        self.settings = settings
        self.length = settings.start_length
        self._shrinks_in_a_row = 0

    def observe(self, draft_length: int, n_accepted: list[int]) -> None:
        if draft_length == 0 or draft_length != self.length:
            return
        if any(n >= draft_length for n in n_accepted):
            self.length = min(self.length + self.settings.grow_step, self.settings.max_length)
            self._shrinks_in_a_row = 0
        else:
            self._shrinks_in_a_row += 1
            shrink = math.ceil(self.length / 10) + (1 if self._shrinks_in_a_row > 1 else 0)
            self.length = max(1, self.length - shrink)


class CostModel:
    """Running seconds per forward pass by (model, rows, token rows in the call), with a linear fit in token rows.

    A call's token rows are what its linear layers compute: rows for a one-token pass, rows plus every row's draft
    tokens for a verify pass (the engine packs a ragged batch, so a row that drafted nothing adds one token row,
    not the longest draft's; generate.forward_ragged; a model it cannot pack records its padded call's rows, and
    plans are still priced as packed there)."""

    def __init__(self, settings: ControllerSettings, smoothing: float = 0.3):
        self.settings, self.smoothing = settings, smoothing
        self._seconds: dict[tuple[str, int, int], float] = {}

    def record(self, kind: str, rows: int, tokens: int, seconds: float) -> None:
        key = (kind, rows, tokens)
        old = self._seconds.get(key)
        self._seconds[key] = seconds if old is None else old + self.smoothing * (seconds - old)

    def measured(self, kind: str, rows: int, tokens: int) -> bool:
        return (kind, rows, tokens) in self._seconds

    def estimate(self, kind: str, rows: int, tokens: int) -> float | None:
        if (kind, rows, tokens) in self._seconds:
            return self._seconds[(kind, rows, tokens)]
        seen = self._seen(kind, rows)
        if not seen:
            nearest = sorted((abs(r - rows), r) for (k, r, _q) in self._seconds if k == kind)
            if not nearest:
                return None
            other = nearest[0][1]  # the same extra token rows at the nearest batch size measured
            return self.estimate(kind, other, max(tokens - rows + other, 1))
        if len(seen) >= 2:
            intercept, slope = _line(seen)
            return max(intercept + slope * tokens, min(seen.values()) * 0.5)
        q0, t0 = next(iter(seen.items()))
        return max(t0 + self._slope(kind, rows, t0) * (tokens - q0), t0 * 0.5)

    def _seen(self, kind: str, rows: int) -> dict[int, float]:
        return {q: s for (k, r, q), s in self._seconds.items() if k == kind and r == rows}

    def _slope(self, kind: str, rows: int, seconds: float) -> float:
        """Seconds per extra token row at a batch size with one measured call (of `seconds`): fitted at the nearest
        batch size with two token counts, else the prior, extra_token_cost of the call for one token more on every
        row."""
        fitted = sorted((abs(r - rows), r) for (k, r, _q) in self._seconds if k == kind and len(self._seen(k, r)) >= 2)
        if not fitted:
            return self.settings.extra_token_cost * seconds / rows
        return _line(self._seen(kind, fitted[0][1]))[1]


def _one_off(model: str) -> str:
    """The cost model's name for a draft model's one-offs (prompt prefill, catching up)."""
    return f"{model} one-off"


def _line(points: dict[int, float]) -> tuple[float, float]:
    """Least-squares (intercept, slope >= 0) of seconds against token rows."""
    qs, ts = list(points), list(points.values())
    q_mean, t_mean = sum(qs) / len(qs), sum(ts) / len(ts)
    var = sum((q - q_mean) ** 2 for q in qs)
    slope = max(sum((q - q_mean) * (t - t_mean) for q, t in zip(qs, ts)) / var, 0.0)
    return t_mean - slope * q_mean, slope


class AcceptanceEstimate:
    """Per-token acceptance probability of one drafter (geometric model), decayed running counts."""

    def __init__(self, settings: ControllerSettings):
        self.settings = settings
        self.accepted = settings.prior_acceptance * settings.prior_weight
        self.rejected = (1 - settings.prior_acceptance) * settings.prior_weight
        self.idle_requests = 0  # requests begun since the drafter was last observed

    @property
    def rate(self) -> float:
        return self.accepted / (self.accepted + self.rejected)

    def observe(self, lengths: list[int], n_accepted: list[int]) -> None:
        decay = self.settings.decay
        for length, n in zip(lengths, n_accepted):
            if length == 0:
                continue
            self.idle_requests = 0
            self.accepted = self.accepted * decay + n
            self.rejected = self.rejected * decay + (1 if n < length else 0)

    def expected_tokens(self, length: int) -> float:
        """Expected committed tokens per row for a draft of this length (accepted + the resampled/bonus one)."""
        a = min(self.rate, 0.999)
        return (1 - a ** (length + 1)) / (1 - a)


@dataclass
class ProbeSchedule:
    """When the next probe is due: plain steps since anything drafted, and the wait before a probe (doubled by
    each probe that was needed, up to 16x probe_every; back to probe_every once drafting pays)."""

    interval: int
    steps_since_draft: int = 0


class ControllerMemory:
    """What outlives one request: forward costs (a property of the hardware and models), acceptance per
    drafter and temperature, and the probe schedule, so a new request starts from measurements
    instead of priors (and a machine where drafting does not pay is not probed afresh by every request). Requests
    with other drafters (k=1 has prompt lookup, k>1 sibling lookup) keep their own schedules."""

    def __init__(self, settings: ControllerSettings):
        self.settings = settings
        self.costs = CostModel(settings)
        self._acceptance: dict[tuple[str, float], AcceptanceEstimate] = {}
        self._probes: dict[tuple[float, tuple[str, ...]], ProbeSchedule] = {}

    def acceptance_of(self, drafter: str, temperature: float) -> AcceptanceEstimate:
        key = (drafter, round(temperature, 3))
        if key not in self._acceptance:
            self._acceptance[key] = AcceptanceEstimate(self.settings)
        return self._acceptance[key]

    def probes_of(self, temperature: float, drafters: list[str]) -> ProbeSchedule:
        key = (round(temperature, 3), tuple(sorted(drafters)))
        return self._probes.setdefault(key, ProbeSchedule(self.settings.probe_every))


@dataclass
class StepPlan:
    """What the next step does."""

    drafter: str | None  # drafter name, None for plain decoding
    length: int  # draft tokens per row (0: plain decoding)
    expected_rate: float  # expected committed tokens per second per row, by the cost model (0 if unknown)
    fallback: str | None = None  # a model drafter for the rows the (lookup) drafter found nothing for

    @property
    def label(self) -> str:
        return "+".join(n for n in (self.drafter, self.fallback) if n) or "none"

    def row_drafters(self, lookup_lengths: list[int] | None, rows: int) -> list[str | None]:
        """Which drafter serves each row: the lookup where it found something, else the fallback."""
        if self.drafter is None or self.length == 0:
            return [None] * rows
        if lookup_lengths is None:
            return [self.drafter] * rows
        return [self.drafter if n > 0 else self.fallback for n in lookup_lengths]


@dataclass
class StepRecord:
    """What one draft/verify round did: the engine fills it as the round goes, the controller learns from it."""

    plan: StepPlan
    rows: int  # batch size of the round
    row_drafters: list[str | None]  # which drafter served each row (None: it got no speculative tokens)
    draft_s: float = 0.0  # seconds of the draft model's passes (lookups are free)
    draft_passes: int = 0  # draft-model forward passes
    setup_s: float = 0.0  # seconds of a draft model's one-offs: prompt prefill, catching up
    verify_s: float = 0.0  # seconds of the rest: lookups, plan, verify forward, accept, commit
    proposed: list[int] = field(default_factory=list)  # speculative tokens proposed per row
    accepted: list[int] = field(default_factory=list)  # of those, accepted per row
    token_rows: int | None = None  # token rows the verify call computed (None: rows + proposed, as packed)


class DraftController:
    """Per step, picks the drafter(s) and length that maximise expected committed tokens per second."""

    def __init__(
        self,
        settings: ControllerSettings,
        drafter_names: list[str],
        model_drafters: set[str],
        memory: ControllerMemory | None = None,
        temperature: float = 0.0,
    ):
        self.settings = settings
        memory = memory or ControllerMemory(settings)
        self.costs = memory.costs
        self.acceptance = {name: memory.acceptance_of(name, temperature) for name in drafter_names}
        self.bass = {name: BassLengthRule(settings) for name in drafter_names}
        self.model_drafters = model_drafters
        self.probes = memory.probes_of(temperature, drafter_names)
        self.planned = False  # a request that never plans (cancelled, or done at its prefill) does not count
        self.primed: set[str] = set()  # model drafters that have read this request's prompt (prefill paid)
        self.fresh: set[str] = set()  # model drafters that drafted last round (nothing to catch up on)
        self.choices: dict[str, int] = defaultdict(int)

    def rate(
        self,
        drafter: str | None,
        rows: int,
        length: int,
        row_lengths: list[int] | None = None,
        fallback: str | None = None,
    ) -> float:
        """Expected committed tokens per second per row; 0 when a cost is still unknown."""
        if drafter is None or length == 0:
            plain = self.costs.estimate("target", rows, rows)
            return 0.0 if plain is None else 1.0 / plain
        plan = StepPlan(drafter, length, 0.0, fallback)
        served = plan.row_drafters(row_lengths, rows)
        found = row_lengths if row_lengths is not None else [length] * rows
        drafted = [
            0 if name is None else min(n, length) if name == drafter else length for name, n in zip(served, found)
        ]  # draft tokens each row would verify
        seconds = self.costs.estimate("target", rows, rows + sum(drafted))
        if seconds is None:
            return 0.0
        model = next((d for d in (drafter, fallback) if d in self.model_drafters), None)
        if model is not None and model in served:
            draft_pass = self.costs.estimate(model, rows, rows)
            seconds += length * (draft_pass if draft_pass is not None else 0.4 * seconds)
            if model not in self.fresh:
                seconds += (self.costs.estimate(_one_off(model), rows, rows) or 0.0) / self.settings.one_off_spread
        tokens = sum(
            1.0 if name is None else self.acceptance[name].expected_tokens(n) for name, n in zip(served, drafted)
        )
        return tokens / max(len(served), 1) / seconds

    def plan(self, rows: int, lookup_lengths: dict[str, list[int]]) -> StepPlan:
        """lookup_lengths: for each model-free drafter, the proposal length of every row (already computed, free)."""
        if not self.planned:
            self.planned = True
            for estimate in self.acceptance.values():
                estimate.idle_requests += 1
        options = [StepPlan(None, 0, self.rate(None, rows, 0))]
        models = [n for n in self.acceptance if n in self.model_drafters]
        for name in models:
            for length in range(1, self.bass[name].length + 1):
                options.append(StepPlan(name, length, self.rate(name, rows, length)))
        for name, found in lookup_lengths.items():
            if name not in self.acceptance or max(found, default=0) == 0:
                continue
            for length in range(1, max(found) + 1):
                options.append(StepPlan(name, length, self.rate(name, rows, length, found)))
            for model in models:  # rows may use different drafters in one step
                for length in range(1, self.bass[model].length + 1):
                    options.append(StepPlan(name, length, self.rate(name, rows, length, found, model), model))
        best = max(options, key=lambda o: o.expected_rate)
        if self.settings.cost_aware and not self.costs.measured("target", rows, rows):
            best = options[0]  # plain decoding is the yardstick: measure it at this batch size before comparing
        elif not self.settings.cost_aware or best.expected_rate == 0.0:
            best = self._without_costs(options)
        elif best.drafter is None or best.expected_rate < options[0].expected_rate * (1 + self.settings.min_gain):
            best = self._probe(options) if self.probes.steps_since_draft >= self.probes.interval else options[0]
        else:
            self.probes.interval = self.settings.probe_every  # drafting pays again: probe at the base rate later
        self.probes.steps_since_draft = 0 if best.drafter else self.probes.steps_since_draft + 1
        self.choices[best.label] += 1
        return best

    def _without_costs(self, options: list[StepPlan]) -> StepPlan:
        """Before costs are known (or when cost-awareness is off): the longest single-drafter draft of the
        first drafter, lookups first (they are free)."""
        drafted = sorted(
            (o for o in options if o.drafter and o.fallback is None), key=lambda o: o.drafter in self.model_drafters
        )
        if not drafted:
            return options[0]
        first = drafted[0].drafter
        return max((o for o in drafted if o.drafter == first), key=lambda o: o.length)

    def _probe(self, options: list[StepPlan]) -> StepPlan:
        """A short draft with the best-looking drafter, to refresh its acceptance estimate; each probe that is
        needed doubles the wait for the next (up to 16x, across requests), since on hardware where drafting does
        not pay every probe is a loss (docs/ENGINE.md)."""
        drafted = [
            o
            for o in options
            if o.drafter
            and o.length <= 3
            and not self._probe_needs_prefill(o)
            and (o.length >= 2 or not self._unmeasured_model(o))
        ]
        self.probes.interval = min(2 * self.probes.interval, 16 * self.settings.probe_every)
        return max(drafted, key=lambda o: o.expected_rate) if drafted else options[0]

    def _unmeasured_model(self, plan: StepPlan) -> bool:
        """Whether the plan uses a draft model whose pass cost is unmeasured: its probe drafts 2+ tokens, since
        the first pass reads the prompt or catches up (a one-off) and only the passes after it measure the cost."""
        return any(
            name in self.model_drafters and self.costs.estimate(name, 1, 1) is None
            for name in (plan.drafter, plan.fallback)
        )

    def _probe_needs_prefill(self, plan: StepPlan) -> bool:
        """Whether the plan would make a model drafter read the prompt first, for a drafter whose pass cost is measured
        already: its prefill (a few plain steps' time: docs/ENGINE.md) is more than a short probe of a drafter the costs
        call a loss can win back. An unmeasured drafter is probed (that is how its costs become known), and so is any
        from the model_reprobe_requests-th request after it last drafted; otherwise a measured one is judged again
        whenever the plan picks it on its estimates, or once a request made it read the prompt."""
        return not self._unmeasured_model(plan) and any(
            name in self.model_drafters
            and name not in self.primed
            and self.acceptance[name].idle_requests < self.settings.model_reprobe_requests
            for name in (plan.drafter, plan.fallback)
        )

    def observe(self, step: StepRecord) -> None:
        """Learn from one round: the verify cost, the draft-pass cost, each drafter's acceptance on its rows."""
        width = max(step.proposed, default=0)
        token_rows = step.token_rows if step.token_rows is not None else step.rows + sum(step.proposed)
        self.costs.record("target", step.rows, token_rows, step.verify_s)
        ran = (
            {n for n in (step.plan.drafter, step.plan.fallback) if n in self.model_drafters}
            if step.draft_passes or step.setup_s
            else set()
        )
        self.primed |= ran
        self.fresh = ran
        for name in ran if step.setup_s else ():
            self.costs.record(_one_off(name), step.rows, step.rows, step.setup_s)
        if step.plan.drafter is None or width == 0:
            return
        for name in {n for n in step.row_drafters if n is not None}:
            mine = [i for i, n in enumerate(step.row_drafters) if n == name]
            if name in self.model_drafters and step.draft_passes:
                self.costs.record(name, step.rows, step.rows, step.draft_s / step.draft_passes)
            self.acceptance[name].observe([step.proposed[i] for i in mine], [step.accepted[i] for i in mine])
            self.bass[name].observe(step.plan.length, [step.accepted[i] for i in mine])
