"""Drafters behind one small protocol: propose speculative tokens for every active row (they learn nothing back:
the model drafter re-aligns its cache and the lookups index the committed tokens at their next proposal; the draft
length and the acceptance estimates live in the controller)."""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Protocol

import torch

from engine.kv_cache import RaggedKVCache
from engine.prefix_cache import PrefixCache, read_prompt
from engine.sampling import PositionUniforms, draw, sample, warp_probs
from engine.speculation.choices import ACCEPTANCE_CHOICES


@dataclass
class DraftContext:
    """What a drafter may look at when proposing."""

    prompt_ids: list[int]
    # committed tokens of every row (all k, by original row index); the last is not yet cached
    generated: list[list[int]]
    active_rows: list[int]  # original indices of the rows in the current batch, in batch order
    max_len: int  # propose at most this many tokens per row
    deadline: float  # perf_counter time after which a drafter must stop and return what it has
    round_number: int = 1  # the engine's draft/verify round (1: the first after the prompt's prefill)


@dataclass
class Draft:
    """Proposed tokens of the current batch."""

    tokens: torch.Tensor  # [B, K] draft tokens (entries past a row's length are padding)
    lengths: torch.Tensor  # [B] tokens really proposed per row, 0..K
    probs: torch.Tensor | None = None  # [B, K, V] the drafter's warped distributions; None: point masses
    # what proposing it cost (model-free drafts cost nothing): model forwards of the proposal itself (the
    # controller's per-pass cost), and one-offs on the way (a prompt's prefill, catching up after sitting out)
    passes: int = 0
    setup_passes: int = 0
    setup_s: float = 0.0

    @staticmethod
    def empty(batch: int, device: torch.device) -> Draft:
        return Draft(
            torch.zeros(batch, 0, dtype=torch.long, device=device), torch.zeros(batch, dtype=torch.long, device=device)
        )


def merge_drafts(lookup: Draft, model: Draft) -> Draft:
    """Rows where the lookup found something take its tokens; the other rows keep the model's draft. When the
    model's draft carries distributions, the looked-up tokens get one-hot ones, which the acceptance rule
    treats exactly like point masses."""
    if model.tokens.shape[1] == 0:
        return lookup
    batch = model.tokens.shape[0]
    width = max(lookup.tokens.shape[1], model.tokens.shape[1])
    device = model.tokens.device
    use_lookup = (lookup.lengths > 0).to(device)  # [B]
    lookup_tokens = torch.zeros(batch, width, dtype=torch.long, device=device)
    lookup_tokens[:, : lookup.tokens.shape[1]] = lookup.tokens.to(device)  # [B, K]
    model_tokens = torch.zeros_like(lookup_tokens)
    model_tokens[:, : model.tokens.shape[1]] = model.tokens  # [B, K]
    tokens = torch.where(use_lookup[:, None], lookup_tokens, model_tokens)
    lengths = torch.where(use_lookup, lookup.lengths.to(device), model.lengths)
    cost = {"passes": model.passes, "setup_passes": model.setup_passes, "setup_s": model.setup_s}
    if model.probs is None:
        return Draft(tokens, lengths, **cost)
    model_probs = model.probs.new_zeros(batch, width, model.probs.shape[-1])
    model_probs[:, : model.probs.shape[1]] = model.probs  # [B, K, V]
    lookup_probs = torch.zeros_like(model_probs).scatter_(-1, lookup_tokens[..., None], 1.0)  # [B, K, V]
    return Draft(tokens, lengths, torch.where(use_lookup[:, None, None], lookup_probs, model_probs), **cost)


class Drafter(Protocol):
    """What the engine reads of every drafter; each Draft says what it cost."""

    name: str  # shown in stats and logs
    uses_model: bool  # True when proposing costs model forward passes

    def propose(self, context: DraftContext) -> Draft: ...


