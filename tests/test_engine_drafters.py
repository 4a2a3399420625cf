"""Drafters on their own: lookups propose what the prompt / siblings continue with; the model drafter proposes from
its model's true next-token distribution whatever happened since its last proposal."""

import time

import pytest
import torch

from engine.generate import forward
from engine.speculation.acceptance import speculative_accept
from engine.speculation.drafters import (
    Draft,
    DraftContext,
    ModelDrafter,
    majority_continuation,
    merge_drafts,
    prompt_lookup_drafter,
    sibling_drafter,
)


def context(prompt, generated, active=None, max_len=4, round_number=1):
    return DraftContext(
        prompt,
        generated,
        list(range(len(generated))) if active is None else active,
        max_len,
        time.perf_counter() + 60,
        round_number,
    )


# --- lookups -----------------------------------------------------------------------------------------------
def test_prompt_lookup_proposes_the_prompts_continuation_of_the_longest_match():
    prompt = [1, 2, 3, 4, 5, 9, 3, 4, 6, 7]
    draft = prompt_lookup_drafter().propose(context(prompt, [[2, 3, 4]], max_len=3))
    assert draft.probs is None  # point masses
    assert draft.tokens[0, : int(draft.lengths[0])].tolist() == [5, 9, 3]  # (2, 3, 4) beats the shorter (3, 4)


def test_prompt_lookup_ignores_siblings_and_sibling_lookup_uses_them():
    generated = [[8], [8, 5, 6]]
    assert prompt_lookup_drafter().propose(context([1], generated)).lengths.tolist()[0] == 0
    draft = sibling_drafter().propose(context([1], generated))
    assert draft.tokens[0, : int(draft.lengths[0])].tolist() == [5, 6]


def test_majority_continuation_follows_the_most_common_path():
    assert majority_continuation([[1, 2, 3], [1, 2, 4], [1, 5], [1, 2, 4]]) == [1, 2, 4]


def test_sibling_votes_are_counted_once_however_often_the_drafter_is_called():
    """Three siblings continue token 1: one with 2, two with 3. The majority is 3, whatever the call history."""
    drafter = sibling_drafter()
    generated = [[9], [5, 1], [7], [8]]
    drafter.propose(context([42], generated))  # sibling 1 is indexed up to its end (1,) here
    generated[0] += [1]
    generated[1] += [2]
    generated[2] += [1, 3]
    generated[3] += [1, 3]
    draft = drafter.propose(context([42], generated, max_len=1))
    assert draft.tokens[0, : int(draft.lengths[0])].tolist() == [3]


# --- the model drafter -------------------------------------------------------------------------------------
def true_next(model, tokens):
    with torch.inference_mode():
        return torch.softmax(model(torch.tensor([tokens])).logits[0, -1].float(), -1)


@pytest.mark.parametrize(
    "tokens_since_last_proposal",
    [
        1,  # its draft rejected at once: one resampled token
        2,  # one draft token accepted, or a full 1-token draft + bonus
        5,  # it sat out a few steps (plain decoding or a lookup)
        20,
    ],
)
def test_model_drafter_proposes_from_its_models_true_distribution(other_draft, tokens_since_last_proposal):
    """After a full accept (the last draft token plus a bonus), a partial accept, or steps in which another drafter
    (or plain decoding) was chosen, the draft distribution is still the draft model's own for the row's history."""
    torch.manual_seed(0)
    prompt = torch.randint(0, 256, (12,)).tolist()
    continuation = torch.randint(0, 256, (40,)).tolist()
    drafter = ModelDrafter(other_draft, prompt, 1.0, 1.0, torch.Generator().manual_seed(0), forward)
    generated = [continuation[:1], continuation[:1]]  # the engine's first call: one token per row
    drafter.propose(context(prompt, generated, max_len=3))
    for row in generated:  # the target moved on without this drafter
        row.extend(continuation[len(row) : len(row) + tokens_since_last_proposal])
    draft = drafter.propose(context(prompt, generated, max_len=2))
    for b, row in enumerate(generated):
        history = prompt + row
        torch.testing.assert_close(draft.probs[b, 0], true_next(other_draft, history), atol=1e-5, rtol=0)
        history = history + [int(draft.tokens[b, 0])]
        torch.testing.assert_close(draft.probs[b, 1], true_next(other_draft, history), atol=1e-5, rtol=0)


def test_model_drafter_follows_the_rows_left_in_the_batch(other_draft):
    torch.manual_seed(1)
    prompt = torch.randint(0, 256, (8,)).tolist()
    generated = [torch.randint(0, 256, (n,)).tolist() for n in (1, 1, 1)]
    drafter = ModelDrafter(other_draft, prompt, 1.0, 1.0, torch.Generator().manual_seed(0), forward)
    drafter.propose(context(prompt, generated, max_len=2))
    generated[0] += [3, 4]
    generated[2] += [5]
    draft = drafter.propose(context(prompt, generated, active=[0, 2], max_len=1))  # row 1 finished
    for b, row in enumerate([0, 2]):
        torch.testing.assert_close(
            draft.probs[b, 0], true_next(other_draft, prompt + generated[row]), atol=1e-5, rtol=0
        )


