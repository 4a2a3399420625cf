"""speculative_accept on hand-built probabilities: the accept/resample/bonus rules and the output distribution."""

import math

import pytest
import torch

from engine.speculation.acceptance import speculative_accept

V = 6  # vocabulary of the hand-built distributions


def one_hot(tokens, vocab=V):
    """[...] token ids -> [..., vocab] point masses."""
    return torch.nn.functional.one_hot(torch.as_tensor(tokens), vocab).float()


def rows(dist, n):
    """Repeat one [..., V] distribution over n rows."""
    return torch.as_tensor(dist, dtype=torch.float32).expand(n, *torch.as_tensor(dist).shape).clone()


def gen(seed=0):
    return torch.Generator().manual_seed(seed)


def tv(counts, probs):
    """Total-variation distance between empirical counts and a distribution."""
    counts = torch.as_tensor(counts, dtype=torch.float64)
    return 0.5 * (counts / counts.sum() - torch.as_tensor(probs, dtype=torch.float64)).abs().sum().item()


# --- all accepted --------------------------------------------------------------------------------------
def test_point_mass_draft_equal_to_point_mass_target_is_all_accepted_with_bonus():
    draft_tokens = torch.tensor([[1, 2, 3], [4, 4, 0]])  # [B=2, K=3]
    bonus = torch.tensor([5, 2])
    target_probs = one_hot(torch.cat([draft_tokens, bonus[:, None]], dim=1))  # [B, K+1, V]
    n_accepted, next_tokens = speculative_accept(draft_tokens, None, target_probs, torch.tensor([3, 3]), gen())
    assert n_accepted.tolist() == [3, 3]
    assert next_tokens.tolist() == bonus.tolist()


def test_draft_distribution_equal_to_target_is_always_accepted():
    """q == p (not point masses): min(1, p/q) = 1 for every draft token, so all K are accepted, every time."""
    batch, k = 500, 4
    dist = torch.tensor([0.1, 0.2, 0.3, 0.15, 0.05, 0.2])
    draft_probs = rows(dist.expand(k, V), batch)  # [B, K, V]
    draft_tokens = torch.multinomial(dist, batch * k, replacement=True, generator=gen(1)).view(batch, k)
    target_probs = torch.cat([draft_probs, one_hot([3] * batch)[:, None]], dim=1)  # bonus position: a point mass on 3
    n_accepted, next_tokens = speculative_accept(
        draft_tokens, draft_probs, target_probs, torch.full((batch,), k), gen(2)
    )
    assert (n_accepted == k).all()
    assert (next_tokens == 3).all()  # the bonus comes from position K


def test_bonus_token_is_drawn_from_the_target_at_position_k():
    batch = 4000
    bonus_dist = torch.tensor([0.0, 0.5, 0.0, 0.25, 0.25, 0.0])
    draft_tokens = torch.zeros(batch, 2, dtype=torch.long)
    target_probs = torch.cat([one_hot(torch.zeros(batch, 2, dtype=torch.long)), rows(bonus_dist, batch)[:, None]], 1)
    n_accepted, next_tokens = speculative_accept(draft_tokens, None, target_probs, torch.full((batch,), 2), gen())
    assert (n_accepted == 2).all()
    counts = torch.bincount(next_tokens, minlength=V)
    assert counts[bonus_dist == 0].sum() == 0
    assert tv(counts, bonus_dist) < 0.05  # sd of each share is <= 0.008


# --- rejection -----------------------------------------------------------------------------------------
def test_first_token_impossible_under_target_is_rejected_and_resampled_from_the_residual():
    """p_target(x) = 0 -> n = 0; the resample is from max(p - q, 0): never a token with p_target <= p_draft."""
    batch = 4000
    target_dist = torch.tensor([0.1, 0.4, 0.3, 0.2, 0.0, 0.0])
    draft_dist = torch.tensor([0.5, 0.1, 0.3, 0.05, 0.05, 0.0])  # residual: [0, .3, 0, .15, 0, 0] -> tokens 1 and 3
    draft_tokens = torch.full((batch, 3), 4)  # token 4: p_target = 0
    draft_probs = rows(draft_dist.expand(3, V), batch)
    target_probs = rows(target_dist.expand(4, V), batch)
    n_accepted, next_tokens = speculative_accept(
        draft_tokens, draft_probs, target_probs, torch.full((batch,), 3), gen()
    )
    assert (n_accepted == 0).all()
    allowed = target_dist > draft_dist
    assert allowed[next_tokens].all(), "resampled a token where p_target <= p_draft"
    counts = torch.bincount(next_tokens, minlength=V)
    assert tv(counts, [0, 2 / 3, 0, 1 / 3, 0, 0]) < 0.05


