"""Request validation: every bad value raises ValueError naming the value (and its field); edge values pass."""

import math
from dataclasses import replace

import pytest

from engine import Engine, EngineSettings, GenerationRequest
from engine.types import FINISH_LENGTH, FINISH_STOP, InvalidRequest

PROMPT = "def add(a, b):\n"

BAD_VALUES = [
    ("k", 0),
    ("k", 33),
    ("k", -1),
    ("k", 2.0),
    ("k", "8"),
    ("k", True),
    ("k", None),
    ("max_new_tokens", 0),
    ("max_new_tokens", 2049),
    ("max_new_tokens", 16.0),
    ("budget_s", 0),
    ("budget_s", -1),
    ("budget_s", math.nan),
    ("budget_s", math.inf),
    ("budget_s", "5"),
    ("temperature", -1),
    ("temperature", -1e-9),
    ("temperature", math.nan),
    ("temperature", math.inf),
    ("top_p", 0),
    ("top_p", 1.5),
    ("top_p", -0.5),
    ("top_p", math.nan),
    ("seed", -1),
    ("seed", 1.5),
    ("seed", True),
    ("stop", ("",)),
    ("stop", ("\ndef ", 3)),
    ("language", "python"),
    ("language", None),
    ("deadline", True),
]


@pytest.mark.parametrize(("field", "value"), BAD_VALUES, ids=[f"{f}={v!r}" for f, v in BAD_VALUES])
def test_bad_value_raises_value_error_naming_field_and_value(field, value):
    request = GenerationRequest(PROMPT, **{field: value})
    with pytest.raises(ValueError) as err:
        request.validate()
    message = str(err.value)
    assert field in message and repr(value) in message


@pytest.mark.parametrize(
    ("field", "value", "allowed"),
    [
        ("k", 33, "1..32"),
        ("max_new_tokens", 2049, "1..2048"),
        ("budget_s", 0, "> 0"),
        ("temperature", -1, ">= 0"),
        ("top_p", 1.5, "(0, 1]"),
    ],
)
def test_message_states_the_allowed_range(field, value, allowed):
    with pytest.raises(ValueError) as err:
        GenerationRequest(PROMPT, **{field: value}).validate()
    assert allowed in str(err.value)


@pytest.mark.parametrize("prompt", ["", "   ", "\n\t\n"])
def test_empty_prompt_raises(prompt):
    with pytest.raises(ValueError, match="prompt is empty"):
        GenerationRequest(prompt).validate()


@pytest.mark.parametrize("prompt", [None, 42, b"def f():"])
def test_prompt_that_is_not_text_raises(prompt):
    with pytest.raises(ValueError, match="prompt"):
        GenerationRequest(prompt).validate()


@pytest.mark.parametrize(
    "changes",
    [
        {"k": 1},
        {"k": 32},
        {"max_new_tokens": 1},
        {"max_new_tokens": 2048},
        {"budget_s": 1e-3},
        {"budget_s": 1},
        {"temperature": 0},
        {"temperature": 0.0},
        {"temperature": 5},
        {"top_p": 1},
        {"top_p": 1e-6},
        {"seed": 0},
        {"seed": None},
        {"seed": 2**62},
        {"stop": ()},
        {"stop": ("\n",)},
        {"stop": ["\ndef "]},
    ],
)
def test_edge_values_pass(changes):
    GenerationRequest(PROMPT, **changes).validate()


def test_engine_validates_before_any_work(make_engine):
    engine = make_engine("none")
    with pytest.raises(ValueError, match="k=0"):
        engine.generate(GenerationRequest(PROMPT, k=0))
    with pytest.raises(ValueError, match="temperature=-1"):
        engine.generate(GenerationRequest(PROMPT, temperature=-1))


def test_prompt_longer_than_the_context_raises_naming_its_length(make_engine, target):
    context = target.config.max_position_embeddings  # 4096 on the tiny model
    engine = make_engine("none")
    with pytest.raises(ValueError) as err:
        engine.generate(GenerationRequest("a" * (context + 10), max_new_tokens=1, stop=()))
    assert f"{context + 10} tokens" in str(err.value) and str(context) in str(err.value)