def test_model_drafter_catches_up_rows_of_very_different_lengths(other_draft):
    """Regression (issue 10): after the drafter sat out while one row grew by more tokens than another row's whole
    history, the catch-up stacked rows of different lengths and crashed ("expected sequence of length ...")."""
    torch.manual_seed(2)
    prompt = torch.randint(0, 256, (3,)).tolist()
    generated = [torch.randint(0, 256, (1,)).tolist() for _ in range(3)]
    drafter = ModelDrafter(other_draft, prompt, 1.0, 1.0, torch.Generator().manual_seed(0), forward, check_cache=True)
    drafter.propose(context(prompt, generated, max_len=3))
    generated[0] += torch.randint(0, 256, (30,)).tolist()  # 30 new tokens: more than row 1's history of 4
    generated[2] += [7]
    draft = drafter.propose(context(prompt, generated, max_len=2))
    for b, row in enumerate(generated):
        torch.testing.assert_close(draft.probs[b, 0], true_next(other_draft, prompt + row), atol=1e-5, rtol=0)


def test_model_drafter_runs_nothing_until_asked(other_draft):
    """A request whose controller never picks the draft model does not pay for its prefill."""
    drafter = ModelDrafter(other_draft, [1, 2, 3], 1.0, 1.0, torch.Generator().manual_seed(0), forward)
    assert drafter.passes == drafter.setup_passes == 0 and drafter.cache is None


def test_catching_up_on_rounds_it_sat_out_is_a_one_off_not_a_draft_pass(other_draft):
    """The controller divides draft seconds by draft passes: the feed of a drafter that sat out some rounds
    catches up on them and counts with the prompt's prefill, however few tokens it feeds; the feed of a drafter
    that drafted last round is an ordinary pass, however many (a lookup's rows of a mixed round)."""
    prompt = [5, 6, 7]
    generated = [[1], [2]]
    drafter = ModelDrafter(other_draft, prompt, 1.0, 1.0, torch.Generator().manual_seed(0), forward, check_cache=True)
    drafter.propose(context(prompt, generated, max_len=1, round_number=1))  # prefill, then the newest token: 1 pass
    assert (drafter.setup_passes, drafter.passes) == (1, 1)
    for row in generated:
        row += [3, 3]  # its 1-token draft accepted, + the bonus
    drafter.propose(context(prompt, generated, max_len=3, round_number=2))
    assert (drafter.setup_passes, drafter.passes) == (1, 4)  # a 2-token feed, 2 draft tokens fed
    generated[0] += [4, 4, 4, 4]  # a lookup's 3 tokens accepted, + the bonus
    generated[1] += [4]
    drafter.propose(context(prompt, generated, max_len=3, round_number=3))
    assert (drafter.setup_passes, drafter.passes) == (1, 7)
    setup_s = drafter.setup_s
    for row in generated:
        row += [5, 6, 7]  # its 3-token draft rejected at once, then 2 plain rounds: 3 tokens
    drafter.propose(context(prompt, generated, max_len=1, round_number=6))
    assert (drafter.setup_passes, drafter.passes) == (2, 7) and drafter.setup_s > setup_s
    first = ModelDrafter(other_draft, prompt, 1.0, 1.0, torch.Generator().manual_seed(0), forward)
    first.propose(context(prompt, [[1, 2], [2, 3]], max_len=1, round_number=2))  # first used in round 2: it missed one
    assert (first.setup_passes, first.passes) == (2, 0)


# --- rows served by different drafters in one step -----------------------------------------------------------
def test_merged_draft_takes_lookup_rows_as_point_masses_and_keeps_model_rows():
    vocab = 6
    model_probs = torch.softmax(torch.randn(3, 2, vocab, generator=torch.Generator().manual_seed(1)), -1)
    model = Draft(torch.tensor([[1, 2], [3, 4], [5, 0]]), torch.tensor([2, 2, 2]), model_probs)
    lookup = Draft(torch.tensor([[4, 4, 4], [0, 0, 0], [2, 0, 0]]), torch.tensor([3, 0, 1]))
    merged = merge_drafts(lookup, model)
    assert merged.lengths.tolist() == [3, 2, 1]
    assert merged.tokens[0].tolist() == [4, 4, 4] and merged.tokens[1, :2].tolist() == [3, 4]
    assert merged.tokens[2, 0].item() == 2
    assert torch.equal(merged.probs[1, :2], model_probs[1])  # the model row is untouched
    assert merged.probs[0].argmax(-1).tolist() == [4, 4, 4] and merged.probs[0].max(-1).values.tolist() == [1, 1, 1]


def test_one_hot_rows_are_accepted_exactly_like_point_masses():
    """The acceptance rule must treat a one-hot draft distribution and a point-mass draft identically."""
    target = torch.softmax(torch.randn(4, 3, 5, generator=torch.Generator().manual_seed(2)), -1)
    tokens = torch.tensor([[1, 2], [0, 0], [4, 3], [2, 2]])
    lengths = torch.tensor([2, 1, 2, 0])
    one_hot = torch.zeros(4, 2, 5).scatter_(-1, tokens[..., None], 1.0)
    for seed in range(50):
        as_mass = speculative_accept(tokens, None, target, lengths, torch.Generator().manual_seed(seed))
        as_probs = speculative_accept(tokens, one_hot, target, lengths, torch.Generator().manual_seed(seed))
        assert all(torch.equal(a, b) for a, b in zip(as_mass, as_probs))
