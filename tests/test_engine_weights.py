"""Weight-only layers: int8 close to the layer it replaces, int4 exact on weights that are 4-bit already (as a
Q4 GGUF's), fewer bytes than bf16, and the engine runs on them."""

import json

import pytest
import torch
from torch import nn

import engine.quant.grids as grids_module
from engine import Engine, EngineSettings, GenerationRequest
from engine.converted import CONVERTED_FORMAT
from engine.models.tiny import byte_tokenizer, tiny_model
from engine.quant.cpu import onednn_has_vnni
from engine.quant.weights import (
    W8A8_MAX_ROWS,
    DynamicInt8Linear,
    FourBitGrid,
    Int4Linear,
    Int8Linear,
    apply_weight_format,
    quantize_int4,
    quantize_int8,
    weight_bytes,
)
from engine.speculation.controller import ControllerSettings


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_int8_linear_is_the_linear_within_rounding(dtype):
    torch.manual_seed(0)
    linear = nn.Linear(96, 40, bias=True).to(dtype)
    x = torch.randn(3, 5, 96, dtype=dtype)
    quantized = Int8Linear(linear, max_rows=None)  # int8 for any number of rows
    with torch.inference_mode():
        exact, approx = linear(x).float(), quantized(x).float()
    assert approx.shape == exact.shape and quantized(x).dtype == dtype
    # each weight is off by at most half a step of its channel's scale (max|w| / 127, as stored)
    step = quantized.scales.float()  # [out]
    bound = x.float().abs().sum(-1, keepdim=True) * step / 2  # [3, 5, out]
    rounding = exact.abs() * 2**-7 if dtype == torch.bfloat16 else 1e-5  # the output's own rounding
    assert ((approx - exact).abs() <= bound * 1.01 + rounding + 1e-6).all()
    assert (approx - exact).abs().max() > 0  # it really is another format (the test could fail)


def test_calls_of_more_rows_than_the_int8_kernel_pays_for_use_the_original_weight():
    torch.manual_seed(0)
    linear = nn.Linear(64, 32).to(torch.bfloat16)
    hybrid, int8_only = Int8Linear(linear, max_rows=4), Int8Linear(linear, max_rows=None)
    with torch.inference_mode():
        for rows in (1, 4, 5, 16):
            x = torch.randn(rows, 64, dtype=torch.bfloat16)
            expected = linear(x) if rows > 4 else int8_only(x)
            assert torch.equal(hybrid(x), expected), rows
        assert not torch.equal(linear(x), int8_only(x))  # the two paths really differ (the test could fail)


def test_a_quantized_model_reads_about_half_the_bytes_of_bf16_and_swaps_every_linear():
    model = tiny_model(0, hidden=128).to(torch.bfloat16)
    before = weight_bytes(model)
    quantize_int8(model)
    assert not any(isinstance(m, nn.Linear) for m in model.modules())
    assert isinstance(model.lm_head, Int8Linear)
    assert weight_bytes(model) < 0.6 * before
    assert apply_weight_format(model, "int8") is model  # already int8: nothing to do
    with pytest.raises(ValueError, match="weights='int3' is unknown: choose one of auto, native, int8, int4, w8a8"):
        apply_weight_format(model, "int3")
    with pytest.raises(ValueError, match="already in weights='int8'; load a fresh copy for weights='int4'"):
        apply_weight_format(model, "int4")
    with pytest.raises(ValueError, match="weights='int4' is for decoding on a CPU.*on meta"):
        apply_weight_format(tiny_model(0).to("meta"), "int4")


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
    for recompute in (False, True):  # from_pretrained's way (the stored mapping) and a user's call
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
    request = GenerationRequest(
        "def add(a, b):\n    return",
        k=1,
        max_new_tokens=24,
        budget_s=60,
        temperature=0.0,
        seed=1,
        stop_at_body_end=False,
    )
    reference = Engine(original, tokenizer, settings=EngineSettings(drafter="none")).generate(request)
    plain = Engine(quantized, tokenizer, settings=EngineSettings(drafter="none")).generate(request)
    drafted = Engine(
        quantized, tokenizer, quantize_int8(tiny_model(1), max_rows=None), EngineSettings(drafter="model")
    ).generate(request)
    same = sum(a == b for a, b in zip(reference.candidates[0].token_ids, plain.candidates[0].token_ids))
    assert same >= 0.75 * len(reference.candidates[0].token_ids)
    assert drafted.candidates[0].token_ids == plain.candidates[0].token_ids


