"""Lean decoder layers (engine/models/lean.py): the same numbers as transformers' own layers, with the projections that
read one input stacked; each test holds a reference model built apart and left as transformers made it."""

import pytest
import torch
from torch import nn
from transformers import (
    DynamicCache,
    GPTNeoXConfig,
    GPTNeoXForCausalLM,
    LlamaConfig,
    LlamaForCausalLM,
    Qwen2Config,
    Qwen2ForCausalLM,
)

import engine.quant.weights as weights
from engine.generate import Engine
from engine.models.lean import LeanDecoderLayer, fuse_projections, make_lean
from engine.models.tiny import byte_tokenizer, tiny_model
from engine.quant.grids import FourBitGrid
from engine.settings import ControllerSettings, EngineSettings
from engine.types import GenerationRequest

SMALL = dict(
    vocab_size=257,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=512,
    eos_token_id=256,
)


def small(config_class, **overrides):
    """A small config of the class: SMALL's sizes, `overrides` on top."""
    return config_class(**{**SMALL, **overrides})


def tiny_llama(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return LlamaForCausalLM(small(LlamaConfig)).eval()


def logits(model: nn.Module, ids: torch.Tensor) -> torch.Tensor:
    with torch.inference_mode():
        return model(ids).logits


@pytest.mark.parametrize("build", [tiny_model, tiny_llama], ids=["qwen2", "llama"])
def test_lean_stacked_layers_give_transformers_logits_and_greedy_tokens(build):
    reference, lean = build(0), build(0)
    stacked = fuse_projections(lean, lambda name: None)
    assert all(isinstance(layer, LeanDecoderLayer) for layer in lean.model.layers)
    assert all(isinstance(layer, type(reference.model.layers[0])) for layer in lean.model.layers)  # still one
    assert stacked["model.layers.0.self_attn.q_k_v_proj"] == tuple(f"model.layers.0.self_attn.{p}_proj" for p in "qkv")
    assert stacked["model.layers.1.mlp.gate_up_proj"] == ("model.layers.1.mlp.gate_proj", "model.layers.1.mlp.up_proj")
    assert not hasattr(lean.model.layers[0].self_attn, "q_proj")
    ids = torch.randint(0, 256, (3, 11))
    torch.testing.assert_close(logits(lean, ids), logits(reference, ids), rtol=1e-5, atol=1e-5)
    with torch.inference_mode():  # transformers' own generate: its DynamicCache, one token a step
        expected = reference.generate(ids[:1], max_new_tokens=12, do_sample=False, pad_token_id=256)
        assert torch.equal(lean.generate(ids[:1], max_new_tokens=12, do_sample=False, pad_token_id=256), expected)


def test_stacked_int8_layers_compute_exactly_what_the_separate_ones_do():
    """Each output feature of a stacked call is its own weight row's products: the same numbers, bit for bit,
    through the engine's ragged cache and packed verify passes (a draft model: several tokens a row)."""
    lean, separate = weights.quantize_int8(tiny_model(0)), weights.quantize_int8(tiny_model(0), lean=False)
    assert isinstance(lean.model.layers[0], LeanDecoderLayer)
    assert not isinstance(separate.model.layers[0], LeanDecoderLayer)
    ids = torch.randint(0, 256, (2, 9))
    assert torch.equal(logits(lean, ids), logits(separate, ids))
    request = GenerationRequest(
        "def add(a, b):\n    return", k=3, max_new_tokens=20, budget_s=60, temperature=0.8, seed=2,
        stop_at_body_end=False,
    )  # fmt: skip
    settings = EngineSettings(drafter="model", controller=ControllerSettings(cost_aware=False, min_draft_confidence=0))
    results = [
        Engine(target, byte_tokenizer(), weights.quantize_int8(tiny_model(1)), settings).generate(request)
        for target in (lean, separate)
    ]
    assert results[0].stats.accepted_tokens > 0
    assert [c.token_ids for c in results[0].candidates] == [c.token_ids for c in results[1].candidates]


def test_only_neighbours_of_one_kind_are_stacked_so_a_4bit_q_and_k_keep_their_codes():
    """int4-w8a8: a GGUF keeps some v projections in 6 bits. q and k (on a 4-bit grid) are stacked and read their
    codes at one row; v (on none) stays a layer of its own; gate and up (on none here) are stacked. The numbers are
    those of the same format without stacking, at one row (codes) and at three (integer products)."""
    models = [tiny_model(0, hidden=128).to(torch.bfloat16) for _ in range(2)]
    for model in models:
        with torch.no_grad():
            for name in ("q_proj", "k_proj"):
                linear = getattr(model.model.layers[0].self_attn, name)
                grid = FourBitGrid.fit(linear.weight, tolerance=None)
                step, low = (t.repeat_interleave(grid.group, 1) for t in (grid.step, grid.low))
                linear.weight.copy_(low + grid.codes * step)
    lean, separate = models
    weights.quantize_w8a8(lean, weights.four_bit_grids(lean, None))
    attention, mlp = lean.model.layers[0].self_attn, lean.model.layers[0].mlp
    assert attention.q_k_proj.four_bit is not None and attention.v_proj.four_bit is None
    assert mlp.gate_up_proj.four_bit is None
    assert lean.model.layers[0].attention_inputs.calls == (("q_k_proj", (128, 64)), ("v_proj", (64,)))
    weights.quantize_w8a8(separate, weights.four_bit_grids(separate, None), lean=False)
    assert separate.model.layers[0].self_attn.q_proj.four_bit is not None
    for rows in (1, 3):
        ids = torch.randint(0, 256, (1, rows))
        assert torch.equal(logits(lean, ids), logits(separate, ids)), rows


def test_other_models_are_left_as_transformers_made_them():
    config = GPTNeoXConfig(
        vocab_size=257, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4
    )
    model = GPTNeoXForCausalLM(config)
    assert make_lean(model) == [] and fuse_projections(model, lambda name: None) == {}
    assert not any(isinstance(m, LeanDecoderLayer) for m in model.modules())


def test_making_a_model_lean_twice_changes_nothing_more():
    model = tiny_model(0)
    first = fuse_projections(model, lambda name: None)
    layers = list(model.model.layers)
    assert fuse_projections(model, lambda name: None) == {} and list(model.model.layers) == layers
    assert len(first) == 4  # 2 layers x (q/k/v, gate/up)


@pytest.mark.parametrize(
    "config",
    [
        # biases everywhere, another activation, heads wider than the hidden state, eager attention
        small(
            LlamaConfig,
            intermediate_size=96,
            head_dim=24,
            attention_bias=True,
            mlp_bias=True,
            hidden_act="gelu",
            attn_implementation="eager",
        ),
        # a sliding window on the layers past the first
        small(Qwen2Config, num_hidden_layers=3, use_sliding_window=True, sliding_window=4, max_window_layers=1),
    ],
    ids=["llama-biases-gelu-wide-heads-eager", "qwen2-sliding-window"],
)
def test_lean_layers_follow_transformers_on_other_configurations(config):
    models = []
    for _ in range(2):
        torch.manual_seed(0)
        models.append((Qwen2ForCausalLM if isinstance(config, Qwen2Config) else LlamaForCausalLM)(config).eval())
    reference, lean = models
    assert fuse_projections(lean, lambda name: None)
    ids = torch.randint(0, 256, (2, 12))
    torch.testing.assert_close(logits(lean, ids), logits(reference, ids), rtol=1e-5, atol=1e-5)
    with torch.inference_mode():  # the hidden states transformers records per layer, as before
        expected = reference(ids, cache=DynamicCache(config=config), output_hidden_states=True)
        got = lean(ids, cache=DynamicCache(config=config), output_hidden_states=True)
    assert len(got.hidden_states) == config.num_hidden_layers + 1
    for a, b in zip(got.hidden_states, expected.hidden_states):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
