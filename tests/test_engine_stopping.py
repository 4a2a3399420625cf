"""Stopping: stop strings, max_new_tokens, EOS, rows ending at different steps, the deadline, seeds, streaming."""

import dataclasses
import time

import pytest
import torch

from engine import GenerationRequest
from engine.generate import forward
from engine.kv_cache import RaggedKVCache
from engine.models.tiny import tiny_model
from engine.types import FINISH_BUDGET, FINISH_LENGTH, FINISH_STOP

PROMPT = "for i in range(10):\n    total = total + i\n    count = count + 1\nfor j in range(10):\n"
SLACK_S = 0.25  # scheduling noise on a shared 2-core machine, on top of the one forward pass the deadline allows

# (name, drafter, draft fixture): plain decoding, multi-token commits from a draft model, point-mass lookups
DRAFTERS = [("none", "none", None), ("model", "model", "same_draft"), ("sibling", "sibling", None)]
DRAFTER_IDS = [d[0] for d in DRAFTERS]


def engine_for(request, make_engine, drafter, draft, **controller):
    return make_engine(drafter, request.getfixturevalue(draft) if draft else None, cost_aware=False, **controller)


def greedy(engine, k=2, max_new_tokens=40, stop=(), **fields):
    return engine.generate(
        GenerationRequest(
            PROMPT,
            k=k,
            max_new_tokens=max_new_tokens,
            temperature=0,
            stop=stop,
            budget_s=fields.pop("budget_s", 60),
            **fields,
        )
    )


@pytest.fixture(scope="module")
def greedy_reference(make_engine):
    """The plain greedy continuation (tokens and text) of PROMPT, 40 tokens, no stop strings."""
    candidate = greedy(make_engine("none"), k=1).candidates[0]
    assert len(candidate.token_ids) == 40
    return candidate


def ascii_stop_in(text: str, start: int) -> str:
    """A 2-character ASCII stop string that first occurs at or after `start` of text."""
    for i in range(start, len(text) - 1):
        stop = text[i : i + 2]
        if stop.isascii() and text.find(stop) == i:
            return stop
    raise AssertionError(f"no usable stop string in {text!r}")


# --- stop strings ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(("name", "drafter", "draft"), DRAFTERS, ids=DRAFTER_IDS)
def test_stop_string_cuts_the_text_before_it(request, make_engine, tokenizer, greedy_reference, name, drafter, draft):
    stop = ascii_stop_in(greedy_reference.text, 8)
    cut = greedy_reference.text.find(stop)
    result = greedy(engine_for(request, make_engine, drafter, draft), stop=(stop,))
    for candidate in result.candidates:
        assert candidate.finish_reason == FINISH_STOP
        assert candidate.text == greedy_reference.text[:cut]
        assert stop not in candidate.text
        # the kept tokens are those whose text lies wholly before the stop, with one log-probability each
        assert tokenizer.decode(candidate.token_ids) == candidate.text
        assert candidate.token_ids == greedy_reference.token_ids[: len(candidate.token_ids)]
        assert len(candidate.logprobs) == len(candidate.token_ids)


def test_the_earliest_of_several_stop_strings_wins(make_engine, greedy_reference):
    late = ascii_stop_in(greedy_reference.text, 12)
    early = ascii_stop_in(greedy_reference.text, 6)
    assert greedy_reference.text.find(early) < greedy_reference.text.find(late)
    result = greedy(make_engine("none"), k=1, stop=(late, early))
    assert result.candidates[0].text == greedy_reference.text[: greedy_reference.text.find(early)]


def test_stop_string_at_the_very_start_gives_an_empty_candidate(make_engine, greedy_reference):
    first_char = greedy_reference.text[0]
    result = greedy(make_engine("none"), k=1, stop=(first_char,))
    candidate = result.candidates[0]
    assert (candidate.text, candidate.token_ids, candidate.finish_reason) == ("", [], FINISH_STOP)