def on_a_4bit_grid(out_features: int, in_features: int, seed: int = 0, group: int = 32) -> torch.Tensor:
    """Weights as a Q4_K GGUF holds them: per group of 32, low + code * step, codes 0..15; a fifth of the groups
    use only codes 0..14 and some only 2..13 (a block need not span all 16 levels)."""
    generator = torch.Generator().manual_seed(seed)
    groups = out_features * in_features // group
    top = torch.full((groups, 1), 15)
    top[torch.rand(groups, 1, generator=generator) < 0.2] = 14
    codes = (torch.rand(groups, group, generator=generator) * (top + 1)).floor().clamp(max=top)
    codes[:, 0], codes[:, 1] = 0, top[:, 0]  # the group's span is known: 0..top
    codes[:7] = codes[:7].clamp(2, 13)  # a few groups span fewer levels
    step = torch.rand(groups, 1, generator=generator) * 0.01 + 0.001
    low = -step * (torch.rand(groups, 1, generator=generator) * 4 + 6)
    return (low + codes * step).reshape(out_features, in_features)


def test_the_grid_fit_recovers_4bit_weights_exactly_and_tells_other_weights_apart():
    weight = on_a_4bit_grid(48, 128)
    grid = FourBitGrid.fit(weight)
    fitted = grid.low.repeat_interleave(32, 1) + grid.codes * grid.step.repeat_interleave(32, 1)
    assert grid.distance < 1e-4 and torch.allclose(fitted, weight, atol=1e-6)
    assert int(grid.codes.min()) >= 0 and int(grid.codes.max()) <= 15
    in_bf16 = FourBitGrid.fit(weight.to(torch.bfloat16))  # bf16 rounding moves the weights a little
    assert in_bf16.distance < 0.02
    assert FourBitGrid.fit(torch.randn(48, 128)) is None  # full-precision weights are not on a grid,
    assert FourBitGrid.fit(torch.randn(48, 128), tolerance=None).distance > 0.2  # far from the best fit
    assert FourBitGrid.fit(torch.randn(48, 100)) is None  # rows not a multiple of the group


def test_a_tensor_partly_off_the_grid_is_refused_even_when_the_sample_of_groups_missed_that_part(monkeypatch):
    monkeypatch.setattr(grids_module, "SAMPLE_GROUPS", 8)  # groups 0, 27, 54, 82, 109, 136, 163, 191 of 192
    mixed = on_a_4bit_grid(48, 128)
    mixed[28:34] = torch.randn(6, 128) * 0.02  # groups 112..135: an eighth, none of them sampled
    assert FourBitGrid.fit(mixed) is None
    assert FourBitGrid.fit(on_a_4bit_grid(48, 128)) is not None


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_int4_linear_computes_the_layer_of_4bit_weights(dtype):
    linear = nn.Linear(128, 48, bias=True)
    with torch.no_grad():
        linear.weight.copy_(on_a_4bit_grid(48, 128, seed=1))
    linear = linear.to(dtype)
    layer = Int4Linear(linear, FourBitGrid.fit(linear.weight), max_rows=None)
    x = torch.randn(2, 3, 128, dtype=dtype)
    with torch.inference_mode():
        exact, approx = linear(x).float(), layer(x).float()
    assert layer(x).dtype == dtype and approx.shape == exact.shape
    tolerance = 1e-4 if dtype == torch.float32 else 2**-6 * exact.abs().max()  # bf16: the output's rounding
    assert (approx - exact).abs().max() <= tolerance


