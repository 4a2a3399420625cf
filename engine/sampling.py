"""Turning logits into sampling distributions (temperature, top-p) and drawing tokens from them."""
from __future__ import annotations

import torch


def warp_probs(logits: torch.Tensor, temperature: float, top_p: float) -> torch.Tensor:
    """Probabilities the sampler draws from, [..., V]; temperature 0 gives a one-hot argmax (greedy).

    The same warp is applied to target and draft distributions, so speculative sampling stays exact
    with respect to the distribution regular sampling would use.
    """
    if temperature == 0:
        return torch.zeros(logits.shape, device=logits.device).scatter_(-1, logits.argmax(-1, keepdim=True), 1.0)
    scaled = logits.float() / temperature
    if top_p >= 1.0:
        return torch.softmax(scaled, dim=-1)
    return _nucleus(scaled, top_p)


def _nucleus(scaled: torch.Tensor, top_p: float, head: int = 512) -> torch.Tensor:
    """softmax(scaled) cut to the smallest set of most likely tokens whose mass reaches top_p (the top token
    always stays), renormalized.

    The nucleus almost always lies within the few hundred most likely tokens, so a top-k of `head` logits and
    one log-normalizer replace a softmax, a full sort and a division over the vocabulary; rows whose nucleus
    is wider fall back to the full sort.
    """
    head = min(head, scaled.shape[-1])
    head_logits, head_ids = scaled.topk(head, dim=-1)                        # [..., head], sorted descending
    head_probs = (head_logits - torch.logsumexp(scaled, dim=-1, keepdim=True)).exp()
    if not bool((head_probs.sum(-1) >= top_p).all()):
        head_probs, head_ids = torch.softmax(scaled, dim=-1).sort(dim=-1, descending=True)
    mass_before = head_probs.cumsum(-1) - head_probs                         # mass of strictly more likely tokens
    head_probs = head_probs.masked_fill(mass_before >= top_p, 0.0)
    head_probs = head_probs / head_probs.sum(-1, keepdim=True)
    return torch.zeros(scaled.shape, device=scaled.device).scatter_(-1, head_ids, head_probs)


def sample(probs: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    """One token per distribution: [..., V] -> [...], by inverse-CDF sampling.

    A uniform draw is located in the cumulative sum (torch.multinomial is several times slower on a
    150k-token vocabulary); with `right=True` a token of probability 0 can never be returned.
    """
    flat = probs.reshape(-1, probs.shape[-1]).float()                          # [N, V]
    cumulative = flat.cumsum(-1)                                               # [N, V]
    uniform = torch.rand(flat.shape[0], 1, generator=generator, device=flat.device) * cumulative[:, -1:]
    tokens = torch.searchsorted(cumulative, uniform, right=True).clamp_(max=flat.shape[-1] - 1)  # [N, 1]
    return tokens.reshape(probs.shape[:-1])


def token_logprobs(logits: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """log p(token) under the model at temperature 1: logits [..., V], tokens [...] -> [...]."""
    chosen = logits.gather(-1, tokens[..., None]).squeeze(-1).float()
    return chosen - torch.logsumexp(logits.float(), dim=-1)
