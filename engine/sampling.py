"""Turning logits into sampling distributions (temperature, top-p) and drawing tokens from them."""

from __future__ import annotations

import hashlib

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
    head_logits, head_ids = scaled.topk(head, dim=-1)  # [..., head], sorted descending
    head_probs = (head_logits - torch.logsumexp(scaled, dim=-1, keepdim=True)).exp()
    if not bool((head_probs.sum(-1) >= top_p).all()):
        head_probs, head_ids = torch.softmax(scaled, dim=-1).sort(dim=-1, descending=True)
    mass_before = head_probs.cumsum(-1) - head_probs  # mass of strictly more likely tokens
    head_probs = head_probs.masked_fill(mass_before >= top_p, 0.0)
    head_probs = head_probs / head_probs.sum(-1, keepdim=True)
    return torch.zeros(scaled.shape, device=scaled.device).scatter_(-1, head_ids, head_probs)


def sample(probs: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    """One token per distribution: [..., V] -> [...], with fresh uniform draws from `generator`."""
    uniform = torch.rand(probs.shape[:-1], generator=generator, device=probs.device)
    return inverse_cdf(probs, uniform)


def inverse_cdf(probs: torch.Tensor, uniform: torch.Tensor) -> torch.Tensor:
    """The token whose interval of the cumulative distribution (in vocabulary order) holds the uniform number:
    probs [..., V], uniform [...] in [0, 1) -> tokens [...].

    Faster than torch.multinomial on a 150k-token vocabulary, and a function of (probs, uniform): the same
    number gives the same token, whichever step computed the distribution. With `right=True` a token of
    probability 0 can never be returned.
    """
    flat = probs.reshape(-1, probs.shape[-1]).float()  # [N, V]
    cumulative = flat.cumsum(-1)  # [N, V]
    scaled = uniform.reshape(-1, 1).to(flat.device, torch.float32) * cumulative[:, -1:]
    tokens = torch.searchsorted(cumulative, scaled, right=True).clamp_(max=flat.shape[-1] - 1)  # [N, 1]
    return tokens.reshape(probs.shape[:-1])


class PositionUniforms:
    """The uniform numbers of one request, keyed by (row, generated position) rather than by order of use.

    The token at position t of row r is always drawn with the same number, whether it came from a plain step,
    a verified draft, or a bonus token, at any batch size or draft length: so a seed gives the same samples
    whatever the drafter and the cost model chose, and row r's samples do not depend on k. Numbers come in
    chunks of 64 positions, each from a generator seeded by (seed, row, chunk).
    """

    CHUNK = 64

    def __init__(self, seed: int):
        self.seed = seed
        self._chunks: dict[tuple[int, int], torch.Tensor] = {}

    def at(self, rows: list[int], starts: list[int], width: int) -> torch.Tensor:
        """[len(rows), width]: row rows[i]'s numbers for positions starts[i] .. starts[i] + width - 1."""
        return (
            torch.stack([self._span(row, start, width) for row, start in zip(rows, starts)])
            if rows
            else torch.zeros(0, width)
        )

    def _span(self, row: int, start: int, width: int) -> torch.Tensor:
        first, last = start // self.CHUNK, (start + width - 1) // self.CHUNK if width else start // self.CHUNK
        joined = torch.cat([self._chunk(row, c) for c in range(first, last + 1)])
        offset = start - first * self.CHUNK
        return joined[offset : offset + width]

    def _chunk(self, row: int, chunk: int) -> torch.Tensor:
        key = (row, chunk)
        if key not in self._chunks:
            digest = hashlib.blake2b(f"{self.seed}/{row}/{chunk}".encode(), digest_size=8).digest()
            generator = torch.Generator().manual_seed(int.from_bytes(digest, "little") & (2**63 - 1))
            self._chunks[key] = torch.rand(self.CHUNK, generator=generator)
        return self._chunks[key]


def token_logprobs(logits: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """log p(token) under the model at temperature 1: logits [..., V], tokens [...] -> [...]."""
    chosen = logits.gather(-1, tokens[..., None]).squeeze(-1).float()
    return chosen - torch.logsumexp(logits.float(), dim=-1)