def test_int4_for_the_layers_on_a_grid_int8_for_the_rest_and_the_dense_weight_for_large_calls():
    model = tiny_model(0, hidden=128).to(torch.bfloat16)
    grid_layer = model.model.layers[0].mlp.up_proj
    with torch.no_grad():
        grid_layer.weight.copy_(on_a_4bit_grid(*grid_layer.weight.shape, seed=2))
    dense_up = grid_layer.weight.detach().clone()
    before = weight_bytes(model)
    apply_weight_format(model, "int4")
    assert model.weight_format == "int4" and not any(isinstance(m, nn.Linear) for m in model.modules())
    int4 = model.model.layers[0].mlp.up_proj
    assert isinstance(int4, Int4Linear)
    assert isinstance(model.model.layers[0].mlp.down_proj, Int8Linear) and isinstance(model.lm_head, Int8Linear)
    assert weight_bytes(model) < 0.6 * before
    with torch.inference_mode():
        for rows in (1, 8, 9, 16):
            x = torch.randn(rows, 128, dtype=torch.bfloat16)
            expected = torch.nn.functional.linear(x, dense_up) if rows > 8 else int4._small(x).to(x.dtype)
            assert torch.equal(int4(x), expected), rows
        assert not torch.equal(torch.nn.functional.linear(x, dense_up), int4._small(x))  # two paths (could fail)


def test_the_engine_gives_regular_decodings_tokens_on_int4_weights():
    tokenizer = byte_tokenizer()
    request = GenerationRequest(
        "def add(a, b):\n    return",
        k=2,
        max_new_tokens=24,
        budget_s=60,
        temperature=0.8,
        seed=3,
        stop_at_body_end=False,
    )
    target = quantize_int4(snapped_to_a_4bit_grid(tiny_model(0, hidden=128)), None, None)  # no dense fallback
    assert all(isinstance(m, Int4Linear) for m in target.model.layers.modules() if hasattr(m, "weight_dense"))
    assert isinstance(target.lm_head, Int8Linear)  # 257 outputs: not a multiple of the kernel's 16
    plain = Engine(target, tokenizer, settings=EngineSettings(drafter="none")).generate(request)
    # a draft model of the same weights: long drafts, verified many tokens per row at once (other call shapes)
    drafted = Engine(
        target,
        tokenizer,
        quantize_int4(snapped_to_a_4bit_grid(tiny_model(0, hidden=128)), None, None),
        EngineSettings(drafter="model", controller=ControllerSettings(cost_aware=False, min_draft_confidence=0.0)),
    ).generate(request)
    assert [c.token_ids for c in drafted.candidates] == [c.token_ids for c in plain.candidates]
    assert drafted.stats.accepted_tokens > 10


def snapped_to_a_4bit_grid(model: nn.Module) -> nn.Module:
    """Every linear layer's weights moved to their nearest 4-bit grid point (the model then is 4-bit, as a Q4's)."""
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, nn.Linear):
                grid = FourBitGrid.fit(module.weight, tolerance=None)
                module.weight.copy_(
                    grid.low.repeat_interleave(grid.group, 1) + grid.codes * grid.step.repeat_interleave(grid.group, 1)
                )
    return model


def test_int4_grids_are_saved_once_and_reused_and_a_damaged_cache_is_refitted(tmp_path, caplog):
    first = quantize_int4(snapped_to_a_4bit_grid(tiny_model(0, hidden=128)), cache_dir=tmp_path)
    saved = list(tmp_path.iterdir())
    assert [p.name for p in saved] == ["int4-grids-v1-float32.pt"]
    with caplog.at_level("INFO", logger="engine.quant.weights"):
        again = quantize_int4(snapped_to_a_4bit_grid(tiny_model(0, hidden=128)), cache_dir=tmp_path)
    assert "grids from the cache" in caplog.text
    for (name, a), b in zip(first.named_modules(), again.modules()):
        assert type(a) is type(b), name
        if isinstance(a, Int4Linear):
            assert torch.equal(a.four_bit.weight_int4, b.four_bit.weight_int4)
            assert torch.equal(a.four_bit.scales_and_zeros, b.four_bit.scales_and_zeros)
    saved[0].write_bytes(b"not a torch file")
    caplog.clear()
    with caplog.at_level("WARNING", logger="engine.quant.grid_cache"):
        refitted = quantize_int4(snapped_to_a_4bit_grid(tiny_model(0, hidden=128)), cache_dir=tmp_path)
    assert "ignoring the int4 grid cache" in caplog.text
    assert torch.equal(
        refitted.model.layers[0].mlp.gate_up_proj.four_bit.weight_int4,
        first.model.layers[0].mlp.gate_up_proj.four_bit.weight_int4,
    )
    # grids of another model's shapes (same layer names) are refitted, not used
    other = quantize_int4(snapped_to_a_4bit_grid(tiny_model(0, hidden=64)), cache_dir=tmp_path)
    assert other.model.layers[0].mlp.gate_up_proj.weight_dense.shape == (256, 64)  # gate and up stacked (lean)
    assert isinstance(other.model.layers[0].mlp.gate_up_proj, Int4Linear)


