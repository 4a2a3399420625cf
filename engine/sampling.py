"""Turning logits into sampling distributions (temperature, top-p) and drawing tokens from them."""

from __future__ import annotations

import hashlib

import torch

HEAD = 512  # the most likely tokens a top-p nucleus is looked for among before the whole vocabulary is sorted
BLOCK = 64  # consecutive tokens whose largest logit stands for them when the head is looked for
BLOCKS = 128  # the blocks of largest logits whose tokens are the head's candidates


def warp_probs(logits: torch.Tensor, temperature: float, top_p: float) -> torch.Tensor:
    """Probabilities the sampler draws from, [..., V]; temperature 0 gives a one-hot argmax (greedy).

    The same warp is applied to target and draft distributions, so speculative sampling stays exact
    with respect to the distribution regular sampling would use.
    """
    if temperature == 0:
        flat = logits.reshape(-1, logits.shape[-1])
        one_hot = torch.zeros(flat.shape, device=logits.device).scatter_(-1, argmax(flat)[:, None], 1.0)
        return one_hot.reshape(logits.shape)
    if top_p >= 1.0:
        return torch.softmax(logits.float() / temperature, dim=-1)
    flat = logits.reshape(-1, logits.shape[-1]).float()  # [N, V]
    probs, ids, wide = _nucleus_head(flat, temperature, top_p)
    warped = torch.zeros(flat.shape, device=flat.device).scatter_(-1, ids, probs)
    if bool(wide.any()):
        warped[wide] = _whole_nucleus(flat[wide], temperature, top_p)
    return warped.reshape(logits.shape)


def draw(logits: torch.Tensor, temperature: float, top_p: float, uniform: torch.Tensor) -> torch.Tensor:
    """inverse_cdf(warp_probs(logits, temperature, top_p), uniform) without the [N, V] distributions: logits
    [N, V], uniform [N] -> tokens [N].

    Greedy is the argmax. Under top-p the cumulative sum runs over the nucleus's tokens in vocabulary order
    (the order inverse_cdf walks the vocabulary in, whose other entries are 0), so a number picks the same
    token as on the whole distribution (bit for bit on the CPU, whose cumulative sum adds in order; a GPU's
    parallel scan may round the two sums apart at an interval's edge). Rows whose nucleus is wider than the head,
    and top_p 1, take the whole distribution.
    """
    if temperature == 0:
        return argmax(logits)
    flat = logits.float()
    if top_p >= 1.0:
        return inverse_cdf(torch.softmax(flat / temperature, dim=-1), uniform)
    probs, ids, wide = _nucleus_head(flat, temperature, top_p)
    ids, order = ids.sort(dim=-1)  # vocabulary order
    tokens = ids.gather(-1, inverse_cdf(probs.gather(-1, order), uniform)[:, None]).squeeze(-1)  # [N]
    if bool(wide.any()):
        tokens[wide] = inverse_cdf(_whole_nucleus(flat[wide], temperature, top_p), uniform.to(flat.device)[wide])
    return tokens


def argmax(logits: torch.Tensor) -> torch.Tensor:
    """logits.argmax(-1) for [N, V] (the first of equal maxima), through the blocks' maxima: torch's argmax over a
    row is not vectorized (about 0.06 ms a row of 151,936 here) where its max is (0.005)."""
    rows, vocabulary = logits.shape
    blocks = vocabulary // BLOCK
    if blocks < 2:
        return logits.argmax(-1)
    maxima = _block_maxima(logits)  # [N, blocks]
    block = maxima.argmax(-1, keepdim=True)  # [N, 1]: the first block holding the row's largest block maximum
    ids = block * BLOCK + torch.arange(BLOCK, device=logits.device)  # [N, BLOCK]
    best = ids.gather(-1, logits.gather(-1, ids).argmax(-1, keepdim=True)).squeeze(-1)  # [N]
    if blocks * BLOCK == vocabulary:
        return best
    tail_values, tail_at = logits[:, blocks * BLOCK :].max(-1)  # the ids past the last whole block
    return torch.where(tail_values > maxima.gather(-1, block).squeeze(-1), tail_at + blocks * BLOCK, best)