# --- length and EOS --------------------------------------------------------------------------------------
@pytest.mark.parametrize("max_new_tokens", [1, 2, 13])
@pytest.mark.parametrize(("name", "drafter", "draft"), DRAFTERS, ids=DRAFTER_IDS)
def test_max_new_tokens_gives_length_with_exactly_that_many_tokens(
    request, make_engine, greedy_reference, name, drafter, draft, max_new_tokens
):
    """A draft longer than the room left (the model drafter proposes 7+) must not overshoot."""
    result = greedy(engine_for(request, make_engine, drafter, draft), k=3, max_new_tokens=max_new_tokens)
    for candidate in result.candidates:
        assert candidate.finish_reason == FINISH_LENGTH
        assert candidate.token_ids == greedy_reference.token_ids[:max_new_tokens]
        assert len(candidate.logprobs) == max_new_tokens
    assert result.stats.generated_tokens == 3 * max_new_tokens


@pytest.mark.parametrize(("name", "drafter", "draft"), DRAFTERS, ids=DRAFTER_IDS)
def test_eos_ends_a_row_and_is_not_part_of_it(request, make_engine, tokenizer, greedy_reference, name, drafter, draft):
    """A target whose EOS is a token its greedy output reaches: the row stops just before it."""
    tokens = greedy_reference.token_ids
    at = next(i for i in range(5, len(tokens)) if tokens[i] not in tokens[:i])
    eos_model = tiny_model(0, eos_token_id=tokens[at])  # same weights as the target, another EOS id
    draft_model = request.getfixturevalue(draft) if draft else None
    result = greedy(make_engine(drafter, draft_model, cost_aware=False, model=eos_model))
    for candidate in result.candidates:
        assert candidate.finish_reason == FINISH_STOP
        assert candidate.token_ids == tokens[:at]
        assert candidate.text == tokenizer.decode(tokens[:at])


# --- rows that end at different steps ----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "drafter", "draft"),
    DRAFTERS[:2] + [("model, different weights", "model", "other_draft")],
    ids=DRAFTER_IDS[:2] + ["model, different weights"],
)
def test_rows_end_at_different_steps_and_the_others_continue(
    request, make_engine, target, teacher_forced_logprobs, name, drafter, draft
):
    """Sampled rows meet common stop characters at different steps; the rows left keep decoding correctly:
    every kept token's log-probability equals the target's own (a plain forward on prompt + tokens), which
    fails if a dropped row shifts another row's cache."""
    engine = engine_for(request, make_engine, drafter, draft)
    result = engine.generate(
        GenerationRequest(
            PROMPT, k=8, max_new_tokens=16, temperature=1.0, seed=3, stop=("<", "_", "\x00", "d"), budget_s=60
        )
    )
    reasons = [c.finish_reason for c in result.candidates]
    stopped_lengths = {len(c.token_ids) for c in result.candidates if c.finish_reason == FINISH_STOP}
    assert FINISH_LENGTH in reasons and len(stopped_lengths) >= 2, (reasons, stopped_lengths)
    for candidate in result.candidates:
        assert all(s not in candidate.text for s in ("<", "_", "\x00", "d"))
        assert len(candidate.token_ids) == 16 if candidate.finish_reason == FINISH_LENGTH else True
        assert len(candidate.logprobs) == len(candidate.token_ids)
        assert all(lp <= 0 for lp in candidate.logprobs)
        if candidate.token_ids:
            expected = teacher_forced_logprobs(target, PROMPT, candidate.token_ids)
            assert candidate.logprobs == pytest.approx(expected, abs=1e-4)


