"""The ragged-row KV cache: one position-addressed buffer per layer, each row with its own length."""

from __future__ import annotations

from dataclasses import dataclass

import torch

PACKED_ROWS = "packed_rows"  # the forward keyword a packed call's PackedRows travels by (to the cache, to attention)


class UnpackedCall(RuntimeError):
    """A forward's rows do not match the cache's and no PackedRows came with them: a packed call through a model
    whose attention does not hand the cache its forward's keywords (raised at the first layer, before any write)."""


@dataclass(frozen=True)
class PackedRows:
    """The new tokens of a ragged batch laid end to end, row 0's q_0 tokens first: one call of N = sum(q_b) token
    rows instead of B x max(q_b), so a verify pass pays the linear layers only for the tokens it checks (a third
    less time when one row of eight drafts: docs/ENGINE.md)."""

    rows: torch.Tensor  # [N] the batch row of each token
    offsets: torch.Tensor  # [N] its place among its row's new tokens, 0..q_b-1
    width: int  # max(q_b): the query length per row attention pads back to

    @staticmethod
    def of(counts: torch.Tensor) -> PackedRows:
        """counts: [B] new tokens per row, each >= 1."""
        rows = torch.repeat_interleave(torch.arange(len(counts), device=counts.device), counts)  # [N]
        starts = torch.cumsum(counts, 0) - counts  # [B]
        offsets = torch.arange(len(rows), device=counts.device) - starts[rows]  # [N]
        return PackedRows(rows, offsets, int(counts.max()))

    def pack(self, padded: torch.Tensor) -> torch.Tensor:
        """[B, width or more, ...] -> [N, ...]: each row's first q_b entries, end to end."""
        return padded[self.rows, self.offsets]

    def pad(self, packed: torch.Tensor, batch: int, width: int | None = None) -> torch.Tensor:
        """[N, ...] -> [B, width, ...] (zeros past a row's q_b)."""
        out = packed.new_zeros(batch, width or self.width, *packed.shape[1:])
        out[self.rows, self.offsets] = packed
        return out