class ModelDrafter:
    """A small model of the target's family samples the draft autoregressively, with its own ragged cache.

    Under the "coupled" rule (given the request's PositionUniforms), each draft token is drawn with the number
    the target will use at that position and the draft is a point mass; under "residual" it is drawn with
    the generator and carries its distributions for the min(1, p/q) test.

    Nothing runs before the first proposal: a request whose controller never picks the draft model pays
    nothing for it. The drafter remembers which token it fed at every cached position of every row (`fed`),
    so whatever happened since its last proposal (drafts rejected, steps it sat out, rows served by another
    drafter) each row feeds exactly the history tokens its own cache lacks, however many that is.
    """

    name = "model"
    uses_model = True

    def __init__(
        self,
        model,
        prompt_ids: list[int],
        temperature: float,
        top_p: float,
        generator: torch.Generator | None,
        forward,
        min_confidence: float = 0.0,
        check_cache: bool = False,
        capacity: int = 256,
        acceptance: str = "residual",
        uniforms: PositionUniforms | None = None,
        prefix_cache: PrefixCache | None = None,
        chunk_tokens: int = 512,
    ):
        self.capacity = capacity  # cache positions per row the request can need (allocated at once)
        self.model, self.temperature, self.top_p, self.generator = model, temperature, top_p, generator
        if acceptance not in ACCEPTANCE_CHOICES or (acceptance == "coupled" and uniforms is None):
            raise ValueError(
                f"acceptance={acceptance!r}: choose one of {', '.join(ACCEPTANCE_CHOICES)}, "
                "and give 'coupled' the request's uniforms"
            )
        self.coupled = acceptance == "coupled"  # draw each token with `uniforms` (else with the generator)
        self.uniforms = uniforms
        self.prefix_cache, self.chunk_tokens = prefix_cache, chunk_tokens  # recent prompts' KV of the draft model
        self.min_confidence = min_confidence  # stop drafting once every row's newest draft token is less likely
        self.check_cache = check_cache  # verify the cache against the histories at every proposal (tests)
        self._forward = forward  # (model, cache, input_ids [B, q], keep_last) -> logits [B, q, V]
        self.prompt_ids = list(prompt_ids)
        self.device = next(model.parameters()).device
        self.cache: RaggedKVCache | None = None  # built by the first proposal
        self.rows: list[int] = []
        self.fed: list[list[int]] = []  # per row: the token behind each cached position
        self.last_round = 0  # the round of its last proposal (0: the target's prefill)
        self.passes = 0  # draft forwards of proposals so far (each Draft carries its own share)
        # one-offs, not a per-pass cost: the prompt's prefill, and catching up on the tokens of rounds the drafter
        # sat out (a catch-up of many rounds costs several one-token passes: docs/ENGINE.md)
        self.setup_passes, self.setup_s = 0, 0.0

    def propose(self, context: DraftContext) -> Draft:
        """The draft of the active rows, carrying what it cost (its passes and one-offs)."""
        passes, setup_passes, setup_s = self.passes, self.setup_passes, self.setup_s
        draft = self._propose(context)
        draft.passes, draft.setup_passes = self.passes - passes, self.setup_passes - setup_passes
        draft.setup_s = self.setup_s - setup_s
        return draft

    def _propose(self, context: DraftContext) -> Draft:
        batch = len(context.active_rows)
        if time.perf_counter() >= context.deadline or context.max_len < 1:
            return Draft.empty(batch, self.device)
        if self.cache is None:
            self._prefill(context.active_rows)
            if time.perf_counter() >= context.deadline:  # at most one forward past the deadline
                return Draft.empty(batch, self.device)
        self._follow_rows(context.active_rows)
        histories = [context.prompt_ids + context.generated[r] for r in context.active_rows]
        logits = self._catch_up(histories, sat_out=context.round_number > self.last_round + 1)  # [B, V]
        self.last_round = context.round_number
        tokens, probs = [], []
        coupled = self.coupled
        while True:
            if coupled:  # a point mass: drawn with the target's number, its distributions are not needed
                draft_token = draw(logits, self.temperature, self.top_p, self._numbers(context, len(tokens)))  # [B]
            else:
                probs.append(warp_probs(logits, self.temperature, self.top_p))  # [B, V]
                draft_token = sample(probs[-1], self.generator)  # [B]
            tokens.append(draft_token)
            if (
                len(tokens) == context.max_len
                or self._unsure(logits, draft_token)
                or time.perf_counter() >= context.deadline
            ):
                break  # the last draft token is never fed
            logits = self._feed(draft_token[:, None])[:, -1]  # [B, V]
            for fed, token in zip(self.fed, draft_token.tolist()):
                fed.append(token)
        draft_tokens = torch.stack(tokens, dim=1)  # [B, K]
        return Draft(
            draft_tokens,
            torch.full((batch,), len(tokens), dtype=torch.long, device=self.device),
            None if coupled else torch.stack(probs, dim=1),
        )

    def _prefill(self, active_rows: list[int]) -> None:
        """The prompt once (batch 1; a recent request's prefix from the prefix cache), fanned out to the active rows."""
        started = time.perf_counter()
        self.cache = RaggedKVCache(self.model.config.num_hidden_layers, 1, self.device, self.capacity)
        reading = read_prompt(
            self._forward, self.model, self.cache, self.prompt_ids, self.prefix_cache, self.chunk_tokens
        )
        self._count_one_off(started, reading.forwards)
        self.cache.select_rows(torch.zeros(len(active_rows), dtype=torch.long, device=self.device))
        self.rows = list(active_rows)
        self.fed = [list(self.prompt_ids) for _ in active_rows]

    def _catch_up(self, histories: list[list[int]], sat_out: bool) -> torch.Tensor:
        """Feed every row the tokens of its history its cache lacks (at least the newest one): rows lacking
        fewer are padded on the right, and the padding's entries lie past the row's committed length, where no
        mask reaches them and the next write overwrites them. Returns each row's next-token logits [B, V]. After
        rounds the drafter sat out (`sat_out`) the feed is a one-off, not a draft pass."""
        kept = [_common_prefix(f, h) for f, h in zip(self.fed, histories)]  # valid cached entries per row
        feeds = [h[n:] for n, h in zip(kept, histories)]  # 1.. tokens per row
        width = max(len(f) for f in feeds)
        step_input = torch.tensor([f + [f[-1]] * (width - len(f)) for f in feeds], device=self.device)  # [B, W]
        newest = torch.tensor([len(f) - 1 for f in feeds], device=self.device)  # [B]
        columns = torch.unique(newest)  # [U] sorted columns holding logits
        self.cache.set_lengths(torch.tensor(kept, device=self.device))
        started = time.perf_counter()
        logits = self._forward(self.model, self.cache, step_input, keep_last=columns)  # [B, U, V]
        if sat_out:
            self._count_one_off(started)
        else:
            self.passes += 1
        self.cache.commit(newest + 1)
        self.fed = [list(h) for h in histories]
        if self.check_cache:
            self._check(histories)
        return logits[torch.arange(len(feeds), device=self.device), torch.searchsorted(columns, newest)]

    def _count_one_off(self, started: float, passes: int = 1) -> None:
        """Passes that are not draft passes (prefill, catch-up), begun at perf_counter time `started`."""
        self.setup_passes += passes
        self.setup_s += time.perf_counter() - started

    def _feed(self, step_input: torch.Tensor) -> torch.Tensor:
        """One token per row: [B, 1] -> logits [B, 1, V]."""
        logits = self._forward(self.model, self.cache, step_input, keep_last=1)
        self.passes += 1
        self.cache.commit(torch.ones_like(self.cache.lengths))
        return logits

    def _check(self, histories: list[list[int]]) -> None:
        """Raise AssertionError when the cache does not hold exactly every row's history."""
        lengths = self.cache.lengths.tolist()
        for row, (fed, history, length) in enumerate(zip(self.fed, histories, lengths)):
            if fed != history or length != len(history):
                raise AssertionError(
                    f"draft cache of row {self.rows[row]} holds {length} entries for a history of "
                    f"{len(history)} tokens (fed {len(fed)}, agreeing {fed == history})"
                )

    def _numbers(self, context: DraftContext, step: int) -> torch.Tensor:
        """[B] the numbers the target will draw draft token `step` of every active row with."""
        positions = [len(context.generated[r]) + step for r in context.active_rows]
        return self.uniforms.at(context.active_rows, positions, 1)[:, 0]

    def _unsure(self, logits: torch.Tensor, draft_token: torch.Tensor) -> bool:
        """Every row's newest draft token has a draft probability (at temperature >= 1, so greedy drafts are
        judged too) below min_confidence: later tokens would likely be wasted (as transformers' assisted
        generation does with its assistant confidence threshold)."""
        if self.min_confidence <= 0:
            return False
        confidence = torch.softmax(logits.float() / max(self.temperature, 1.0), dim=-1)
        return bool((confidence.gather(-1, draft_token[:, None]) < self.min_confidence).all())

    def _follow_rows(self, active_rows: list[int]) -> None:
        if active_rows != self.rows:
            keep = [self.rows.index(r) for r in active_rows]
            self.cache.select_rows(torch.tensor(keep, device=self.device))
            self.fed = [self.fed[i] for i in keep]
            self.rows = list(active_rows)


