"""Temperature 0: every row equals transformers' greedy generate token for token, whatever the drafter."""

import pytest

from engine import GenerationRequest
from engine.types import FINISH_LENGTH

NEW_TOKENS = 24
PROMPTS = {
    "1 token": "x",
    "short": "def add(a, b):\n    return",
    "repetitive": (
        "for i in range(10):\n    total = total + i\n    count = count + 1\n"
        "for j in range(10):\n    total = total + j\n"
    ),
}

# (name, drafter, draft fixture or None, cost_aware, drafts must be proposed)
CASES = [
    ("none", "none", None, True, False),
    ("model same weights", "model", "same_draft", False, True),
    ("model different weights", "model", "other_draft", False, True),
    ("model same weights, cost-aware", "model", "same_draft", True, False),
    ("prompt", "prompt", None, False, True),
    ("sibling", "sibling", None, False, True),
    ("auto with a draft model", "auto", "other_draft", False, True),
    ("auto, cost-aware", "auto", "same_draft", True, False),
]


@pytest.fixture(scope="module")
def reference(target, hf_greedy):
    return {name: hf_greedy(target, prompt, NEW_TOKENS) for name, prompt in PROMPTS.items()}


@pytest.mark.parametrize("prompt_name", list(PROMPTS))
@pytest.mark.parametrize(("case", "drafter", "draft", "cost_aware", "must_draft"), CASES, ids=[c[0] for c in CASES])
def test_greedy_rows_equal_transformers_greedy(
    request, make_engine, reference, prompt_name, case, drafter, draft, cost_aware, must_draft
):
    draft_model = request.getfixturevalue(draft) if draft else None
    engine = make_engine(drafter, draft_model, cost_aware=cost_aware)
    result = engine.generate(
        GenerationRequest(
            PROMPTS[prompt_name],
            k=3,
            max_new_tokens=NEW_TOKENS,
            temperature=0,
            budget_s=120,
            stop=(),
            stop_at_body_end=False,
        )
    )
    expected = reference[prompt_name]
    assert len(expected) == NEW_TOKENS  # the reference never hit EOS: every row runs to length
    for candidate in result.candidates:
        assert candidate.token_ids == expected
        assert candidate.finish_reason == FINISH_LENGTH
    assert result.stats.generated_tokens == 3 * NEW_TOKENS
    if must_draft:
        assert result.stats.proposed_tokens > 0
    if drafter == "none":
        assert result.stats.proposed_tokens == 0 and result.stats.forward_passes == NEW_TOKENS


def test_same_weights_draft_is_always_accepted_and_saves_forwards(make_engine, same_draft, reference):
    result = make_engine("model", same_draft, cost_aware=False).generate(
        GenerationRequest(
            PROMPTS["short"],
            k=3,
            max_new_tokens=NEW_TOKENS,
            temperature=0,
            budget_s=120,
            stop=(),
            stop_at_body_end=False,
        )
    )
    stats = result.stats
    assert stats.proposed_tokens > 0 and stats.acceptance_rate == 1.0
    assert stats.forward_passes < NEW_TOKENS // 2  # prefill + a few long verified drafts


def test_unconfident_drafts_stop_early_and_greedy_output_is_unchanged(make_engine, same_draft, reference):
    request = GenerationRequest(
        PROMPTS["short"], k=3, max_new_tokens=NEW_TOKENS, temperature=0, budget_s=120, stop=(), stop_at_body_end=False
    )
    never_sure = make_engine("model", same_draft, cost_aware=False, min_draft_confidence=0.999).generate(request)
    never_stop = make_engine("model", same_draft, cost_aware=False, min_draft_confidence=0.0).generate(request)
    assert never_sure.stats.mean_draft_length == 1.0  # one token, then the drafter gives up
    assert never_stop.stats.mean_draft_length > 2.0
    assert [c.token_ids for c in never_sure.candidates] == [c.token_ids for c in never_stop.candidates]


def test_different_weights_draft_is_rarely_accepted(make_engine, other_draft):
    result = make_engine("model", other_draft, cost_aware=False).generate(
        GenerationRequest(
            PROMPTS["short"],
            k=3,
            max_new_tokens=NEW_TOKENS,
            temperature=0,
            budget_s=120,
            stop=(),
            stop_at_body_end=False,
        )
    )
    assert result.stats.proposed_tokens > 0 and result.stats.acceptance_rate < 0.5


@pytest.mark.parametrize("drafter", ["prompt", "sibling"])
def test_lookup_drafters_propose_on_a_repetitive_prompt(make_engine, reference, drafter):
    result = make_engine(drafter, cost_aware=False).generate(
        GenerationRequest(
            PROMPTS["repetitive"],
            k=3,
            max_new_tokens=NEW_TOKENS,
            temperature=0,
            budget_s=120,
            stop=(),
            stop_at_body_end=False,
        )
    )
    assert all(c.token_ids == reference["repetitive"] for c in result.candidates)
    assert result.stats.proposed_tokens > 0 and result.stats.accepted_tokens > 0


def test_greedy_ignores_top_p(make_engine, reference):
    result = make_engine("sibling", cost_aware=False).generate(
        GenerationRequest(
            PROMPTS["short"],
            k=2,
            max_new_tokens=NEW_TOKENS,
            temperature=0,
            top_p=0.3,
            seed=5,
            stop=(),
            stop_at_body_end=False,
        )
    )
    assert all(c.token_ids == reference["short"] for c in result.candidates)


def test_logprobs_are_the_targets_at_temperature_1(make_engine, same_draft, reference, teacher_forced_logprobs, target):
    """Per-token log-probabilities (what rerank reads) are the target's own, also for tokens accepted from a draft."""
    result = make_engine("model", same_draft, cost_aware=False).generate(
        GenerationRequest(
            PROMPTS["short"], k=2, max_new_tokens=NEW_TOKENS, temperature=0, stop=(), stop_at_body_end=False
        )
    )
    expected = teacher_forced_logprobs(target, PROMPTS["short"], reference["short"])
    for candidate in result.candidates:
        assert candidate.logprobs == pytest.approx(expected, abs=1e-4)
