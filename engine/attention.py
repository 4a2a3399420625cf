"""Attention for the engine's forwards: SDPA over the key/value heads themselves, for any number of query tokens.

Models with grouped-query attention (the bundled Qwen2.5 models: 12 query heads share 2 key/value heads in the 1.5B)
keep one key and value per group. For a single query token transformers folds the group's query heads into the query
length and attends over the shared heads; for more (a verify pass of K+1 tokens, a prompt's chunk) it copies every key
and value once per query head (`repeat_kv`) and attends over all of them, which nearly doubles a small verify pass
(docs/ENGINE.md). `packed_sdpa_forward` folds the query heads of a group into the query length for every q (query [B, H,
q, D] -> [B, H_kv, groups * q, D]; the additive mask, shared by the heads, tiled to match), which computes the same
attention without the copies.

The engine's forwards use it for a model loaded with `sdpa` (`packed_attention`, for the call only: the model
stays as it was loaded for everything else, transformers' own `generate` included).

It also serves a packed call (kv_cache.PackedRows: a ragged batch's tokens end to end, batch 1, so the linear
layers see only real tokens): the query is laid back out as [B, H, width, D], attended as above over each row's
own cache, and the outputs of the real tokens packed again. Attention is a small share of a step, though the
padded layout is not free (docs/ENGINE.md).
"""

from __future__ import annotations

import contextlib

import torch
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

from engine.kv_cache import PACKED_ROWS

PACKED_SDPA = "ranked_drafts_packed_sdpa"  # the name it is registered under in transformers' AttentionInterface
UNPACKED_ARGUMENTS = ("position_bias", "softcap", "s_aux")  # attention variants it leaves to transformers' SDPA


def packed_sdpa_forward(
    module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    **kwargs,
) -> tuple[torch.Tensor, None]:
    """transformers' attention signature: query [B, H, q, D], key/value [B, H_kv, T, D], additive mask
    [B, 1, q, T] -> ([B, q, H, D], None). Without groups or a mask, transformers' SDPA as it is. A packed call
    (kwargs[PACKED_ROWS]): query [1, H, N, D], key/value [B, H_kv, T, D], mask [B, 1, width, T] -> [1, N, H, D]."""
    packed = kwargs.pop(PACKED_ROWS, None)
    if packed is not None:
        padded = packed.pad(query[0].transpose(0, 1), key.shape[0]).transpose(1, 2)  # [B, H, width, D]
        out, _ = packed_sdpa_forward(module, padded, key, value, attention_mask, dropout, scaling, **kwargs)
        return packed.pack(out)[None], None  # [1, N, H, D]
    groups = getattr(module, "num_key_value_groups", 1)
    batch, heads, q_len, head_dim = query.shape
    additive = attention_mask is not None and attention_mask.dtype != torch.bool
    shared = additive and attention_mask.dim() == 4 and attention_mask.shape[1:3] == (1, q_len)  # every head's
    if groups == 1 or not shared or any(kwargs.get(name) is not None for name in UNPACKED_ARGUMENTS):
        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs
        )
    folded = query.reshape(batch, heads // groups, groups * q_len, head_dim)  # a group's heads one after another
    mask = attention_mask.repeat(1, 1, groups, 1) if q_len > 1 else attention_mask  # the same rows for each head
    out = torch.nn.functional.scaled_dot_product_attention(
        folded, key, value, attn_mask=mask, dropout_p=dropout, scale=scaling
    )  # [B, H_kv, groups * q, D]
    return out.reshape(batch, heads, q_len, value.shape[-1]).transpose(1, 2).contiguous(), None


AttentionInterface.register(PACKED_SDPA, packed_sdpa_forward)
AttentionMaskInterface.register(PACKED_SDPA, sdpa_mask)  # masks transformers builds itself: SDPA's, as for sdpa


def attends_packed(model) -> bool:
    """Whether packed_attention switches the model to packed_sdpa_forward: one loaded with `sdpa`."""
    config = getattr(model, "config", None)
    return config is not None and getattr(config, "_attn_implementation_internal", None) == "sdpa"


@contextlib.contextmanager
def packed_attention(model):
    """Within the block, a model loaded with `sdpa` attends with packed_sdpa_forward; others as loaded. Only the
    model's own config is switched (transformers' setter would also rewrite every sub-config's implementation, and
    restoring would then lose theirs), and only for the call: the engine runs one forward at a time per model."""
    if not attends_packed(model):
        yield
        return
    config = model.config
    config._attn_implementation_internal = PACKED_SDPA
    try:
        yield
    finally:
        config._attn_implementation_internal = "sdpa"


def key_shifter(model):
    """A function (keys [1, H_kv, n, D], shift) -> the same keys as if written `shift` positions further on, for a
    model whose keys carry the standard rotary position embedding (rope_type "default", no attention scaling); None
    for any other. Rotary embeddings rotate each pair of channels (i, i + D/2) by position x frequency, and rotations
    compose, so a cached key moves to another position by one more rotation: how a window's kept lines are reused
    where they land in the next prompt (prefix_cache.read_prompt)."""
    rotary = getattr(getattr(model, "model", None), "rotary_emb", None)
    if getattr(rotary, "rope_type", None) != "default" or getattr(rotary, "attention_scaling", None) != 1.0:
        return None
    inv_freq = rotary.inv_freq.float()  # [D/2]

    def shift_keys(keys: torch.Tensor, shift: int) -> torch.Tensor:
        angles = torch.cat([inv_freq, inv_freq]).to(keys.device) * shift  # [D]
        x = keys.float()
        half = x.shape[-1] // 2
        rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)  # rotate_half
        return (x * angles.cos() + rotated * angles.sin()).to(keys.dtype)

    return shift_keys