def _common_prefix(fed: list[int], history: list[int]) -> int:
    """How many leading tokens agree (the cache entries that are still valid); at most len(history) - 1, so
    the newest token is always fed."""
    limit = min(len(fed), len(history) - 1)
    for i in range(limit - 1, -1, -1):  # histories grow (or are cut back for a tail): mismatches sit near the end
        if fed[i] == history[i] and fed[: i + 1] == history[: i + 1]:
            return i + 1
    return 0


class LookupDrafter:
    """Model-free drafts: find each row's recent tokens earlier in the prompt, its own past or its siblings, and
    propose the continuation most of the matches agree on (longest n-gram match first, n = max_ngram..1)."""

    uses_model = False

    def __init__(
        self, name: str, use_prompt: bool, use_own: bool, use_siblings: bool, max_ngram: int = 4, min_votes: int = 1
    ):
        self.name, self.use_prompt, self.use_own, self.use_siblings = name, use_prompt, use_own, use_siblings
        self.max_ngram, self.min_votes = max_ngram, min_votes
        # n -> n-gram -> [(source, end)] where source -1 is the prompt, r >= 0 is row r's generated tokens
        self._index: dict[int, dict[tuple, list[tuple[int, int]]]] = defaultdict(lambda: defaultdict(list))
        self._indexed: dict[int, int] = {}  # source -> tokens indexed so far
        self._last: dict[int, int | None] = {}  # source -> the last token indexed (a changed one: it was cut back)

    def propose(self, context: DraftContext) -> Draft:
        self._index_new_tokens(context)
        proposals = [self._propose_row(context, row) for row in context.active_rows]
        width = max((len(p) for p in proposals), default=0)
        tokens = torch.zeros(len(proposals), width, dtype=torch.long)
        for i, proposal in enumerate(proposals):
            tokens[i, : len(proposal)] = torch.tensor(proposal, dtype=torch.long)
        return Draft(tokens, torch.tensor([len(p) for p in proposals], dtype=torch.long))

    def _source_tokens(self, context: DraftContext, source: int) -> list[int]:
        return context.prompt_ids if source < 0 else context.generated[source]

    def _index_new_tokens(self, context: DraftContext) -> None:
        sources = ([-1] if self.use_prompt else []) + list(range(len(context.generated)))
        for source in sources:
            tokens = self._source_tokens(context, source)
            start = self._indexed.get(source, 0)
            if start and (start > len(tokens) or tokens[start - 1] != self._last[source]):
                start = self._forget(source)  # its history was cut back (a row's tail): indexed again
            for end in range(start + 1, len(tokens) + 1):  # n-grams ending at start are indexed
                for n in range(1, min(self.max_ngram, end) + 1):
                    self._index[n][tuple(tokens[end - n : end])].append((source, end))
            self._indexed[source] = len(tokens)
            self._last[source] = tokens[-1] if tokens else None

    def _forget(self, source: int) -> int:
        """Drop every n-gram of `source` from the index; 0, where its indexing starts again."""
        for grams in self._index.values():
            for key in list(grams):
                grams[key] = [hit for hit in grams[key] if hit[0] != source]
        return 0

    def _allowed(self, source: int, row: int) -> bool:
        if source < 0:
            return self.use_prompt
        return self.use_own if source == row else self.use_siblings

    def _propose_row(self, context: DraftContext, row: int) -> list[int]:
        history = context.prompt_ids + context.generated[row]
        for n in range(min(self.max_ngram, len(history)), 0, -1):
            matches = self._index[n].get(tuple(history[-n:]), ())
            continuations = [
                self._source_tokens(context, s)[end : end + context.max_len]
                for s, end in matches
                if self._allowed(s, row)
            ]
            continuations = [c for c in continuations if c]
            if len(continuations) >= self.min_votes:
                return majority_continuation(continuations)
        return []


def majority_continuation(continuations: list[list[int]]) -> list[int]:
    """Walk the continuations token by token, keeping at each step the most common next token."""
    proposal, remaining = [], continuations
    depth = 0
    while remaining:
        votes = Counter(c[depth] for c in remaining if len(c) > depth)
        if not votes:
            break
        token, _ = votes.most_common(1)[0]
        proposal.append(token)
        remaining = [c for c in remaining if len(c) > depth and c[depth] == token]
        depth += 1
    return proposal


def prompt_lookup_drafter() -> LookupDrafter:
    """Look up in the prompt and the row's own past."""
    return LookupDrafter("prompt", use_prompt=True, use_own=True, use_siblings=False)


def sibling_drafter() -> LookupDrafter:
    """Look up in the prompt, the row's own past and the other rows of the batch."""
    return LookupDrafter("sibling", use_prompt=True, use_own=True, use_siblings=True)
