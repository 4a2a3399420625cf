"""Exact speculative acceptance, batched over rows with ragged draft lengths: a pure function."""
from __future__ import annotations

import torch

from engine.sampling import sample


def speculative_accept(draft_tokens: torch.Tensor, draft_probs: torch.Tensor | None, target_probs: torch.Tensor,
                       draft_lengths: torch.Tensor, generator: torch.Generator | None):
    """Speculative sampling (Leviathan et al. 2023; Chen et al. 2023), one independent decision per row.

    Draft token x_j is accepted with probability min(1, p_target(x_j) / p_draft(x_j)); at the first
    rejection the next token is drawn from normalize(max(p_target - p_draft, 0)); when every draft token
    of a row is accepted, a bonus token is drawn from the target at the next position. The output then
    has exactly the target's distribution. A drafter without probabilities (a looked-up token) is a point
    mass: accepted with probability p_target(x), and on rejection x itself is removed from p_target.
    With one-hot (greedy) distributions this reduces to the longest prefix agreeing with the target argmax.

    Args:
        draft_tokens:  [B, K] proposed tokens (entries at or past a row's draft length are ignored)
        draft_probs:   [B, K, V] the drafter's (warped) distributions, or None for point-mass drafts
        target_probs:  [B, K+1, V] the target's (warped) distributions at each draft position and one past
        draft_lengths: [B] how many of the K draft tokens each row really proposes (0..K)
    Returns:
        n_accepted  [B] accepted draft tokens per row (0..draft_lengths)
        next_tokens [B] the token that follows them (resampled after a rejection, or the bonus token)
    """
    batch, max_len = draft_tokens.shape
    rows = torch.arange(batch, device=draft_tokens.device)
    p_target_of_draft = target_probs[:, :max_len].gather(-1, draft_tokens[..., None]).squeeze(-1)  # [B, K]
    if draft_probs is None:
        p_draft_of_draft = torch.ones_like(p_target_of_draft)
    else:
        p_draft_of_draft = draft_probs.gather(-1, draft_tokens[..., None]).squeeze(-1)          # [B, K]
    accept_draft_prob = (p_target_of_draft / p_draft_of_draft.clamp_min(1e-30)).clamp(max=1.0)  # [B, K]
    uniform = torch.rand(batch, max_len, generator=generator, device=draft_tokens.device)
    proposed = torch.arange(max_len, device=draft_tokens.device)[None, :] < draft_lengths[:, None]
    accepted = (uniform < accept_draft_prob) & proposed                                         # [B, K]
    n_accepted = accepted.long().cumprod(dim=-1).sum(dim=-1)                                    # [B]

    next_target_probs = target_probs[rows, n_accepted]                                          # [B, V]
    rejected_rows = n_accepted < draft_lengths                                                  # [B]
    if bool(rejected_rows.any()):
        at = n_accepted.clamp(max=max(max_len - 1, 0))
        if draft_probs is None:
            draft_at = torch.zeros_like(next_target_probs).scatter_(-1, draft_tokens[rows, at][:, None], 1.0)
        else:
            draft_at = draft_probs[rows, at]                                                    # [B, V]
        residual = (next_target_probs - draft_at).clamp_min(0.0)
        residual_mass = residual.sum(-1, keepdim=True)
        # p <= q everywhere only happens through rounding when p == q; then p itself is the right answer.
        residual = torch.where(residual_mass > 0, residual / residual_mass.clamp_min(1e-30), next_target_probs)
        next_target_probs = torch.where(rejected_rows[:, None], residual, next_target_probs)
    next_tokens = sample(next_target_probs, generator)                                         # [B]
    return n_accepted, next_tokens