def test_point_mass_rejection_removes_the_drafted_token():
    """A looked-up token x is accepted with p_target(x); after a rejection the next token is never x."""
    batch = 4000
    target_dist = torch.tensor([0.5, 0.3, 0.2, 0.0, 0.0, 0.0])
    draft_tokens = torch.zeros(batch, 1, dtype=torch.long)  # x = 0, p_target(x) = 0.5
    target_probs = torch.stack([rows(target_dist, batch), one_hot([5] * batch)], dim=1)
    n_accepted, next_tokens = speculative_accept(
        draft_tokens, None, target_probs, torch.ones(batch, dtype=torch.long), gen()
    )
    rejected = n_accepted == 0
    assert abs(rejected.float().mean().item() - 0.5) < 0.04
    assert (next_tokens[~rejected] == 5).all()  # accepted: bonus from position 1
    assert (next_tokens[rejected] != 0).all()  # rejected: x removed
    counts = torch.bincount(next_tokens[rejected], minlength=V)
    assert tv(counts, [0, 0.6, 0.4, 0, 0, 0]) < 0.05  # p_target without x, renormalized


@pytest.mark.parametrize("point_mass_draft", [True, False])
def test_greedy_reduces_to_the_longest_prefix_agreeing_with_the_target_argmax(point_mass_draft):
    target_argmax = torch.tensor([[1, 2, 3, 4, 5]] * 5)  # [B=5, K+1=5]
    draft_tokens = torch.tensor(
        [
            [0, 2, 3, 4],  # disagrees at 0
            [1, 0, 3, 4],  # at 1
            [1, 2, 3, 0],  # at 3
            [1, 2, 3, 4],  # never: bonus 5
            [1, 2, 0, 0],
        ]
    )  # at 2
    draft_probs = None if point_mass_draft else one_hot(draft_tokens)
    for seed in range(20):  # no randomness may leak into a greedy decision
        n_accepted, next_tokens = speculative_accept(
            draft_tokens, draft_probs, one_hot(target_argmax), torch.full((5,), 4), gen(seed)
        )
        assert n_accepted.tolist() == [0, 1, 3, 4, 2]
        assert next_tokens.tolist() == [1, 2, 4, 5, 3]


def test_ragged_draft_lengths_are_respected():
    """Entries at or past a row's draft length are ignored, even when they would be rejected."""
    target_argmax = torch.tensor([[1, 2, 3, 4]] * 4)
    draft_tokens = torch.tensor(
        [
            [0, 0, 0],  # length 0: nothing proposed, the next token is the target's 1st
            [1, 0, 0],  # length 1: its 2nd entry (0) would be rejected, but is not proposed
            [1, 2, 0],  # length 2
            [1, 2, 3],
        ]
    )  # length 3: all accepted, bonus 4
    lengths = torch.tensor([0, 1, 2, 3])
    n_accepted, next_tokens = speculative_accept(draft_tokens, None, one_hot(target_argmax), lengths, gen())
    assert n_accepted.tolist() == [0, 1, 2, 3]
    assert next_tokens.tolist() == [1, 2, 3, 4]  # each row's bonus comes from its own position lengths[b]


def test_empty_draft_is_plain_sampling():
    batch = 3
    target_probs = one_hot([[2], [4], [0]])
    n_accepted, next_tokens = speculative_accept(
        torch.zeros(batch, 0, dtype=torch.long), None, target_probs, torch.zeros(batch, dtype=torch.long), gen()
    )
    assert n_accepted.tolist() == [0, 0, 0]
    assert next_tokens.tolist() == [2, 4, 0]


# --- the output distribution is the target's -----------------------------------------------------------
N_DRAWS = 40_000
TV_SLACK = 0.02  # McDiarmid: TV moves by <= 1/N per draw, so P(TV > E[TV] + t) <= exp(-2 N t^2) = exp(-32) here


def tv_bound(n_draws, vocab):
    """E[TV] <= 0.5 * sum_i sqrt(p_i (1 - p_i) / N) <= 0.5 * sqrt(V / N); plus the McDiarmid slack."""
    return 0.5 * math.sqrt(vocab / n_draws) + TV_SLACK


def naive_output(target_dist, draft_dist):
    """What a wrong rule (resample from p_target, not from the residual) would give: to show the test's power."""
    accept = torch.minimum(target_dist, draft_dist)
    return accept + (1 - accept.sum()) * target_dist


