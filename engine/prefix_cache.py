"""Prompt reuse across requests: the KV entries of recent prompts, kept within a memory bound (least recently used
out), and reading a prompt through them in chunks so that only the tokens after the longest cached prefix are computed.

Why it is exact: a causal model's KV entry at position i depends only on tokens 0..i, so the entries of a cached prompt
are the entries of any prompt that starts with the same tokens, up to where the two first differ. The rest is computed
as it would be without the cache (in chunks: each chunk attends to everything before it through the same cache), up
to floating-point rounding, which depends on a call's shape; so a seed gives the same tokens cached or not where the
layers compute alike whatever the call's size (fp32 tested), while w8a8 layers round a call of up to 64 token rows
(a short remainder) in integers and a larger one (a whole prompt's chunk) in bf16.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from engine.kv_cache import RaggedKVCache


@dataclass
class _Entry:
    keys: list[torch.Tensor]  # per layer [1, H_kv, n, D]
    values: list[torch.Tensor]  # per layer [1, H_kv, n, D]
    nbytes: int
    last_logits: torch.Tensor | None = None  # [1, V] after the entry's last token, when it was a whole prompt


class PrefixCache:
    """The KV entries of recent prompts of one model, by their token ids; at most `max_bytes` in all."""

    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self._entries: OrderedDict[tuple[int, ...], _Entry] = OrderedDict()  # oldest first

    @property
    def nbytes(self) -> int:
        return sum(e.nbytes for e in self._entries.values())

    def prompts(self) -> list[tuple[int, ...]]:
        """The token ids of the prompts held, the most recently used first."""
        return list(reversed(self._entries))

    def __len__(self) -> int:
        return len(self._entries)

    def longest_prefix(self, token_ids: list[int]) -> tuple[int, tuple[int, ...] | None]:
        """(tokens shared, the entry's key) of the entry that shares the longest prefix with token_ids; (0, None)."""
        best, best_key = 0, None
        wanted = tuple(token_ids)
        for key in self._entries:
            shared = len(os.path.commonprefix([key, wanted]))
            if shared > best:
                best, best_key = shared, key
        return best, best_key

    def load(self, key: tuple[int, ...], length: int, cache: RaggedKVCache) -> None:
        """Write the entry's first `length` positions into an empty batch-1 cache (and mark the entry recently used)."""
        entry = self._entries[key]
        self._entries.move_to_end(key)
        cache.preload([k[:, :, :length] for k in entry.keys], [v[:, :, :length] for v in entry.values])

    def last_logits(self, token_ids: list[int]) -> torch.Tensor | None:
        """The logits after exactly these tokens, when a whole prompt of them was read: the same request again
        then computes nothing, and samples what it sampled before (in any dtype)."""
        entry = self._entries.get(tuple(token_ids))
        return None if entry is None else entry.last_logits

    def store(self, token_ids: list[int], cache: RaggedKVCache, last_logits: torch.Tensor | None = None) -> None:
        """Keep the first len(token_ids) entries of row 0 of `cache` for these tokens (and the logits after them,
        for a whole prompt); entries it extends go."""
        if self.max_bytes <= 0 or not token_ids:
            return
        key = tuple(token_ids)
        for old in self._entries:
            if len(old) >= len(key) and old[: len(key)] == key:  # held already (a backspace): keep the longer one
                if old == key and last_logits is not None and self._entries[old].last_logits is None:
                    self._entries[old].last_logits = last_logits.clone()
                self._entries.move_to_end(old)
                return
        keys, values = cache.prefix(len(key))
        tensors = keys + values + ([last_logits] if last_logits is not None else [])
        entry = _Entry(
            keys,
            values,
            sum(t.numel() * t.element_size() for t in tensors),
            None if last_logits is None else last_logits.clone(),
        )
        if entry.nbytes > self.max_bytes:
            return
        for old in [k for k in self._entries if len(k) <= len(key) and key[: len(k)] == k]:
            del self._entries[old]  # a prefix of the new prompt: the new entry holds all of it
        self._entries[key] = entry
        while self.nbytes > self.max_bytes:
            self._entries.popitem(last=False)


@dataclass
class PromptReading:
    """How one prompt was read: tokens from the cache, tokens computed, and whether it was read to the end."""

    total: int
    cached: int = 0
    computed: int = 0
    forwards: int = 0
    done: bool = False
    last_logits: torch.Tensor | None = field(default=None, repr=False)  # [1, V] after the last prompt token

    @property
    def read(self) -> int:
        return self.cached + self.computed


def read_prompt(
    forward,
    model,
    cache: RaggedKVCache,
    prompt_ids: list[int],
    store: PrefixCache | None,
    chunk_tokens: int,
    should_go_on: Callable[[PromptReading], bool] = lambda reading: True,
) -> PromptReading:
    """Fill an empty batch-1 cache with the prompt's entries: the longest cached prefix is copied (at most all but
    the last token, whose logits are needed), the rest computed `chunk_tokens` at a time. should_go_on(reading) is
    asked before each chunk (a deadline, a cancel, progress); what was read is stored either way, so a request cut
    short still speeds up the next one."""
    reading = PromptReading(total=len(prompt_ids))
    device = cache.lengths.device
    if store is not None:
        shared, key = store.longest_prefix(prompt_ids)
        reading.last_logits = store.last_logits(prompt_ids)  # the same prompt, read whole before: nothing to compute
        reading.cached = shared if reading.last_logits is not None else min(shared, len(prompt_ids) - 1)
        if reading.cached > 0:
            store.load(key, reading.cached, cache)
    while reading.read < reading.total:
        if not should_go_on(reading):
            break
        chunk = prompt_ids[reading.read : reading.read + chunk_tokens]
        is_last = reading.read + len(chunk) == reading.total
        logits = forward(model, cache, torch.tensor([chunk], device=device), keep_last=1)  # [1, 1, V]
        cache.commit(torch.tensor([len(chunk)], device=device))
        reading.computed += len(chunk)
        reading.forwards += 1
        if is_last:
            reading.last_logits = logits[:, -1]
    reading.done = reading.read == reading.total
    if store is not None and reading.computed > 0:
        store.store(prompt_ids[: reading.read], cache, reading.last_logits if reading.done else None)
    return reading
