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

    def clear(self) -> None:
        """Forget every entry (the next prompt is read cold)."""
        self._entries.clear()

    def longest_prefix(self, token_ids: list[int]) -> tuple[int, tuple[int, ...] | None]:
        """(tokens shared, the entry's key) of the entry that shares the longest prefix with token_ids; (0, None)."""
        best, best_key = 0, None
        wanted = tuple(token_ids)
        for key in self._entries:
            shared = len(os.path.commonprefix([key, wanted]))
            if shared > best:
                best, best_key = shared, key
        return best, best_key

    def moved_run(self, token_ids: list[int], beat: int) -> tuple[tuple[int, ...], int, int, int] | None:
        """(entry key, shared, start, length): the entry whose first `shared` tokens begin token_ids and which holds
        the next `length` tokens of token_ids further on, from `start` > shared (lines dropped before them: an
        editor's window moved forward), the most tokens in all, when that is more than `beat` (the exact prefix's
        tokens and the least gain worth it); None otherwise."""
        wanted = tuple(token_ids)
        best, best_total = None, beat
        for key in self._entries:
            shared = len(os.path.commonprefix([key, wanted]))
            needle = wanted[shared : shared + MOVED_PROBE]
            if len(needle) < MOVED_PROBE:
                continue
            start = shared + 1
            while (start := _find(key, needle, start)) >= 0:
                length = len(os.path.commonprefix([key[start:], wanted[shared:]]))
                if shared + length > best_total:
                    best, best_total = (key, shared, start, length), shared + length
                start += 1
        return best

    def load_moved(self, run: tuple[tuple[int, ...], int, int, int], cache: RaggedKVCache, shift_keys) -> None:
        """Write an entry's first `shared` positions, then its `length` positions from `start`, moved back to follow
        them (keys re-rotated by shift_keys), into an empty batch-1 cache. The moved entries were computed after the
        dropped tokens, not after what now precedes them: close to a cold read, not equal (measured in the editor
        benchmark, docs/MEASUREMENTS.md), and used only where the caller asks for it."""
        key, shared, start, length = run
        entry = self._entries[key]
        self._entries.move_to_end(key)
        shift = shared - start
        keys = [
            torch.cat([k[:, :, :shared], shift_keys(k[:, :, start : start + length], shift)], 2) for k in entry.keys
        ]
        values = [torch.cat([v[:, :, :shared], v[:, :, start : start + length]], 2) for v in entry.values]
        cache.preload(keys, values)

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


MOVED_PROBE = 16  # tokens of a prompt a moved run must begin with (where to look for it in an entry)


def _find(haystack: tuple[int, ...], needle: tuple[int, ...], start: int) -> int:
    """The first index >= start where needle occurs in haystack, or -1."""
    first = needle[0]
    for index in range(start, len(haystack) - len(needle) + 1):
        if haystack[index] == first and haystack[index : index + len(needle)] == needle:
            return index
    return -1


@dataclass
class PromptReading:
    """How one prompt was read: tokens from the cache, tokens computed, and whether it was read to the end."""

    total: int
    cached: int = 0
    computed: int = 0
    forwards: int = 0
    moved: int = 0  # of the cached tokens, those reused at another place than they were read at (moved_run)
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
    shift_keys: Callable[[torch.Tensor, int], torch.Tensor] | None = None,
    moved_at_least: int = 64,
) -> PromptReading:
    """Fill an empty batch-1 cache with the prompt's entries: the longest cached prefix is copied (at most all but
    the last token, whose logits are needed), the rest computed `chunk_tokens` at a time. should_go_on(reading) is
    asked before each chunk (a deadline, a cancel, progress); what was read is stored either way, so a request cut
    short still speeds up the next one. With shift_keys (attention.key_shifter), a run of tokens an entry holds
    further on is reused where it lands (PrefixCache.moved_run, at least `moved_at_least` more tokens than the exact
    prefix): approximate, for the editor's moving window only."""
    reading = PromptReading(total=len(prompt_ids))
    device = cache.lengths.device
    if store is not None:
        shared, key = store.longest_prefix(prompt_ids)
        reading.last_logits = store.last_logits(prompt_ids)  # the same prompt, read whole before: nothing to compute
        reading.cached = shared if reading.last_logits is not None else min(shared, len(prompt_ids) - 1)
        moved = None
        if shift_keys is not None and reading.last_logits is None:
            # the last token is computed (its logits); the exact prefix read above is what a moved run must beat
            moved = store.moved_run(prompt_ids[:-1], reading.cached + moved_at_least)
        if moved is not None:
            store.load_moved(moved, cache, shift_keys)
            reading.cached = reading.moved = moved[1] + moved[3]
        elif reading.cached > 0:
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
