"""Exact speculative acceptance, batched over rows with ragged draft lengths: a pure function."""

from __future__ import annotations

import torch

from engine.sampling import inverse_cdf


def speculative_accept(
    draft_tokens: torch.Tensor,
    draft_probs: torch.Tensor | None,
    target_probs: torch.Tensor | None,
    draft_lengths: torch.Tensor,
    generator: torch.Generator | None,
    sample_uniform: torch.Tensor | None = None,
    target_samples: torch.Tensor | None = None,
):
    """Speculative sampling (Leviathan et al. 2023; Chen et al. 2023), one independent decision per row.

    Every position j of a row has one uniform number u_j, and the target's own sample there is
    inverse_cdf(p_target_j, u_j): what regular decoding with that number would draw.
    - A point-mass draft (a looked-up token, a draft sampled with the same u_j, a one-hot distribution) is
      accepted while it equals the target's sample, and the first target sample that differs is the next
      token; when every draft token matches, the target's sample one past the draft is the bonus token. The
      output is then exactly the tokens regular decoding draws with the same numbers, whatever the draft.
    - A draft with a distribution q is accepted with probability min(1, p_target(x) / q(x)) (a separate
      draw from `generator`); at the first rejection the next token is drawn with u_j from
      normalize(max(p_target - q, 0)). The output has the target's distribution; which tokens a seed gives
      then depends on the draft.
    With one-hot (greedy) distributions both reduce to the longest prefix agreeing with the target argmax.

    Args:
        draft_tokens:   [B, K] proposed tokens (entries at or past a row's draft length are ignored)
        draft_probs:    [B, K, V] the drafter's (warped) distributions, or None for point-mass drafts
        target_probs:   [B, K+1, V] the target's (warped) distributions at each draft position and one past; only
                        read for a draft with distributions when target_samples are given
        draft_lengths:  [B] how many of the K draft tokens each row really proposes (0..K)
        generator:      source of the acceptance draws, and of sample_uniform when that is not given
        sample_uniform: [B, K+1] the numbers u_j of each row's positions
        target_samples: [B, K+1] inverse_cdf(p_target_j, u_j) where the caller drew them already (the engine
                        draws them at the verified positions only; entries past a row's length are not read)
    Returns:
        n_accepted  [B] accepted draft tokens per row (0..draft_lengths)
        next_tokens [B] the token that follows them
    """
    batch, max_len = draft_tokens.shape
    device = draft_tokens.device
    rows = torch.arange(batch, device=device)
    if sample_uniform is None:
        sample_uniform = torch.rand(batch, max_len + 1, generator=generator, device=device)
    sample_uniform = sample_uniform.to(device)  # [B, K+1]
    if target_samples is None:
        target_samples = inverse_cdf(target_probs, sample_uniform)  # [B, K+1]
    accepted = target_samples[:, :max_len] == draft_tokens  # [B, K]
    point_mass = None
    if draft_probs is not None:
        accepted, point_mass = _accepted_by_ratio(accepted, draft_tokens, draft_probs, target_probs, generator)
    proposed = torch.arange(max_len, device=device)[None, :] < draft_lengths[:, None]
    n_accepted = (accepted & proposed).long().cumprod(dim=-1).sum(dim=-1)  # [B]
    next_tokens = target_samples[rows, n_accepted]  # [B]
    if draft_probs is None:
        return n_accepted, next_tokens
    return n_accepted, _after_rejection(
        next_tokens, n_accepted, draft_lengths, point_mass, draft_probs, target_probs, sample_uniform, max_len
    )


def _accepted_by_ratio(accepted, draft_tokens, draft_probs, target_probs, generator):
    """([B, K] whether each draft token is accepted, [B, K] whether the draft put all its mass on it): a point-mass
    draft token as it matched the target's sample, another with probability min(1, p_target / q)."""
    batch, max_len = draft_tokens.shape
    p_target_of_draft = target_probs[:, :max_len].gather(-1, draft_tokens[..., None]).squeeze(-1)  # [B, K]
    p_draft_of_draft = draft_probs.gather(-1, draft_tokens[..., None]).squeeze(-1)  # [B, K]
    point_mass = p_draft_of_draft >= 1.0
    accept_draft_prob = (p_target_of_draft / p_draft_of_draft.clamp_min(1e-30)).clamp(max=1.0)
    uniform = torch.rand(batch, max_len, generator=generator, device=draft_tokens.device)
    return torch.where(point_mass, accepted, uniform < accept_draft_prob), point_mass


def _after_rejection(
    next_tokens, n_accepted, draft_lengths, point_mass, draft_probs, target_probs, sample_uniform, max_len: int
):
    """[B] the next tokens: where a row rejected a draft token that had a distribution, a draw with that position's
    u_j from normalize(max(p_target - q, 0)); elsewhere `next_tokens` as they are."""
    rows = torch.arange(next_tokens.shape[0], device=next_tokens.device)
    at = n_accepted.clamp(max=max(max_len - 1, 0))
    residual_rows = (n_accepted < draft_lengths) & ~point_mass[rows, at]  # [B]
    if not bool(residual_rows.any()):
        return next_tokens
    next_target_probs = target_probs[rows, n_accepted]  # [B, V]
    residual = (next_target_probs - draft_probs[rows, at]).clamp_min(0.0)
    residual_mass = residual.sum(-1, keepdim=True)
    # p <= q everywhere only happens through rounding when p == q; then p itself is the right answer.
    residual = torch.where(residual_mass > 0, residual / residual_mass.clamp_min(1e-30), next_target_probs)
    resampled = inverse_cdf(residual, sample_uniform[rows, n_accepted])  # [B]
    return torch.where(residual_rows, resampled, next_tokens)
