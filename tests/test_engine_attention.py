"""The packed attention computes transformers' SDPA attention, for any number of query tokens and ragged rows."""

import pytest
import torch
from transformers.integrations.sdpa_attention import sdpa_attention_forward

from engine.attention import PACKED_SDPA, packed_attention, packed_sdpa_forward
from engine.generate import _cache_argument, forward, forward_ragged
from engine.kv_cache import RaggedKVCache
from engine.models.tiny import tiny_model


class _Module:
    """What the attention functions read of an attention layer."""

    def __init__(self, groups: int):
        self.num_key_value_groups = groups
        self.is_causal = True
        self.training = False


def _ragged_mask(batch: int, q_len: int, total: int, lengths: torch.Tensor) -> torch.Tensor:
    visible = torch.arange(total)[None, None, :] < (lengths[:, None] + torch.arange(1, q_len + 1))[:, :, None]
    return torch.zeros(visible.shape).masked_fill_(~visible, torch.finfo(torch.float32).min)[:, None]


@pytest.mark.parametrize("q_len", [1, 2, 5, 17])
@pytest.mark.parametrize("groups", [2, 3, 6])
def test_packed_attention_equals_sdpa(q_len, groups):
    torch.manual_seed(q_len * 10 + groups)
    batch, kv_heads, total, dim = 3, 2, 40, 16
    query = torch.randn(batch, kv_heads * groups, q_len, dim)
    key, value = torch.randn(batch, kv_heads, total, dim), torch.randn(batch, kv_heads, total, dim)
    lengths = torch.tensor([total - q_len, total - q_len - 7, 3])  # rows of different lengths
    mask = _ragged_mask(batch, q_len, total, lengths)
    module = _Module(groups)
    expected, _ = sdpa_attention_forward(module, query, key, value, mask, scaling=dim**-0.5)
    got, _ = packed_sdpa_forward(module, query, key, value, mask, scaling=dim**-0.5)
    assert got.shape == expected.shape == (batch, q_len, kv_heads * groups, dim)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
    # a different mask changes the output: the mask is read, not ignored
    other, _ = packed_sdpa_forward(
        module, query, key, value, _ragged_mask(batch, q_len, total, lengths - 2), scaling=dim**-0.5
    )
    assert not torch.allclose(other, expected)


def _ragged_cache(model) -> RaggedKVCache:
    """3 rows over the same 20-token prompt, holding 20, 16 and 11 tokens."""
    cache = RaggedKVCache(model.config.num_hidden_layers, 1, torch.device("cpu"), 64)
    forward(model, cache, torch.arange(20)[None] + 40)
    cache.commit(torch.tensor([20]))
    cache.select_rows(torch.zeros(3, dtype=torch.long))
    cache.commit(torch.tensor([0, -4, -9]))
    return cache


def _logits(model, q_len: int, packed: bool) -> torch.Tensor:
    cache = _ragged_cache(model)
    ids = torch.randint(0, 256, (3, q_len), generator=torch.Generator().manual_seed(0))
    if packed:
        return forward(model, cache, ids)
    with torch.inference_mode():  # transformers' own sdpa path, as loaded
        return model(
            input_ids=ids,
            attention_mask=cache.attention_mask(q_len, model.dtype),
            position_ids=cache.position_ids(q_len),
            use_cache=True,
            **{_cache_argument(type(model)): cache},
        ).logits


@pytest.mark.parametrize("q_len", [1, 4])
def test_engine_forward_with_packed_attention_gives_the_models_logits(q_len):
    model = tiny_model()  # 4 query heads over 2 key/value heads
    assert model.config._attn_implementation == "sdpa"
    torch.testing.assert_close(
        _logits(model, q_len, packed=True), _logits(model, q_len, packed=False), atol=1e-5, rtol=1e-5
    )


def test_packed_attention_is_for_the_call_only():
    model = tiny_model()
    with packed_attention(model):
        assert model.config._attn_implementation == PACKED_SDPA
    assert model.config._attn_implementation == "sdpa"
    with pytest.raises(RuntimeError), packed_attention(model):
        raise RuntimeError("a failed forward")
    assert model.config._attn_implementation == "sdpa"
    eager = tiny_model()
    eager.config._attn_implementation = "eager"
    with packed_attention(eager):
        assert eager.config._attn_implementation == "eager"