def test_a_grid_cache_that_cannot_be_written_costs_a_warning_not_the_model(tmp_path, caplog):
    with caplog.at_level("WARNING", logger="engine.quant.grid_cache"):
        model = quantize_int4(snapped_to_a_4bit_grid(tiny_model(0, hidden=128)), cache_dir=tmp_path / "missing")
    assert "could not save the int4 grids" in caplog.text and model.weight_format == "int4"
    assert not list(tmp_path.iterdir())  # no partial file left behind


def test_auto_weights_are_int4_w8a8_for_a_bundled_bf16_model_on_a_cpu_and_as_loaded_otherwise(tmp_path):
    (tmp_path / "ranked_drafts.json").write_text(json.dumps({"format": CONVERTED_FORMAT, "files": []}))

    def bundled_like(model):  # loaded from one of our converted directories
        model.config._name_or_path = str(tmp_path)
        return model

    assert apply_weight_format(bundled_like(tiny_model(0).to(torch.bfloat16)), "auto").weight_format == "int4-w8a8"
    users = tiny_model(0).to(torch.bfloat16)  # a user's model: its loss in w8a8 is not measured
    assert apply_weight_format(users, "auto") is users and not hasattr(users, "weight_format")
    fp32 = bundled_like(tiny_model(0))  # the reference format: left exact
    assert apply_weight_format(fp32, "auto") is fp32 and not hasattr(fp32, "weight_format")
    on_meta = bundled_like(tiny_model(0).to(torch.bfloat16).to("meta"))  # not a CPU: no CPU kernels
    assert apply_weight_format(on_meta, "auto") is on_meta
    assert apply_weight_format(None, "auto") is None


