"""The draft-length controller: BASS's length rule, the cost model, and the choice of drafter and length."""

import math

import pytest

from engine.speculation.controller import BassLengthRule, ControllerSettings, CostModel, DraftController


# --- BASS's rule -------------------------------------------------------------------------------------------
def test_bass_starts_at_7_and_grows_by_2_up_to_32_on_a_full_accept():
    rule = BassLengthRule(ControllerSettings())
    lengths = [rule.length]
    for _ in range(15):
        rule.observe(rule.length, [0, rule.length, 1])  # one row accepted the whole draft
        lengths.append(rule.length)
    assert lengths == [7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31, 32, 32, 32]


def test_bass_shrinks_by_a_tenth_plus_one_more_after_consecutive_shrinks_never_below_1():
    rule = BassLengthRule(ControllerSettings(start_length=32))
    lengths = [rule.length]
    for _ in range(14):
        rule.observe(rule.length, [0, rule.length - 1])  # nobody accepted everything
        lengths.append(rule.length)
    expected = [32]
    for shrink_index in range(14):
        current = expected[-1]
        step = math.ceil(current / 10) + (1 if shrink_index > 0 else 0)
        expected.append(max(1, current - step))
    assert lengths == expected
    assert lengths[:5] == [32, 28, 24, 20, 17]  # 32 - 4; then ceil(28/10) + 1 = 4; 24 - 4; 20 - 3
    assert lengths[-1] == 1


def test_bass_growth_resets_the_consecutive_shrink_penalty():
    rule = BassLengthRule(ControllerSettings(start_length=20))
    rule.observe(20, [0])  # 20 - 2 = 18
    rule.observe(18, [0])  # 18 - (2 + 1) = 15
    rule.observe(15, [15])  # grow: 17, penalty reset
    rule.observe(17, [3])  # first shrink again: 17 - 2 = 15
    assert rule.length == 15


def test_bass_ignores_steps_that_used_another_length():
    rule = BassLengthRule(ControllerSettings())
    rule.observe(0, [0, 0])  # plain decoding
    rule.observe(3, [3])  # a shorter draft chosen by the cost model
    assert rule.length == 7


# --- the cost model ----------------------------------------------------------------------------------------
def test_cost_model_fits_a_line_in_token_rows_and_falls_back_to_the_nearest_batch():
    costs = CostModel(ControllerSettings(), smoothing=1.0)
    assert costs.estimate("target", 8, 8) is None
    costs.record("target", 8, 8, 0.10)  # a plain pass of 8 rows
    costs.record("target", 8, 40, 0.14)  # every row verified 4 draft tokens
    assert costs.estimate("target", 8, 8) == pytest.approx(0.10)
    assert costs.estimate("target", 8, 72) == pytest.approx(0.18)  # 0.10 + 0.00125 per token row
    assert costs.estimate("target", 8, 12) == pytest.approx(0.105)  # one row's 4 draft tokens, packed
    assert costs.estimate("target", 6, 70) == pytest.approx(0.18)  # no data at 6 rows: the same extra
    assert costs.estimate("draft", 8, 8) is None  # token rows at the nearest, 8


# --- the controller's choice -------------------------------------------------------------------------------
def controller_with(
    target_seconds_per_token: float, draft_seconds: float, accepted_fraction: float, **settings
) -> DraftController:
    """A controller that has measured a 0.1 s target pass at 8 rows (+target_seconds_per_token per extra token), a
    draft pass of draft_seconds, and ten steps of 8-token drafts with about accepted_fraction accepted."""
    controller = DraftController(ControllerSettings(**settings), ["model"], {"model"})
    for tokens in (1, 9):
        controller.costs.record("target", 8, 8 * tokens, 0.1 + target_seconds_per_token * (tokens - 1))
    controller.costs.record("model", 8, 8, draft_seconds)
    accepted = round(8 * accepted_fraction)
    for _ in range(10):
        controller.acceptance["model"].observe([8] * 8, [accepted] * 8)
    controller.primed.add("model")  # it has read the prompt: probing it costs no prefill
    return controller


