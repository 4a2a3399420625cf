"""`auto` formats chosen by timing them here: the candidates, the cache keyed by the CPU (caps included), the choice
of the fastest, and the CPU read as torch's libraries read it under the instruction-set caps."""

from __future__ import annotations

import json
import time

import pytest
import torch

import engine.quant.calibrate as calibrate_module
from engine.models.formats import choose_formats
from engine.quant.calibrate import BUNDLED_CANDIDATES, CALIBRATION_FILE, Shapes, calibrate, candidates_for, pick
from engine.quant.cpu import ISA_CAPS, cpu_description, cpu_flags, cpu_has_bf16, cpu_has_vnni

SMALL = Shapes(hidden=64, kv=32, ff=128, layers=2, vocab=100)


@pytest.fixture(autouse=True)
def _small_passes(monkeypatch):
    monkeypatch.setattr(calibrate_module, "CACHE_BYTES", 2**20)
    monkeypatch.setattr(calibrate_module, "ROUNDS", 2)
    for cap in ISA_CAPS:
        monkeypatch.delenv(cap, raising=False)


def test_a_bundled_model_is_timed_in_its_measured_formats_a_users_model_in_its_own_weights():
    assert candidates_for(True, "auto", "auto") == list(BUNDLED_CANDIDATES)
    assert candidates_for(False, "auto", "auto") == [("bfloat16", "native"), ("float32", "native")]
    assert candidates_for(True, "float32", "auto") == [(d, w) for d, w in BUNDLED_CANDIDATES if d == "float32"]
    assert candidates_for(False, "auto", "int8") == [("bfloat16", "int8"), ("float32", "int8")]


def test_the_choice_is_timed_once_then_read_from_the_cache(tmp_path):
    pairs = candidates_for(True, "auto", "auto")
    first = calibrate(SMALL, pairs, tmp_path)
    assert not first.cached and set(first.step_ms) == {f"{d}/{w}" for d, w in pairs}
    assert all(ms > 0 for rows in first.step_ms.values() for ms in rows.values())
    assert "formats timed on this CPU" in first.reason()
    again = calibrate(SMALL, pairs, tmp_path)
    assert again.cached and (again.dtype, again.weights) == (first.dtype, first.weights)
    assert len(json.loads((tmp_path / CALIBRATION_FILE).read_text())) == 1


def test_a_slow_format_is_not_chosen(tmp_path, monkeypatch):
    """int8 made 20 ms slower a layer call: the timing sees it and another format wins (without the delay int8 is
    among the fastest on small shapes)."""
    real = calibrate_module.quantize_int8

    def slow_int8(layer):
        made = real(layer)
        for child in made.children():
            child.register_forward_pre_hook(lambda module, args: time.sleep(0.02))
        return made

    monkeypatch.setattr(calibrate_module, "quantize_int8", slow_int8)
    found = calibrate(SMALL, [("float32", "int8"), ("float32", "native")], tmp_path)
    assert (found.dtype, found.weights) == ("float32", "native")
    assert found.step_ms["float32/int8"]["1"] > 5 * found.step_ms["float32/native"]["1"]


def test_a_format_without_kernels_here_is_left_out(tmp_path, monkeypatch):
    """As w8a8 on a CPU without fbgemm (ARM): its kernel raises, the others are timed and one is chosen."""

    def no_kernel(layer, grids=None):
        raise RuntimeError("Didn't find engine for operation quantized::linear_prepack NoQEngine")

    monkeypatch.setattr(calibrate_module, "quantize_w8a8", no_kernel)
    found = calibrate(SMALL, [("bfloat16", "int4-w8a8"), ("float32", "w8a8"), ("float32", "native")], tmp_path)
    assert set(found.step_ms) == {"float32/native"} and (found.dtype, found.weights) == ("float32", "native")


def test_near_equals_go_to_the_preferred_format_a_clear_winner_is_taken():
    pairs = [("bfloat16", "int4-w8a8"), ("float32", "w8a8"), ("float32", "native")]
    near = {"bfloat16/int4-w8a8": {"1": 60, "8": 118}, "float32/w8a8": {"1": 82, "8": 91}, "float32/native": {"1": 400}}
    assert pick(pairs, near) == ("bfloat16", "int4-w8a8")  # 178 against 173: within the noise
    clear = {**near, "bfloat16/int4-w8a8": {"1": 134, "8": 168}}  # 302 against 173
    assert pick(pairs, clear) == ("float32", "w8a8")