@pytest.mark.parametrize("case", ["model draft", "point mass"])
def test_one_accept_step_outputs_the_target_distribution(case):
    """Draft x ~ q, then keep x or resample: the first output token is distributed as p_target.

    With N draws over V categories, TV(empirical, p) exceeds tv_bound(N, V) with probability < 1e-13 for a correct
    rule; the naive rule sits far beyond that bound (asserted), so this test can fail.
    """
    target_dist = torch.tensor([0.05, 0.4, 0.1, 0.25, 0.15, 0.05])
    draft_dist = torch.tensor([0.3, 0.1, 0.3, 0.1, 0.1, 0.1]) if case == "model draft" else one_hot(2)
    draft_tokens = torch.multinomial(draft_dist, N_DRAWS, replacement=True, generator=gen(7))[:, None]  # [N, 1]
    draft_probs = rows(draft_dist, N_DRAWS)[:, None] if case == "model draft" else None  # [N, 1, V]
    target_probs = torch.stack([rows(target_dist, N_DRAWS), one_hot([0] * N_DRAWS)], dim=1)  # [N, 2, V]
    n_accepted, next_tokens = speculative_accept(
        draft_tokens, draft_probs, target_probs, torch.ones(N_DRAWS, dtype=torch.long), gen(8)
    )
    first_tokens = torch.where(n_accepted > 0, draft_tokens[:, 0], next_tokens)
    bound = tv_bound(N_DRAWS, V)
    assert 0.5 * (naive_output(target_dist, draft_dist) - target_dist).abs().sum() > 3 * bound
    assert tv(torch.bincount(first_tokens, minlength=V), target_dist) < bound


def test_two_draft_tokens_output_the_target_distribution_at_both_positions():
    """K=2 with a context-free hand-built target (same p at every position): tokens 1 and 2 are both ~ p."""
    target_dist = torch.tensor([0.05, 0.4, 0.1, 0.25, 0.15, 0.05])
    draft_dist = torch.tensor([0.3, 0.1, 0.3, 0.1, 0.1, 0.1])
    draft_tokens = torch.multinomial(draft_dist, 2 * N_DRAWS, replacement=True, generator=gen(3)).view(N_DRAWS, 2)
    n_accepted, next_tokens = speculative_accept(
        draft_tokens,
        rows(draft_dist.expand(2, V), N_DRAWS),
        rows(target_dist.expand(3, V), N_DRAWS),
        torch.full((N_DRAWS,), 2),
        gen(4),
    )
    first = torch.where(n_accepted > 0, draft_tokens[:, 0], next_tokens)
    second_known = n_accepted >= 1  # the 2nd output token exists within this step
    second = torch.where(n_accepted > 1, draft_tokens[:, 1], next_tokens)[second_known]
    assert tv(torch.bincount(first, minlength=V), target_dist) < tv_bound(N_DRAWS, V)
    assert tv(torch.bincount(second, minlength=V), target_dist) < tv_bound(len(second), V)


@pytest.mark.parametrize("with_distributions", [False, True])
def test_samples_drawn_at_the_verified_positions_only_give_the_same_decisions(with_distributions):
    """The engine draws the target's samples at each row's own positions and passes them in (zeros elsewhere, and
    zero distributions past a row's length for the residual test): the decisions equal those made from the full
    [B, K+1, V] distributions, row by row, whatever the ragged lengths."""
    from engine.sampling import inverse_cdf

    batch, k = 200, 3
    lengths = torch.randint(0, k + 1, (batch,), generator=gen(3))
    logits = torch.randn(batch, k + 1, V, generator=gen(4)) * 2
    target_probs = torch.softmax(logits, -1)
    uniform = torch.rand(batch, k + 1, generator=gen(5))
    draft_probs = torch.softmax(torch.randn(batch, k, V, generator=gen(6)) * 2, -1) if with_distributions else None
    draft_tokens = (
        torch.multinomial(draft_probs.reshape(-1, V), 1, generator=gen(7)).view(batch, k)
        if with_distributions
        else inverse_cdf(target_probs[:, :k], torch.rand(batch, k, generator=gen(8)))
    )
    verified = torch.arange(k + 1)[None, :] <= lengths[:, None]  # [B, K+1]
    samples = torch.where(verified, inverse_cdf(target_probs, uniform), torch.zeros((), dtype=torch.long))
    padded_probs = target_probs * verified[..., None]
    full = speculative_accept(draft_tokens, draft_probs, target_probs, lengths, gen(9), uniform)
    given = speculative_accept(
        draft_tokens, draft_probs, padded_probs if with_distributions else None, lengths, gen(9), uniform, samples
    )
    assert full[0].tolist() == given[0].tolist() and full[1].tolist() == given[1].tolist()
    assert 0 < int(full[0].sum()) < int(lengths.sum())  # some accepted, some not: a real check