def test_expensive_draft_with_low_acceptance_chooses_plain_decoding():
    controller = controller_with(0.005, draft_seconds=0.08, accepted_fraction=0.0)
    plan = controller.plan(8, {})
    assert (plan.drafter, plan.length) == (None, 0)


def test_cheap_draft_with_high_acceptance_chooses_a_long_draft():
    controller = controller_with(0.002, draft_seconds=0.001, accepted_fraction=1.0)
    plan = controller.plan(8, {})
    assert plan.drafter == "model"
    assert plan.length == controller.bass["model"].length == 7  # the longest BASS allows
    assert plan.expected_rate > controller.rate(None, 8, 0)


def test_free_lookups_with_high_acceptance_are_used_at_their_proposed_length():
    controller = DraftController(ControllerSettings(), ["sibling"], set())
    controller.costs.record("target", 4, 4, 0.1)
    controller.costs.record("target", 4, 24, 0.11)
    controller.acceptance["sibling"].observe([5] * 40, [5] * 40)
    plan = controller.plan(4, {"sibling": [5, 5, 2, 0]})
    assert (plan.drafter, plan.length) == ("sibling", 5)


def test_after_many_plain_steps_a_short_probe_refreshes_the_estimate():
    controller = controller_with(0.005, draft_seconds=0.05, accepted_fraction=0.1, probe_every=3)
    plans = [controller.plan(8, {}) for _ in range(4)]
    assert [p.drafter for p in plans[:3]] == [None, None, None]
    assert plans[3].drafter == "model" and 1 <= plans[3].length <= 3


def test_without_cost_awareness_the_longest_draft_of_the_first_drafter_is_used():
    controller = controller_with(0.005, draft_seconds=0.05, accepted_fraction=0.1, cost_aware=False)
    plan = controller.plan(8, {})
    assert (plan.drafter, plan.length) == ("model", 7)


def test_plain_decoding_is_measured_first_then_drafting_is_probed():
    controller = DraftController(ControllerSettings(probe_every=3), ["model"], {"model"})
    first = controller.plan(8, {})
    assert (first.drafter, first.length) == (None, 0)  # the yardstick: a plain step at this batch size
    controller.costs.record("target", 8, 8, 0.1)
    plans = [controller.plan(8, {}) for _ in range(4)]
    probes = [p for p in plans if p.drafter == "model"]
    assert probes and all(p.length >= 2 for p in probes)  # its first pass is a one-off: a second one measures it
    assert controller.plan(5, {}).drafter is None  # a new batch size (rows finished): measured anew


def test_a_probe_does_not_pay_a_measured_draft_models_prefill_but_probes_it_once_it_has_read_the_prompt():
    """A draft model measured in earlier requests (ControllerMemory) whose costs call it a loss is not probed in a
    new request until something else made it read the prompt: a probe is a few tokens, the prefill a whole prompt;
    the free lookups are probed meanwhile."""
    controller = DraftController(ControllerSettings(probe_every=3), ["model", "sibling"], {"model"})
    for tokens in (1, 9):
        controller.costs.record("target", 8, 8 * tokens, 0.1 + 0.005 * (tokens - 1))
    controller.costs.record("model", 8, 8, 0.05)  # measured: a loss at this acceptance
    for _ in range(10):
        controller.acceptance["model"].observe([8] * 8, [1] * 8)
    controller.acceptance["sibling"].observe([2] * 40, [0] * 40)  # and its lookups are never accepted here
    plans = [controller.plan(8, {"sibling": [2] + [0] * 7}) for _ in range(150)]  # the back-off reaches its cap
    assert {p.drafter for p in plans} == {None, "sibling"}  # probes of the lookup only, never the model
    assert all(p.fallback is None for p in plans)
    controller.primed.add("model")  # it drafted for some row: the prompt is read
    controller.probes.interval, controller.probes.steps_since_draft = 3, 0
    assert any(controller.plan(8, {}).drafter == "model" for _ in range(4))