# --- the deadline ----------------------------------------------------------------------------------------
def one_forward_seconds(model, rows: int, q_len: int) -> float:
    """Wall time of one (hooked) forward of `rows` x `q_len` new tokens after a 32-token prefix."""
    cache = RaggedKVCache(model.config.num_hidden_layers, rows, torch.device("cpu"))
    forward(model, cache, torch.zeros(rows, 32, dtype=torch.long))
    cache.commit(torch.full((rows,), 32))
    started = time.perf_counter()
    forward(model, cache, torch.zeros(rows, q_len, dtype=torch.long))
    return time.perf_counter() - started


@pytest.mark.parametrize(("name", "drafter", "draft"), DRAFTERS, ids=DRAFTER_IDS)
def test_small_budget_returns_by_the_deadline_with_unfinished_rows(
    request, make_engine, target, slow_down, name, drafter, draft
):
    slow_down(target, 0.03)  # a target forward now costs ~30 ms, like a real model
    engine = engine_for(request, make_engine, drafter, draft)
    budget = 0.4
    started = time.perf_counter()
    result = greedy(engine, k=4, max_new_tokens=2048, budget_s=budget)
    wall = time.perf_counter() - started
    forward_s = one_forward_seconds(target, 4, 33)  # the widest verify pass: pending + a 32-token draft
    assert wall <= budget + forward_s + SLACK_S, (wall, forward_s)
    assert result.stats.wall_s <= wall
    for candidate in result.candidates:
        assert candidate.finish_reason == FINISH_BUDGET
        assert 0 < len(candidate.token_ids) < 2048
        assert len(candidate.logprobs) == len(candidate.token_ids)


def test_deadline_mid_draft(make_engine, same_draft, target, slow_down):
    """A slow draft model proposing 32 tokens (~1 s a draft) and a 0.4 s budget: the deadline falls inside a draft,
    and the call still returns by the budget plus one forward."""
    slow_down(same_draft, 0.03)
    draft_forwards = []
    handle = same_draft.register_forward_hook(lambda module, args, output: draft_forwards.append(1))
    try:
        engine = make_engine("model", same_draft, cost_aware=False, start_length=32)
        budget = 0.4
        started = time.perf_counter()
        result = greedy(engine, k=4, max_new_tokens=2048, budget_s=budget)
        wall = time.perf_counter() - started
    finally:
        handle.remove()
    forward_s = max(one_forward_seconds(target, 4, 33), one_forward_seconds(same_draft, 4, 1))
    assert 32 * 0.03 > budget + forward_s + SLACK_S  # finishing the draft would break the bound below
    assert wall <= budget + forward_s + SLACK_S, (wall, forward_s)
    assert 1 < len(draft_forwards) < 1 + 32  # the prefill, then a draft cut short by the deadline
    assert all(c.finish_reason == FINISH_BUDGET for c in result.candidates)


def test_stats_count_the_draft_passes_of_a_draft_cut_by_the_deadline(make_engine, same_draft, slow_down):
    """Draft forwards spent before the deadline are work done: stats.draft_passes counts them (its prefill too)."""
    slow_down(same_draft, 0.03)
    draft_forwards = []
    handle = same_draft.register_forward_hook(lambda module, args, output: draft_forwards.append(1))
    try:
        result = greedy(
            make_engine("model", same_draft, cost_aware=False, start_length=32), k=2, max_new_tokens=2048, budget_s=0.3
        )
    finally:
        handle.remove()
    assert len(draft_forwards) > 2
    assert result.stats.draft_passes == len(draft_forwards)


# --- seeds, streaming, cancel ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "drafter", "draft"),
    DRAFTERS[:2] + [("model, different weights", "model", "other_draft")],
    ids=DRAFTER_IDS[:2] + ["model, different weights"],
)
def test_a_fixed_seed_reproduces_the_samples(request, make_engine, name, drafter, draft):
    engine = engine_for(request, make_engine, drafter, draft)

    def sample(seed):
        result = engine.generate(
            GenerationRequest(
                PROMPT, k=4, max_new_tokens=12, temperature=0.8, top_p=0.95, seed=seed, stop=(), budget_s=60
            )
        )
        return [c.token_ids for c in result.candidates], [c.logprobs for c in result.candidates]

    first, again, other = sample(11), sample(11), sample(12)
    assert first[0] == again[0]  # the same tokens; the second read its prompt from the prefix cache, so the last
    for row, row_again in zip(first[1], again[1]):  # prompt token's logits came from another shape of call
        assert row == pytest.approx(row_again, abs=1e-4)
    assert first[0] != other[0]
    assert len({tuple(row) for row in first[0]}) > 1  # rows are different samples, not copies


