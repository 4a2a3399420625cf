"""Int8 weight-only layers: close to the layer they replace, half the bytes of bf16, and the engine runs on them."""
import pytest
import torch
from torch import nn

from engine import Engine, EngineSettings, GenerationRequest
from engine.tiny import byte_tokenizer, tiny_model
from engine.weights import Int8Linear, apply_weight_format, quantize_int8, weight_bytes


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_int8_linear_is_the_linear_within_rounding(dtype):
    torch.manual_seed(0)
    linear = nn.Linear(96, 40, bias=True).to(dtype)
    x = torch.randn(3, 5, 96, dtype=dtype)
    quantized = Int8Linear(linear, max_rows=None)          # int8 for any number of rows
    with torch.inference_mode():
        exact, approx = linear(x).float(), quantized(x).float()
    assert approx.shape == exact.shape and quantized(x).dtype == dtype
    # each weight is off by at most half a step of its channel's scale (max|w| / 127, as stored)
    step = quantized.scales.float()                                               # [out]
    bound = x.float().abs().sum(-1, keepdim=True) * step / 2                      # [3, 5, out]
    rounding = exact.abs() * 2 ** -7 if dtype == torch.bfloat16 else 1e-5        # the output's own rounding
    assert ((approx - exact).abs() <= bound * 1.01 + rounding + 1e-6).all()
    assert (approx - exact).abs().max() > 0     # it really is another format (the test could fail)


def test_calls_of_more_rows_than_the_int8_kernel_pays_for_use_the_original_weight():
    torch.manual_seed(0)
    linear = nn.Linear(64, 32).to(torch.bfloat16)
    hybrid, int8_only = Int8Linear(linear, max_rows=4), Int8Linear(linear, max_rows=None)
    with torch.inference_mode():
        for rows in (1, 4, 5, 16):
            x = torch.randn(rows, 64, dtype=torch.bfloat16)
            expected = linear(x) if rows > 4 else int8_only(x)
            assert torch.equal(hybrid(x), expected), rows
        assert not torch.equal(linear(x), int8_only(x))    # the two paths really differ (the test could fail)


def test_a_quantized_model_reads_about_half_the_bytes_of_bf16_and_swaps_every_linear():
    model = tiny_model(0, hidden=128).to(torch.bfloat16)
    before = weight_bytes(model)
    quantize_int8(model)
    assert not any(isinstance(m, nn.Linear) for m in model.modules())
    assert isinstance(model.lm_head, Int8Linear)
    assert weight_bytes(model) < 0.6 * before
    assert apply_weight_format(model, "int8") is model              # already int8: nothing to do
    with pytest.raises(ValueError, match="weights='int4' is unknown: choose one of native, int8"):
        apply_weight_format(model, "int4")
    with pytest.raises(ValueError, match="weights='int8' is for decoding on a CPU.*on meta"):
        apply_weight_format(tiny_model(0).to("meta"), "int8")


def test_a_tied_head_gets_its_own_int8_copy_and_transformers_does_not_tie_it_back():
    from transformers import Qwen2ForCausalLM

    config = tiny_model(0).config
    config.tie_word_embeddings = True
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(config).eval()
    assert model.lm_head.weight is model.model.embed_tokens.weight and model.all_tied_weights_keys
    ids = torch.tensor([[5, 17, 99, 3]])
    with torch.inference_mode():
        before = model(ids).logits
    quantize_int8(model)
    for recompute in (False, True):        # from_pretrained's way (the stored mapping) and a user's call
        model.tie_weights(recompute_mapping=recompute)
        assert isinstance(model.lm_head, Int8Linear) and not hasattr(model.lm_head, "weight")
    with torch.inference_mode():
        after = model(ids).logits
    assert torch.allclose(after, before, atol=0.05 * before.abs().max())
    assert not torch.equal(after, before)


def test_the_engine_generates_on_int8_weights_close_to_the_original():
    """Greedy on the tiny model (its logits are sharp): the int8 copy mostly picks the same tokens, and the
    speculative engine on int8 weights gives regular decoding's tokens on the same int8 weights (the promise holds
    for any one weight format; int8 only here, since the hybrid layers pick their weights by the call's rows)."""
    tokenizer = byte_tokenizer()
    original, quantized = tiny_model(0), quantize_int8(tiny_model(0), max_rows=None)
    request = GenerationRequest("def add(a, b):\n    return", k=1, max_new_tokens=24, budget_s=60,
                                temperature=0.0, seed=1, stop_at_body_end=False)
    reference = Engine(original, tokenizer, settings=EngineSettings(drafter="none")).generate(request)
    plain = Engine(quantized, tokenizer, settings=EngineSettings(drafter="none")).generate(request)
    drafted = Engine(quantized, tokenizer, quantize_int8(tiny_model(1), max_rows=None),
                     EngineSettings(drafter="model")).generate(request)
    same = sum(a == b for a, b in zip(reference.candidates[0].token_ids, plain.candidates[0].token_ids))
    assert same >= 0.75 * len(reference.candidates[0].token_ids)
    assert drafted.candidates[0].token_ids == plain.candidates[0].token_ids