def test_the_probes_back_off_outlives_a_request():
    """A machine where drafting does not pay is not probed afresh by every request: the next request of the same
    temperature and drafters waits as long as the last one had come to wait; another temperature, or another set
    of drafters, has its own schedule."""
    from engine.speculation.controller import ControllerMemory

    settings = ControllerSettings(probe_every=3)
    memory = ControllerMemory(settings)
    first = DraftController(settings, ["sibling"], set(), memory, temperature=0.8)
    first.costs.record("target", 8, 8, 0.1)
    first.costs.record("target", 8, 16, 0.17)  # a 2-token verify of every row: 1.7x plain
    first.acceptance["sibling"].observe([1] * 40, [0] * 40)  # sibling drafts are never accepted here
    probes = [i for i in range(30) if first.plan(8, {"sibling": [1] * 8}).drafter]
    assert probes == [3, 10, 23]  # waits of 3, 6 and 12 plain steps
    second = DraftController(settings, ["sibling"], set(), memory, temperature=0.8)
    probes = [i for i in range(30) if second.plan(8, {"sibling": [1] * 8}).drafter]
    assert probes == [18]  # 6 of the 24 plain steps it waits were spent
    for other in (
        DraftController(settings, ["sibling"], set(), memory, temperature=0.0),
        DraftController(settings, ["prompt"], set(), memory, temperature=0.8),
    ):
        other.acceptance[next(iter(other.acceptance))].observe([1] * 40, [0] * 40)
        lookups = {name: [1] * 8 for name in other.acceptance}
        assert [i for i in range(5) if other.plan(8, lookups).drafter] == [3]  # a schedule of its own


def test_a_draft_model_that_drafted_has_read_the_prompt():
    from engine.speculation.controller import StepPlan, StepRecord

    controller = DraftController(ControllerSettings(), ["model", "sibling"], {"model"})
    controller.observe(StepRecord(StepPlan("sibling", 2, 1.0), 2, ["sibling", None], proposed=[2, 0], accepted=[1, 0]))
    assert controller.primed == set()
    controller.observe(
        StepRecord(
            StepPlan("sibling", 2, 1.0, fallback="model"),
            2,
            ["sibling", "model"],
            draft_s=0.01,
            draft_passes=2,
            setup_s=0.3,
            proposed=[2, 2],
            accepted=[1, 0],
        )
    )
    assert controller.primed == {"model"}


def test_a_draft_model_that_sat_out_is_charged_its_one_off_spread_over_the_rounds_it_will_draft():
    """A draft model that did not draft last round must first read the prompt or catch up (a one-off, measured as
    a round's setup seconds); a plan charges it 1/one_off_spread per round, and nothing once the model drafts."""
    from engine.speculation.controller import StepPlan, StepRecord

    def sat_out_after_a_one_off(spread: int) -> DraftController:
        controller = controller_with(0.001, draft_seconds=0.01, accepted_fraction=1.0, one_off_spread=spread)
        controller.observe(
            StepRecord(
                StepPlan("model", 2, 1.0),
                8,
                ["model"] * 8,
                draft_s=0.01,
                draft_passes=1,
                setup_s=1.0,
                verify_s=0.1,
                proposed=[2] * 8,
                accepted=[2] * 8,
            )
        )
        controller.observe(
            StepRecord(StepPlan(None, 0, 1.0), 8, [None] * 8, verify_s=0.1, proposed=[0] * 8, accepted=[0] * 8)
        )  # a plain round: the model sat out
        return controller

    controller = sat_out_after_a_one_off(spread=4)
    assert controller.costs.estimate("model one-off", 8, 8) == pytest.approx(1.0)
    assert controller.plan(8, {}).drafter == "model"  # 0.25 s a round for 4 rounds: still a win
    assert sat_out_after_a_one_off(spread=1).plan(8, {}).drafter is None  # 1 s for one round: a loss
    controller.costs.record("model one-off", 8, 8, 40.0)  # a long catch-up
    assert controller.plan(8, {}).drafter is None
    controller.observe(
        StepRecord(
            StepPlan("model", 2, 1.0),
            8,
            ["model"] * 8,
            draft_s=0.01,
            draft_passes=1,
            verify_s=0.1,
            proposed=[2] * 8,
            accepted=[2] * 8,
        )
    )  # it drafted after all
    assert controller.plan(8, {}).drafter == "model"  # nothing left to catch up on