def test_capped_instruction_sets_are_another_machine(tmp_path, monkeypatch):
    """Under FBGEMM_ENABLE_INSTRUCTIONS=AVX2 and ONEDNN_MAX_CPU_ISA=AVX2 the engine reads no VNNI and no bf16 (as
    fbgemm and oneDNN then run), the CPU's description names the caps, and the cached choice is not reused."""
    pairs = [("float32", "native"), ("float32", "int8")]
    calibrate(SMALL, pairs, tmp_path)
    monkeypatch.setenv("FBGEMM_ENABLE_INSTRUCTIONS", "AVX2")
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    assert not cpu_has_vnni() and not cpu_has_bf16()
    assert cpu_description()["caps"] == {"FBGEMM_ENABLE_INSTRUCTIONS": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
    assert not calibrate(SMALL, pairs, tmp_path).cached
    assert len(json.loads((tmp_path / CALIBRATION_FILE).read_text())) == 2
    monkeypatch.delenv("FBGEMM_ENABLE_INSTRUCTIONS")
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA")
    assert cpu_has_vnni() == ("avx512_vnni" in cpu_flags()) and "caps" not in cpu_description()


def test_an_unreadable_or_unwritable_cache_still_gives_a_choice(tmp_path):
    pairs = [("float32", "native"), ("float32", "int8")]
    (tmp_path / CALIBRATION_FILE).write_text("{not json")
    assert not calibrate(SMALL, pairs, tmp_path).cached
    key = next(iter(json.loads((tmp_path / CALIBRATION_FILE).read_text())))
    (tmp_path / CALIBRATION_FILE).write_text(json.dumps({key: {"dtype": "float32", "old_field": 1}}))
    assert not calibrate(SMALL, pairs, tmp_path).cached  # an entry of another layout is timed again
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    found = calibrate(SMALL, pairs, blocked / "cache")  # the cache directory cannot be made: not saved, still chosen
    assert found.weights in ("native", "int8") and not found.cached


def test_a_failed_timing_falls_back_to_the_flag_policy(tmp_path, monkeypatch):
    from transformers import Qwen2Config

    import engine.models.formats as formats_module

    Qwen2Config(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4).save_pretrained(
        tmp_path / "model"
    )

    def broken(*args):
        raise MemoryError("no room for the timed layers")

    monkeypatch.setattr(formats_module, "calibrate", broken)
    found = choose_formats(str(tmp_path / "model"), tmp_path)
    assert (found.dtype, found.weights) == ("auto", "auto") and "timing the formats failed" in found.reason
    one = choose_formats(str(tmp_path / "model"), tmp_path, dtype="float32")  # one candidate: nothing to time
    assert (one.dtype, one.weights, one.reason) == ("float32", "native", "the only format allowed here")


def test_asked_formats_and_tiny_models_are_not_timed(tmp_path):
    asked = choose_formats("bundled:qwen2.5-coder-0.5b", tmp_path, "float32", "int8")
    assert (asked.dtype, asked.weights) == ("float32", "int8") and "asked" in asked.reason
    tiny = choose_formats("tiny:0", tmp_path)
    assert (tiny.dtype, tiny.weights) == ("auto", "auto") and not (tmp_path / CALIBRATION_FILE).exists()


def test_a_users_decoder_is_timed_in_its_own_weights_from_its_config(tmp_path, monkeypatch):
    from transformers import Qwen2Config

    directory = tmp_path / "model"
    Qwen2Config(
        hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2
    ).save_pretrained(directory)
    import engine.models.formats as formats_module

    monkeypatch.setattr(formats_module, "pick_device", lambda: torch.device("cpu"))  # as on a host with a GPU
    found = choose_formats(str(directory), tmp_path)
    assert found.weights == "native" and found.dtype in ("bfloat16", "float32") and "timed now" in found.reason


def test_int4_dyn_reads_a_gguf_layers_codes_with_their_offsets():
    """int4-dyn (ARM's KleidiAI kernel; torch's reference path here): a layer on a 4-bit grid with a non-zero offset
    per group gives the dense layer's products up to the 8-bit rounding of the activations, and a layer off the
    grid becomes int8; the format is offered to auto on ARM only."""
    from torch import nn

    from engine.quant.grids import FourBitGrid
    from engine.quant.kernels import Int4DynLinear, Int8Linear
    from engine.quant.weights import quantize_int4_dyn

    generator = torch.Generator().manual_seed(0)
    out_features, in_features, group = 64, 256, 32
    codes = torch.randint(0, 16, (out_features, in_features), generator=generator, dtype=torch.uint8)
    step = torch.rand(out_features, in_features // group, generator=generator) * 0.01 + 0.001
    low = -torch.rand(out_features, in_features // group, generator=generator) * 0.1  # not -8 steps: an offset
    on_grid = nn.Linear(in_features, out_features, bias=False)
    with torch.no_grad():
        on_grid.weight.copy_(low.repeat_interleave(group, 1) + codes.float() * step.repeat_interleave(group, 1))
    model = nn.Sequential(on_grid, nn.Linear(out_features, 48, bias=False))
    model.config = type("Config", (), {"tie_word_embeddings": False})()
    grids = {"0": FourBitGrid(codes, step, low, group, 0.0), "1": None}
    x = torch.randn(3, in_features, generator=generator)
    with torch.inference_mode():
        dense = on_grid(x)
        quantize_int4_dyn(model, grids=grids)
        assert isinstance(model[0], Int4DynLinear) and isinstance(model[1], Int8Linear)
        error = (model[0](x) - dense).abs().max().item()
    assert error < 0.02 * dense.abs().max().item()
    assert model.weight_format == "int4-dyn"


def test_int4_dyn_is_a_candidate_on_arm_only(monkeypatch):
    import platform

    assert ("float32", "int4-dyn") not in candidates_for(True, "auto", "auto")
    monkeypatch.setattr(platform, "machine", lambda: "aarch64")
    assert ("float32", "int4-dyn") in candidates_for(True, "auto", "auto")
    assert ("float32", "int4-dyn") not in candidates_for(False, "auto", "auto")  # a user's model: its own weights