def w8a8_error_bound(x: torch.Tensor, layer: DynamicInt8Linear, weight: torch.Tensor) -> torch.Tensor:
    """[M, out]: what rounding the weights (half a step of each channel's scale) and the call's activations (half
    of one step of (max - min) / 255 over the whole call, 0 included) may cost each output."""
    weight_step = weight.float().abs().amax(dim=1) / 127  # [out]
    levels = 127 if layer.reduce_range else 255  # 7 bits without VNNI
    activation_step = (x.max().clamp(min=0) - x.min().clamp(max=0)).float() / levels  # one for the call
    return x.float().abs().sum(-1, keepdim=True) * weight_step / 2 + activation_step / 2 * (
        weight.float().abs().sum(1) + weight_step * weight.shape[1]
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_w8a8_linear_is_the_linear_within_the_rounding_of_weights_and_of_the_calls_activations(dtype):
    torch.manual_seed(0)
    linear = nn.Linear(96, 48, bias=True).to(dtype)
    layer = DynamicInt8Linear(linear, max_rows=None)
    for rows in (1, 5, 12):
        x = torch.randn(rows, 96, dtype=dtype)
        with torch.inference_mode():
            exact, approx = linear(x).float(), layer(x)
        assert approx.dtype == dtype and approx.shape == exact.shape
        rounding = exact.abs() * 2**-7 if dtype == torch.bfloat16 else 1e-5  # the output's own rounding
        error = (approx.float() - exact).abs()
        assert (error <= w8a8_error_bound(x, layer, linear.weight) * 1.02 + rounding + 1e-6).all(), rows
        assert error.max() > 0  # another format indeed (the test could fail)


def test_the_rows_of_one_w8a8_call_share_the_error_of_its_largest_activation():
    """Why down projections split outlier channels off (W8A8_OUTLIER_LAYERS), and why a row's result depends on
    the rows called with it: one outlier coarsens the 8-bit activations of the whole call."""
    torch.manual_seed(0)
    linear = nn.Linear(256, 64, bias=False)
    layer = DynamicInt8Linear(linear, max_rows=None)
    quiet = torch.randn(1, 256)
    loud = torch.randn(1, 256)
    loud[0, 7] = 200.0  # an outlier channel, as a down_proj's input
    with torch.inference_mode():
        exact = linear(quiet)
        alone = (layer(quiet) - exact).norm() / exact.norm()
        beside_loud = (layer(torch.cat([quiet, loud]))[:1] - exact).norm() / exact.norm()
    assert alone < 0.02 and beside_loud > 5 * alone


@pytest.mark.parametrize("outlier_threshold", [None, 4.0])  # 4.0: the dense weight is kept as [in, out]
def test_w8a8_calls_of_more_rows_than_its_limit_use_the_dense_weight_without_wide_int8(outlier_threshold):
    torch.manual_seed(0)
    linear = nn.Linear(64, 32).to(torch.bfloat16)
    layer = DynamicInt8Linear(linear, outlier_threshold=outlier_threshold, wide_int8=False)  # as without VNNI
    assert layer.dense_weight().shape == (32, 64) and torch.equal(layer.dense_weight(), linear.weight)
    with torch.inference_mode():
        for rows in (1, W8A8_MAX_ROWS, W8A8_MAX_ROWS + 1):
            x = torch.randn(rows, 64, dtype=torch.bfloat16)
            if rows <= W8A8_MAX_ROWS:
                assert torch.equal(layer(x), (layer._small(x) + linear.bias).to(x.dtype)), rows
        # more rows: the original weight, as the layer it replaces, up to bf16's rounding (a weight kept as
        # [in, out] may take another of the CPU's kernels, which rounds differently)
        exact = linear(x).float()
        rounding = exact.abs() * 2**-7 + 1e-3
        assert ((layer(x).float() - exact).abs() <= rounding).all()
        assert ((layer._small(x).float() + linear.bias.float() - exact).abs() > rounding).any()  # the paths differ


@pytest.mark.skipif(not onednn_has_vnni(), reason="oneDNN's int8 products are exact only with VNNI or AMX")
def test_wide_w8a8_calls_round_each_row_on_its_own_scale_and_keep_no_dense_weight():
    """A prompt's chunk (more than W8A8_MAX_ROWS rows) through torch._int_mm with a scale per row: each row's
    result is what it would be alone, within the rounding of its own activations, and one loud row costs the
    quiet rows nothing (where the small calls' single scale does: the test above this one's neighbour)."""
    torch.manual_seed(0)
    linear = nn.Linear(256, 64)
    layer = DynamicInt8Linear(linear, wide_int8=True)
    assert layer.weight_dense is None and layer.large_int8.dtype == torch.int8
    x = torch.randn(W8A8_MAX_ROWS + 8, 256)
    x[3] *= 50.0  # a loud row
    with torch.inference_mode():
        wide, exact = layer(x), linear(x)
        alone = torch.cat([layer._row_scaled_products(x[i : i + 1]) for i in range(len(x))]) + linear.bias
        shared = layer._integer_products(x) + linear.bias  # fbgemm's one scale for the call
    assert torch.equal(wide, alone)
    quiet = torch.ones(len(x), dtype=torch.bool)
    quiet[3] = False
    relative = ((wide - exact).norm(dim=1) / exact.norm(dim=1))[quiet]
    relative_shared = ((shared - exact).norm(dim=1) / exact.norm(dim=1))[quiet]
    assert relative.max() < 0.02 and relative_shared.mean() > 5 * relative.mean()


def test_wide_int8_follows_onednns_instructions(monkeypatch):
    linear = nn.Linear(64, 32)
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")  # saturating 16-bit sums: the dense weight stays
    capped = DynamicInt8Linear(linear)
    assert not capped.wide_int8 and capped.weight_dense is not None
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA")
    assert DynamicInt8Linear(linear).wide_int8 == onednn_has_vnni()


def test_w8a8_swaps_every_linear_splits_outliers_in_down_projections_and_counts_fbgemms_bytes():
    model = tiny_model(0, hidden=128).to(torch.bfloat16)
    before = weight_bytes(model)
    apply_weight_format(model, "w8a8")
    assert model.weight_format == "w8a8" and not any(isinstance(m, nn.Linear) for m in model.modules())
    layers = {name: m for name, m in model.named_modules() if isinstance(m, DynamicInt8Linear)}
    assert len(layers) == 2 * 4 + 1  # 2 decoder layers of 7 projections, 4 calls (lean: q/k/v, gate/up stacked), head
    split = {name for name, m in layers.items() if m.outlier_threshold is not None}
    assert split == {"model.layers.0.mlp.down_proj", "model.layers.1.mlp.down_proj"}
    assert 0.45 * before < weight_bytes(model) < 0.6 * before  # fbgemm's packed int8 weights


def test_outlier_channels_go_through_floats_so_one_loud_channel_costs_the_call_nothing():
    """The down projection's case: a row with an outlier channel beside quiet rows. Without the split the call's
    one 8-bit scale follows the outlier and every row loses precision; with it, the error stays that of the
    quiet values, and the outlier channel itself is exact up to fp32."""
    torch.manual_seed(0)
    linear = nn.Linear(256, 64, bias=False)
    plain = DynamicInt8Linear(linear, max_rows=None)
    split = DynamicInt8Linear(linear, max_rows=None, outlier_threshold=4.0)
    x = torch.randn(4, 256).clamp(-3.5, 3.5)
    x[1, 7] = 200.0
    before = x.clone()
    with torch.inference_mode():
        exact = linear(x)
        errors = {
            name: float((layer(x) - exact).norm() / exact.norm())
            for name, layer in (("plain", plain), ("split", split))
        }
        quiet_only = x.clone()
        quiet_only[:, 7] = 0
        quiet_error = float((split(quiet_only) - linear(quiet_only)).norm() / exact.norm())
    assert torch.equal(x, before)  # the caller's activations are left as they were
    assert errors["split"] < 0.02 and errors["plain"] > 5 * errors["split"], errors
    assert errors["split"] == pytest.approx(quiet_error, rel=0.05, abs=1e-4)  # the outlier added nothing
    with torch.inference_mode():  # a call of no rows has no outlier channels to look for
        assert split(torch.randn(0, 256)).shape == (0, 64)
        broken = x.clone()
        broken[2, 7] = float("nan")  # a NaN in the loud channel does not hide the loud entry beside it
        error = float((split(broken)[1] - exact[1]).norm() / exact[1].norm())
    assert error < 0.02, error


def test_the_engine_generates_on_w8a8_weights_close_to_the_original():
    tokenizer = byte_tokenizer()
    request = GenerationRequest(
        "def add(a, b):\n    return",
        k=2,
        max_new_tokens=24,
        budget_s=60,
        temperature=0.0,
        seed=1,
        stop_at_body_end=False,
    )
    reference = Engine(tiny_model(0), tokenizer, settings=EngineSettings(drafter="none")).generate(request)
    drafted = Engine(
        apply_weight_format(tiny_model(0), "w8a8"),
        tokenizer,
        apply_weight_format(tiny_model(1), "w8a8"),
        EngineSettings(drafter="model"),
    ).generate(request)
    # judged token by token against the original model's greedy choice after the same text: on a random tiny
    # model one flipped near-tie sends the rest of a row elsewhere (it did with 7-bit activations on AVX2), so the
    # rows themselves are not compared
    prompt_ids = tokenizer(request.prompt)["input_ids"]
    original = tiny_model(0)
    for ours, theirs in zip(drafted.candidates, reference.candidates):
        assert len(ours.token_ids) == len(theirs.token_ids) == 24
        with torch.inference_mode():
            logits = original(torch.tensor([prompt_ids + ours.token_ids])).logits[0]  # [T, V]
        choices = logits[len(prompt_ids) - 1 : -1].argmax(-1).tolist()  # the original's pick at each new token
        same = sum(a == b for a, b in zip(ours.token_ids, choices))
        assert same >= 0.75 * len(ours.token_ids), same
    assert drafted.stats.proposed_tokens > 0


def test_int4_w8a8_reads_the_4bit_codes_for_one_row_and_integer_products_from_two_rows_on():
    model = tiny_model(0, hidden=128).to(torch.bfloat16)
    grid_layer = model.model.layers[0].mlp.up_proj
    with torch.no_grad():
        grid_layer.weight.copy_(on_a_4bit_grid(*grid_layer.weight.shape, seed=2))
    dense_up = nn.Linear(128, grid_layer.out_features, bias=False).to(torch.bfloat16)
    with torch.no_grad():
        dense_up.weight.copy_(grid_layer.weight)
    w8a8_bytes = weight_bytes(apply_weight_format(tiny_model(0, hidden=128).to(torch.bfloat16), "w8a8"))
    apply_weight_format(model, "int4-w8a8")
    assert model.weight_format == "int4-w8a8"
    assert all(isinstance(m, DynamicInt8Linear) for m in model.modules() if hasattr(m, "weight_dense"))
    up, down = model.model.layers[0].mlp.up_proj, model.model.layers[0].mlp.down_proj
    assert up.four_bit is not None and down.four_bit is None  # random weights lie on no grid
    only_w8a8 = DynamicInt8Linear(dense_up)
    with torch.inference_mode():
        one = torch.randn(1, 128, dtype=torch.bfloat16)
        assert torch.equal(up(one), up.four_bit(one).to(torch.bfloat16))
        assert (up(one) - dense_up(one)).abs().max() <= 2**-6 * dense_up(one).abs().max()  # the exact codes
        assert not torch.equal(up(one), only_w8a8(one))  # two paths (could fail)
        for rows in (2, 8):
            x = torch.randn(rows, 128, dtype=torch.bfloat16)
            assert torch.equal(up(x), only_w8a8(x)), rows
    assert weight_bytes(model) < w8a8_bytes  # a one-row step reads the codes, not int8


def test_the_engines_one_row_steps_on_int4_w8a8_read_the_codes_and_its_verify_passes_do_not():
    tokenizer = byte_tokenizer()
    request = GenerationRequest(
        "def add(a, b):\n    return",
        k=1,
        max_new_tokens=24,
        budget_s=60,
        temperature=0.0,
        seed=1,
        stop_at_body_end=False,
    )
    mixed = apply_weight_format(snapped_to_a_4bit_grid(tiny_model(0, hidden=128)), "int4-w8a8")
    assert sum(m.four_bit is not None for m in mixed.modules() if isinstance(m, DynamicInt8Linear)) == 2 * 4  # lean
    calls = {"codes": 0, "all": 0}
    up = mixed.model.layers[0].mlp.gate_up_proj
    up.four_bit.register_forward_hook(lambda *_: calls.__setitem__("codes", calls["codes"] + 1))
    up.register_forward_hook(lambda *_: calls.__setitem__("all", calls["all"] + 1))
    plain = Engine(mixed, tokenizer, settings=EngineSettings(drafter="none")).generate(request)
    assert len(plain.candidates[0].token_ids) == 24
    assert calls == {"codes": plain.stats.forward_passes - 1, "all": plain.stats.forward_passes}  # all but the prefill
    calls.update(codes=0, all=0)
    drafted = Engine(
        mixed, tokenizer, settings=EngineSettings(drafter="prompt", controller=ControllerSettings(cost_aware=False))
    ).generate(request)
    assert drafted.stats.speculative_steps > 0
    assert calls["codes"] == drafted.stats.forward_passes - 1 - drafted.stats.speculative_steps