def test_a_measured_draft_model_is_probed_prefill_and_all_after_requests_without_it():
    """Else a draft model judged a loss in one bad request would never be judged again; once it has drafted, the
    count starts over."""
    from engine.speculation.controller import ControllerMemory, StepPlan, StepRecord

    settings = ControllerSettings(probe_every=3, model_reprobe_requests=4)
    memory = ControllerMemory(settings)
    drafted = []
    for request in range(6):
        controller = DraftController(settings, ["model"], {"model"}, memory)
        if request == 0:
            for tokens in (1, 9):
                controller.costs.record("target", 8, 8 * tokens, 0.1 + 0.005 * (tokens - 1))
            controller.costs.record("model", 8, 8, 0.05)
            controller.acceptance["model"].observe([8] * 8, [0] * 8)  # measured: a loss
        drafted.append(sum(controller.plan(8, {}).drafter == "model" for _ in range(40)))
        if drafted[-1]:
            controller.observe(
                StepRecord(
                    StepPlan("model", 2, 1.0),
                    8,
                    ["model"] * 8,
                    draft_s=0.1,
                    draft_passes=1,
                    verify_s=0.1,
                    proposed=[2] * 8,
                    accepted=[0] * 8,
                )
            )
    assert drafted == [0, 0, 0, 1, 0, 0]  # the 4th request after it drafted probes it; then the count restarts


def test_each_needed_probe_doubles_the_wait_for_the_next():
    controller = controller_with(0.005, draft_seconds=0.05, accepted_fraction=0.1, probe_every=3)
    drafted_at = [i for i in range(30) if controller.plan(8, {}).drafter is not None]
    assert drafted_at[:3] == [3, 10, 23]  # waits of 3, 6 and 12 plain steps


def test_a_new_batch_size_borrows_the_measured_slope_not_the_prior():
    costs = CostModel(ControllerSettings(extra_token_cost=0.08))
    costs.record("target", 8, 8, 0.10)
    costs.record("target", 8, 24, 0.16)  # 3.75 ms per extra token row at 8 rows
    costs.record("target", 5, 5, 0.08)  # rows finished: only a plain pass measured at 5 rows
    assert costs.estimate("target", 5, 15) == pytest.approx(0.08 + 0.00375 * 10)
    prior = CostModel(ControllerSettings(extra_token_cost=0.08))
    prior.record("target", 5, 5, 0.08)  # nothing fitted anywhere: a token more on every row is +8%
    assert prior.estimate("target", 5, 10) == pytest.approx(0.08 * 1.08)


def test_the_draft_models_prefill_is_charged_to_neither_the_target_nor_the_draft_pass(target, tokenizer, other_draft):
    """The round on which the draft model first drafts also runs its prompt prefill (slowed to 1 s here): the
    controller's per-pass costs must not take that once-per-request second for a step cost."""
    import time

    from engine import Engine, EngineSettings, GenerationRequest

    prompt = "def add(a, b):\n    return a + b\n\ndef sub(a, b):\n"
    prompt_len = len(tokenizer(prompt, add_special_tokens=False)["input_ids"])

    def slow_prefill(module, args, kwargs):
        if kwargs["input_ids"].shape[1] >= prompt_len:
            time.sleep(1.0)

    handle = other_draft.register_forward_pre_hook(slow_prefill, with_kwargs=True)
    try:
        engine = Engine(
            target,
            tokenizer,
            other_draft,
            EngineSettings(drafter="model", controller=ControllerSettings(cost_aware=False)),
        )
        result = engine.generate(
            GenerationRequest(prompt, k=2, max_new_tokens=3, budget_s=60, temperature=0.0, stop_at_body_end=False)
        )
    finally:
        handle.remove()
    assert result.stats.draft_passes >= 1 and result.stats.wall_s > 1.0  # it drafted, and paid the prefill once
    costs = engine.memory.costs
    for kind in ("target", "model"):
        for tokens in range(2, 20):  # token rows of 2 rows, up to 9 each
            estimate = costs.estimate(kind, 2, tokens)
            assert estimate is None or estimate < 0.5, (kind, tokens, estimate)