class RaggedKVCache:
    """Key/value cache for a batch whose rows hold different numbers of tokens.

    Why it is correct: row b owns `lengths[b]` valid entries at positions 0..lengths[b]-1 of every layer's
    buffer. A forward of q tokens writes row b's new entries at positions lengths[b]..lengths[b]+q-1 (the
    same positions its rotary position ids use), and `attention_mask(q)` lets query j of row b see exactly
    positions < lengths[b] + j + 1. `commit(n_kept)` then advances each row by the entries it keeps (the
    verified prefix); entries past that are stale, but no mask ever reaches them and the next write
    overwrites them. So a rejected draft needs no rollback, and rows of different lengths need no padding
    tokens, no holes and no copies. The same class serves the target and the draft model.

    A packed call (PackedRows: row b's q_b tokens end to end, batch 1) writes token i at row rows[i], position
    lengths[rows[i]] + offsets[i], as row b's own call of q_b tokens would, and its mask is `attention_mask(width)`.
    """

    def __init__(self, n_layers: int, batch_size: int, device: torch.device, capacity: int = 256):
        """capacity: positions per row; the engine passes the most a request can need (prompt + new tokens + the
        longest draft + 1), so each layer's buffers are allocated once, at their first write. Should a caller
        pass less, a buffer doubles when a write needs more."""
        self.keys: list[torch.Tensor | None] = [None] * n_layers  # each [B, H_kv, capacity, D]
        self.values: list[torch.Tensor | None] = [None] * n_layers  # each [B, H_kv, capacity, D]
        self.lengths = torch.zeros(batch_size, dtype=torch.long, device=device)  # [B] valid entries per row
        self.capacity = capacity

    # --- the interface transformers' attention layers call -------------------------------------------
    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, layer_idx: int, *args, **kwargs):
        """Write q new entries per row at that row's own positions; return the visible span of the buffer.
        transformers passes the forward's keywords on as `kwargs`: a packed call's PackedRows among them."""
        packed = (kwargs.get("kwargs") or {}).get(PACKED_ROWS)
        if packed is not None:
            return self._update_packed(key_states, value_states, layer_idx, packed)
        batch, heads, q_len, head_dim = key_states.shape  # [B, H_kv, q, D]
        if batch != self.lengths.shape[0]:
            raise UnpackedCall(
                f"a forward of {batch} rows reached a cache of {self.lengths.shape[0]}: a packed call "
                f"must pass its PackedRows as {PACKED_ROWS!r}"
            )
        end = int(self.lengths.max()) + q_len
        self._ensure_capacity(layer_idx, key_states, end)
        if bool((self.lengths == self.lengths[0]).all()):
            start = int(self.lengths[0])
            self.keys[layer_idx][:, :, start : start + q_len] = key_states
            self.values[layer_idx][:, :, start : start + q_len] = value_states
        else:
            rows = torch.arange(batch, device=key_states.device)[:, None]  # [B, 1]
            positions = self.lengths[:, None] + torch.arange(q_len, device=key_states.device)  # [B, q]
            self.keys[layer_idx][rows, :, positions] = key_states.transpose(1, 2)  # [B, q, H_kv, D]
            self.values[layer_idx][rows, :, positions] = value_states.transpose(1, 2)
        return self.keys[layer_idx][:, :, :end], self.values[layer_idx][:, :, :end]

    def _update_packed(self, key_states: torch.Tensor, value_states: torch.Tensor, layer_idx: int, packed: PackedRows):
        """key/value states [1, H_kv, N, D] of a packed call: token i goes to row rows[i], position
        lengths[rows[i]] + offsets[i]; the span returned matches attention_mask(packed.width)."""
        end = int(self.lengths.max()) + packed.width
        self._ensure_capacity(layer_idx, key_states.expand(len(self.lengths), -1, -1, -1), end)
        positions = self.lengths[packed.rows] + packed.offsets  # [N]
        self.keys[layer_idx][packed.rows, :, positions] = key_states[0].transpose(0, 1)  # [N, H_kv, D]
        self.values[layer_idx][packed.rows, :, positions] = value_states[0].transpose(0, 1)
        return self.keys[layer_idx][:, :, :end], self.values[layer_idx][:, :, :end]

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return int(self.lengths.max())

    # --- the interface the engine uses ---------------------------------------------------------------
    def attention_mask(self, q_len: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """[B, 1, q, max_len + q] additive mask: query j of row b sees positions < lengths[b] + j + 1 (0 there, the
        dtype's minimum elsewhere). Additive, because eager attention adds the mask it is given (a boolean mask
        would add 1 to the visible scores) and SDPA reads an additive mask the same way."""
        end = int(self.lengths.max()) + q_len
        positions = torch.arange(end, device=self.lengths.device)  # [T]
        limit = self.lengths[:, None] + torch.arange(1, q_len + 1, device=self.lengths.device)  # [B, q]
        visible = (positions[None, None, :] < limit[:, :, None])[:, None]  # [B, 1, q, T]
        return torch.zeros(visible.shape, dtype=dtype, device=visible.device).masked_fill_(
            ~visible, torch.finfo(dtype).min
        )

    def position_ids(self, q_len: int) -> torch.Tensor:
        """[B, q] positions of the next q tokens of each row."""
        return self.lengths[:, None] + torch.arange(q_len, device=self.lengths.device)

    def commit(self, n_kept: torch.Tensor) -> None:
        """Advance each row by the entries it keeps from the last forward ([B] counts)."""
        self.lengths = self.lengths + n_kept

    def set_lengths(self, lengths: torch.Tensor) -> None:
        """Declare how many entries of each row are valid (shorter than now is always safe)."""
        self.lengths = lengths.clone()

    def preload(self, keys: list[torch.Tensor], values: list[torch.Tensor]) -> None:
        """Fill an empty batch-1 cache with n entries per layer (each [1, H_kv, n, D]): the prompt's first n tokens."""
        length = keys[0].shape[2]
        for layer_idx, (key, value) in enumerate(zip(keys, values)):
            self._ensure_capacity(layer_idx, key, length)
            self.keys[layer_idx][:, :, :length] = key
            self.values[layer_idx][:, :, :length] = value
        self.lengths = torch.full_like(self.lengths, length)

    def prefix(self, length: int) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """Copies of row 0's first `length` entries of every layer (each [1, H_kv, length, D])."""
        return ([k[:1, :, :length].clone() for k in self.keys], [v[:1, :, :length].clone() for v in self.values])

    def select_rows(self, rows: torch.Tensor) -> None:
        """Keep (or repeat) the given rows, in that order: drops finished rows, or fans one prompt out to k rows."""
        self.keys = [None if k is None else k.index_select(0, rows) for k in self.keys]
        self.values = [None if v is None else v.index_select(0, rows) for v in self.values]
        self.lengths = self.lengths.index_select(0, rows)

    def _ensure_capacity(self, layer_idx: int, like: torch.Tensor, needed: int) -> None:
        buffer = self.keys[layer_idx]
        if buffer is not None and buffer.shape[2] >= needed:
            return
        capacity = max(self.capacity, needed)
        if buffer is not None:
            capacity = max(capacity, 2 * buffer.shape[2])
        batch, heads, _, head_dim = like.shape
        for store in (self.keys, self.values):
            grown = like.new_zeros(batch, heads, capacity, head_dim)
            if store[layer_idx] is not None:
                old = store[layer_idx]
                grown[:, :, : old.shape[2]] = old
            store[layer_idx] = grown
