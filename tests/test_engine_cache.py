"""RaggedKVCache: a batched forward over rows of different lengths gives each row's own uncached logits."""

import pytest
import torch

from engine.generate import forward
from engine.kv_cache import RaggedKVCache
from engine.models.tiny import tiny_model

ATOL = 1e-4


def alone(model, tokens: list[int]) -> torch.Tensor:
    """Logits of one row run by itself from scratch, no cache: [T, V]."""
    with torch.inference_mode():
        return model(torch.tensor([tokens])).logits[0]


def new_cache(model, batch: int, capacity: int = 256) -> RaggedKVCache:
    return RaggedKVCache(model.config.num_hidden_layers, batch, torch.device("cpu"), capacity)


@pytest.fixture(params=["sdpa", "eager"])
def any_attention(request):
    """The tiny target under each attention implementation the engine accepts (eager adds the mask it is given:
    a boolean mask was read as +1/+0 there, logits off by 0.45)."""
    model = tiny_model(0)
    model.set_attn_implementation(request.param)
    assert model.config._attn_implementation == request.param
    return model


@pytest.mark.parametrize("capacity", [256, 4])  # 4: the buffers must grow (and keep their contents) mid-run
def test_ragged_rows_match_each_row_alone(any_attention, capacity):
    target = any_attention
    torch.manual_seed(0)
    rows = torch.randint(0, 256, (3, 12)).tolist()
    kept = torch.tensor([5, 12, 2])  # rows keep different prefixes: ragged lengths 5, 12, 2
    cache = new_cache(target, 3, capacity)
    forward(target, cache, torch.tensor(rows))  # equal lengths (all 0): the contiguous write path
    cache.commit(kept)  # the rest is stale, as after rejected drafts
    assert cache.lengths.tolist() == [5, 12, 2]

    step = torch.randint(0, 256, (3, 4))  # 4 new tokens per row, written at each row's own positions
    logits = forward(target, cache, step)  # [3, 4, V]
    for b in range(3):
        history = rows[b][: int(kept[b])] + step[b].tolist()
        expected = alone(target, history)[-4:]
        torch.testing.assert_close(logits[b], expected, atol=ATOL, rtol=0)

    # A second ragged round on top of the first: keep 1, 4 and 3 of the 4, then 2 more tokens each.
    cache.commit(torch.tensor([1, 4, 3]))
    more = torch.randint(0, 256, (3, 2))
    logits = forward(target, cache, more)
    for b, n in enumerate([1, 4, 3]):
        history = rows[b][: int(kept[b])] + step[b, :n].tolist() + more[b].tolist()
        torch.testing.assert_close(logits[b], alone(target, history)[-2:], atol=ATOL, rtol=0)


def test_keep_last_returns_the_last_positions(target):
    prompt = [3, 1, 4, 1, 5, 9, 2, 6]
    cache = new_cache(target, 1)
    logits = forward(target, cache, torch.tensor([prompt]), keep_last=1)  # [1, 1, V]
    assert logits.shape[1] == 1
    torch.testing.assert_close(logits[0, -1], alone(target, prompt)[-1], atol=ATOL, rtol=0)


def test_fan_out_and_dropping_rows_keep_each_rows_history(target):
    """select_rows repeats one prefilled prompt over k rows, then drops rows; survivors still see their own past."""
    prompt = [10, 20, 30, 40, 50]
    cache = new_cache(target, 1)
    forward(target, cache, torch.tensor([prompt]))
    cache.commit(torch.tensor([len(prompt)]))
    cache.select_rows(torch.zeros(4, dtype=torch.long))  # fan out to 4 rows
    first = torch.tensor([[1, 2], [3, 4], [5, 6], [7, 8]])
    forward(target, cache, first)
    cache.commit(torch.tensor([2, 1, 2, 0]))  # ragged again
    cache.select_rows(torch.tensor([1, 3]))  # rows 0 and 2 finished
    assert cache.lengths.tolist() == [len(prompt) + 1, len(prompt)]
    last = torch.tensor([[11], [12]])
    logits = forward(target, cache, last)[:, -1]
    torch.testing.assert_close(logits[0], alone(target, prompt + [3, 11])[-1], atol=ATOL, rtol=0)
    torch.testing.assert_close(logits[1], alone(target, prompt + [12])[-1], atol=ATOL, rtol=0)


def test_attention_mask_and_positions_follow_each_rows_length():
    cache = RaggedKVCache(1, 2, torch.device("cpu"))
    cache.set_lengths(torch.tensor([1, 3]))
    assert cache.position_ids(2).tolist() == [[1, 2], [3, 4]]
    mask = cache.attention_mask(2) == 0  # [B, 1, q, max_len + q]
    assert mask.shape == (2, 1, 2, 5)
    assert mask[0, 0].long().tolist() == [[1, 1, 0, 0, 0], [1, 1, 1, 0, 0]]  # row 0 never sees stale 2..4
    assert mask[1, 0].long().tolist() == [[1, 1, 1, 1, 0], [1, 1, 1, 1, 1]]


def test_an_attention_implementation_that_ignores_the_mask_is_refused(tokenizer):
    from engine import Engine

    model = tiny_model(0)
    model.config._attn_implementation = "flash_attention_2"  # what a GPU user may load a Hugging Face id with
    with pytest.raises(ValueError, match="attn_implementation='sdpa'"):
        Engine(model, tokenizer)


def test_the_cache_goes_by_the_name_the_models_forward_takes():
    """transformers 5.2x names the forward's cache argument `cache`; earlier 5.x (5.17 on the GPU machine) named
    it `past_key_values` and silently ignored `cache` (attention then saw 1 key against a 119-position mask)."""
    from transformers import Qwen2ForCausalLM

    from engine.generate import _cache_argument

    class OlderModel:
        def forward(self, input_ids=None, attention_mask=None, position_ids=None, past_key_values=None, **kwargs):
            return None

    assert _cache_argument(OlderModel) == "past_key_values"
    assert _cache_argument(Qwen2ForCausalLM) == "cache"


def test_a_cached_key_moved_by_its_rotation_equals_the_key_written_at_the_new_position(target):
    """Layer 0's keys depend only on the token and its position: keys written at positions 0.. and moved by
    `shift` must equal the same tokens' keys written `shift` positions further on."""
    from engine.attention import key_shifter

    tokens = torch.tensor([[5, 17, 99, 3, 42, 7, 250, 11]])
    near, far = RaggedKVCache(2, 1, torch.device("cpu"), 64), RaggedKVCache(2, 1, torch.device("cpu"), 64)
    forward(target, near, tokens)
    forward(target, far, torch.cat([torch.tensor([[1] * 13]), tokens], 1))
    shift = key_shifter(target)
    moved = shift(near.keys[0][:, :, :8], 13)
    assert torch.allclose(moved, far.keys[0][:, :, 13:21], atol=1e-5)
    assert torch.allclose(shift(moved, -13), near.keys[0][:, :, :8], atol=1e-5)
    assert not torch.allclose(near.keys[0][:, :, :8], far.keys[0][:, :, 13:21], atol=1e-3)  # positions matter