def test_a_mask_transformers_builds_itself_is_still_applied_under_packed_attention():
    """A plain forward (2-D padding mask, no engine cache) inside the block: transformers makes the 4-D mask for
    the registered name as it does for sdpa, so left padding and causality hold."""
    model = tiny_model()
    ids = torch.randint(0, 256, (2, 9))
    mask = torch.ones(2, 9, dtype=torch.long)
    mask[1, :3] = 0  # row 1 is left-padded
    with torch.inference_mode():
        expected = model(input_ids=ids, attention_mask=mask).logits
        with packed_attention(model):
            got = model(input_ids=ids, attention_mask=mask).logits
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


def _calls(model) -> list[tuple[int, ...]]:
    """The input_ids shapes of the model's forwards from now on."""
    shapes: list[tuple[int, ...]] = []
    model.register_forward_pre_hook(
        lambda _m, _a, kwargs: shapes.append(tuple(kwargs["input_ids"].shape)), with_kwargs=True
    )
    return shapes


def _verify_against_padded(model, calls: list[tuple[int, ...]], token_rows: int) -> None:
    """forward_ragged of rows verifying 1, 4 and 2 tokens, against the padded call on a twin of the cache: the
    model's calls and the token rows computed are as given, each row's logits are the padded call's at its own
    tokens, and the cache then holds what the padded call left at every committed position (the next step's
    logits agree too)."""
    ids, counts = torch.randint(0, 256, (3, 4), generator=torch.Generator().manual_seed(5)), torch.tensor([1, 4, 2])
    padded_cache, ragged_cache = _ragged_cache(model), _ragged_cache(model)
    expected = forward(model, padded_cache, ids)
    shapes = _calls(model)
    got, packed, computed = forward_ragged(model, ragged_cache, ids, counts)
    assert shapes == calls and computed == token_rows
    assert packed.rows.tolist() == [0, 1, 1, 1, 1, 2, 2] and packed.offsets.tolist() == [0, 0, 1, 2, 3, 0, 1]
    torch.testing.assert_close(got, expected[packed.rows, packed.offsets], atol=1e-5, rtol=1e-5)
    for cache in (padded_cache, ragged_cache):
        cache.commit(counts)
    after = torch.tensor([[7], [8], [9]])
    torch.testing.assert_close(
        forward(model, ragged_cache, after), forward(model, padded_cache, after), atol=1e-5, rtol=1e-5
    )


def test_a_ragged_verify_is_one_packed_call_with_each_rows_logits_and_cache():
    """One call of 7 token rows, not 3 x 4."""
    _verify_against_padded(tiny_model(), calls=[(1, 7)], token_rows=7)


def test_a_verify_with_nothing_to_save_or_no_packed_attention_is_the_padded_call():
    model, eager = tiny_model(), tiny_model()
    eager.config._attn_implementation = "eager"
    ids = torch.randint(0, 256, (3, 4))
    for loaded, counts in ((model, torch.tensor([4, 4, 4])), (eager, torch.tensor([1, 4, 2]))):
        cache = _ragged_cache(loaded)
        shapes = _calls(loaded)
        assert forward_ragged(loaded, cache, ids, counts)[2] == 12
        assert shapes == [(3, 4)]


def test_a_packed_call_without_its_packed_rows_is_refused():
    """Tokens laid end to end (batch 1) reaching a 3-row cache without the PackedRows that place them."""
    model = tiny_model()
    cache = _ragged_cache(model)
    with pytest.raises(RuntimeError, match="packed call"), torch.inference_mode():
        model(
            input_ids=torch.tensor([[1, 2, 3]]),
            attention_mask=cache.attention_mask(1, model.dtype),
            position_ids=torch.tensor([[20, 16, 11]]),
            use_cache=True,
            **{_cache_argument(type(model)): cache},
        )


def test_a_model_whose_attention_keeps_the_forwards_keywords_from_the_cache_is_verified_padded():
    """transformers' GPT-NeoX calls cache.update without the forward's keywords, so a packed call cannot place its
    tokens: the first layer's write refuses it before writing anything, and the padded call runs instead, with
    the padded call's logits and cache."""
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

    torch.manual_seed(0)
    config = GPTNeoXConfig(
        vocab_size=257,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=256,
    )
    config._attn_implementation = "sdpa"
    _verify_against_padded(GPTNeoXForCausalLM(config).eval(), calls=[(1, 7), (3, 4)], token_rows=12)