def _nucleus_head(
    logits: torch.Tensor, temperature: float, top_p: float
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The nucleus of softmax(logits / temperature) over [N, V]: the smallest set of most likely tokens whose mass
    reaches top_p (the top token always stays), renormalized, as ([N, H] probabilities sorted descending, 0 past
    the nucleus; [N, H] their token ids; [N] rows whose nucleus does not fit in H tokens, to be taken whole).

    The nucleus almost always lies among the few hundred most likely tokens, and those lie in the few blocks of
    consecutive tokens with the largest maxima: every token above the largest maximum of a block left out is in
    a block taken, so the candidates above it are the vocabulary's most likely tokens. A row whose candidates
    fall short of top_p takes the top-k of its whole row. One log-normalizer over the vocabulary, no softmax or
    sort of it."""
    log_normalizer = _log_normalizer(logits, temperature)  # [N, 1]
    head_logits, head_ids = _head(logits)  # [N, H]
    probs = (head_logits / temperature - log_normalizer).exp()
    short = probs.sum(-1) < top_p  # [N]
    if bool(short.any()):
        head_logits, head_ids[short] = logits[short].topk(head_ids.shape[-1], dim=-1)
        probs[short] = (head_logits / temperature - log_normalizer[short]).exp()
    wide = probs.sum(-1) < top_p
    return _cut(probs, top_p), head_ids, wide


def _head(logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """[N, H] the largest logits of each row found among the blocks of largest maxima, descending, those not shown
    to be among the row's largest set to -inf; [N, H] their token ids."""
    rows, vocabulary = logits.shape
    blocks = vocabulary // BLOCK
    if blocks <= BLOCKS:
        return logits.topk(min(HEAD, vocabulary), dim=-1)
    maxima = _block_maxima(logits)  # [N, blocks]
    top_maxima, taken = maxima.topk(BLOCKS + 1, dim=-1)  # [N, BLOCKS + 1]
    within = torch.arange(BLOCK, device=logits.device)
    ids = (taken[:, :BLOCKS, None] * BLOCK + within).reshape(rows, -1)  # [N, BLOCKS * BLOCK]
    ids = torch.cat([ids, torch.arange(blocks * BLOCK, vocabulary, device=logits.device).expand(rows, -1)], dim=-1)
    candidates = logits.gather(-1, ids)
    candidates = candidates.masked_fill(candidates <= top_maxima[:, BLOCKS:], float("-inf"))  # not shown largest
    head_logits, at = candidates.topk(HEAD, dim=-1)
    return head_logits, ids.gather(-1, at)


def _block_maxima(logits: torch.Tensor) -> torch.Tensor:
    """[N, V // BLOCK] the largest logit of each whole block of BLOCK consecutive ids, for logits [N, V] (the ids
    past the last whole block belong to none)."""
    rows, vocabulary = logits.shape
    blocks = vocabulary // BLOCK
    return logits[:, : blocks * BLOCK].reshape(rows, blocks, BLOCK).amax(-1)


def _log_normalizer(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """[N, 1] log sum exp(logits / temperature) over each row."""
    top = logits.amax(-1, keepdim=True)
    shifted = torch.sub(logits, top) if temperature == 1.0 else torch.sub(logits, top).mul_(1.0 / temperature)
    return shifted.exp_().sum(-1, keepdim=True).log_() + top / temperature


def _whole_nucleus(logits: torch.Tensor, temperature: float, top_p: float) -> torch.Tensor:
    """[n, V] the nucleus distribution of rows whose nucleus is wider than the head: the whole row sorted."""
    probs, ids = torch.softmax(logits / temperature, dim=-1).sort(dim=-1, descending=True)
    return torch.zeros(logits.shape, device=logits.device).scatter_(-1, ids, _cut(probs, top_p))


def _cut(sorted_probs: torch.Tensor, top_p: float) -> torch.Tensor:
    """Probabilities sorted descending [..., n] with the tokens past the nucleus set to 0, renormalized."""
    mass_before = sorted_probs.cumsum(-1) - sorted_probs  # mass of strictly more likely tokens
    kept = sorted_probs.masked_fill(mass_before >= top_p, 0.0)
    return kept / kept.sum(-1, keepdim=True)


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
    return chosen - _log_normalizer(logits.float(), 1.0).squeeze(-1)