SEEDED = GenerationRequest(PROMPT, k=4, max_new_tokens=16, temperature=0.8, top_p=0.95, seed=5, stop=(), budget_s=60)


@pytest.mark.parametrize(
    ("drafter", "draft"),
    [("model", "same_draft"), ("model", "other_draft"), ("sibling", None), ("prompt", None), ("auto", "other_draft")],
)
def test_a_seed_gives_regular_decodings_tokens_whatever_the_drafter(request, make_engine, drafter, draft):
    """Every (row, position) has its own uniform number, and drafts are kept only while they equal the target's
    draw with it: speculation changes how many forwards it takes, never which tokens a seed gives."""
    regular = [c.token_ids for c in make_engine("none").generate(SEEDED).candidates]
    speculative = make_engine(drafter, request.getfixturevalue(draft) if draft else None)
    first = speculative.generate(SEEDED)
    again = speculative.generate(SEEDED)  # the cost model has learned from the first call: another plan
    assert first.stats.proposed_tokens > 0
    assert [c.token_ids for c in first.candidates] == regular
    assert [c.token_ids for c in again.candidates] == regular


def test_a_rows_samples_do_not_depend_on_k(make_engine):
    engine = make_engine("sibling")
    rows = engine.generate(SEEDED).candidates
    alone = engine.generate(dataclasses.replace(SEEDED, k=1)).candidates
    assert alone[0].token_ids == rows[0].token_ids


def test_streaming_calls_back_with_growing_candidates(make_engine):
    updates = []
    result = make_engine("sibling", cost_aware=False).generate(
        GenerationRequest(PROMPT, k=3, max_new_tokens=10, temperature=0.8, seed=1, stop=()),
        on_update=lambda partial: updates.append([list(c.token_ids) for c in partial.candidates]),
    )
    assert len(updates) >= 3
    assert all(row == [] for row in updates[0])  # the first says how far the prompt's reading got
    assert all(len(row) >= 1 for row in updates[1])  # the next follows the prefill's token
    for before, after in zip(updates, updates[1:]):
        for row_before, row_after in zip(before, after):
            assert row_after[: len(row_before)] == row_before  # rows only grow
    assert sum(map(len, updates[-1])) > sum(map(len, updates[0]))
    assert updates[-1] == [c.token_ids for c in result.candidates]


def test_streaming_candidates_say_they_are_unfinished(make_engine):
    reasons = []
    make_engine("none").generate(
        GenerationRequest(PROMPT, k=2, max_new_tokens=5, temperature=0, stop=()),
        on_update=lambda partial: reasons.append([c.finish_reason for c in partial.candidates]),
    )
    assert reasons[0] == [None, None]
    assert reasons[-1] == [FINISH_LENGTH, FINISH_LENGTH]


def test_should_stop_ends_the_call_early(make_engine):
    calls = []

    def should_stop():
        calls.append(1)
        return len(calls) > 4  # asked once before the prompt is read, then before each step

    result = make_engine("none").generate(
        GenerationRequest(PROMPT, k=2, max_new_tokens=500, temperature=0, stop=()), should_stop=should_stop
    )
    assert result.stats.forward_passes == 4  # the prefill and 3 steps
    assert all(c.finish_reason == FINISH_BUDGET and len(c.token_ids) == 4 for c in result.candidates)