def test_prompt_plus_new_tokens_must_fit_the_context(make_engine, target):
    """The room for the prompt is the context minus max_new_tokens minus the longest draft (and the pending token)."""
    context = target.config.max_position_embeddings
    engine = make_engine("none")
    room = context - 16 - engine.settings.controller.max_length - 1
    with pytest.raises(ValueError, match=f"{room + 1} tokens"):
        engine.generate(GenerationRequest("a" * (room + 1), max_new_tokens=16, stop=()))
    result = engine.generate(GenerationRequest("a" * room, k=2, max_new_tokens=16, temperature=0, stop=()))
    assert [c.finish_reason for c in result.candidates] == [FINISH_LENGTH] * 2
    assert all(len(c.token_ids) == 16 for c in result.candidates)


def test_edge_request_generates(make_engine):
    result = make_engine("sibling").generate(GenerationRequest(PROMPT, k=32, max_new_tokens=1, seed=0, stop=()))
    assert len(result.candidates) == 32
    for candidate in result.candidates:  # one token each: the length limit, or EOS drawn first
        assert len(candidate.token_ids) == 1 or (candidate.token_ids == [] and candidate.finish_reason == FINISH_STOP)
        assert candidate.finish_reason == (FINISH_LENGTH if candidate.token_ids else FINISH_STOP)


@pytest.mark.parametrize("drafter", ["", "draft", "None", None])
def test_unknown_drafter_is_refused(target, tokenizer, drafter):
    with pytest.raises(ValueError, match="drafter"):
        Engine(target, tokenizer, settings=EngineSettings(drafter=drafter))


def test_model_drafter_without_draft_model_is_refused(target, tokenizer):
    with pytest.raises(ValueError, match="draft model"):
        Engine(target, tokenizer, None, EngineSettings(drafter="model"))


def test_stats_time_the_prefill_apart_from_the_decoding(make_engine, target, slow_down):
    """prefill_s is the prompt's forward (here slowed to 0.3 s), which gives every row its first token."""
    engine = make_engine("none")
    slow_down(target, 0.3)
    result = engine.generate(
        GenerationRequest(PROMPT, k=2, max_new_tokens=3, temperature=0, budget_s=30, stop=(), stop_at_body_end=False)
    )
    assert result.stats.forward_passes == 3  # the prefill and two plain steps
    assert 0.3 <= result.stats.prefill_s < 0.3 * 1.5 < 0.6 <= result.stats.wall_s


@pytest.mark.parametrize(
    ("drafter", "draft", "acceptance"),
    [
        ("none", None, "coupled"),
        ("model", "other_draft", "coupled"),
        ("model", "other_draft", "residual"),
        ("sibling", None, "coupled"),
    ],
)
def test_greedy_first_makes_row_0_the_greedy_row_and_leaves_the_others(
    make_engine, request, drafter, draft, acceptance
):
    """Row 0 of a greedy_first request is the greedy answer, whatever the drafter (speculative sampling is exact
    for a one-hot target too); the other rows are the seed's samples, as without it (rows draw their own numbers)."""
    draft_model = request.getfixturevalue(draft) if draft else None
    engine = make_engine(drafter, draft_model, cost_aware=False, acceptance=acceptance)
    base = GenerationRequest(
        "def f(x):\n", k=3, max_new_tokens=24, temperature=1.0, seed=11, budget_s=60, stop_at_body_end=False
    )
    anchored = engine.generate(replace(base, greedy_first=True)).candidates
    greedy = make_engine().generate(replace(base, k=1, temperature=0.0)).candidates[0]
    assert anchored[0].token_ids == greedy.token_ids
    if acceptance == "coupled":  # the residual rule may resample other tokens for another plan (documented)
        sampled = make_engine().generate(base).candidates
        assert [c.token_ids for c in anchored[1:]] == [c.token_ids for c in sampled[1:]]
        assert sampled[0].token_ids != greedy.token_ids  # the seed's own row 0 was another text
    with pytest.raises(InvalidRequest, match="greedy_first='yes' is invalid"):
        engine.generate(replace(base, greedy_first="yes"))


def test_a_deadline_field_that_is_not_a_bool_is_named():
    from engine import Deadline

    with pytest.raises(ValueError, match=r"deadline\.after_prompt=1 is invalid"):
        GenerationRequest(PROMPT, deadline=Deadline(after_prompt=1)).validate()
