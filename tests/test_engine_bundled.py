"""The engine on the bundled Qwen2.5-Coder 0.5B: greedy equals transformers, seeds, the deadline, function-end stops.

Marked `bundled` (CI runs them): the first use on a fresh machine converts the GGUF once (about a minute).
"""

import time

import pytest
import torch

import engine
from engine import EngineSettings, GenerationRequest
from engine.generate import forward
from engine.kv_cache import RaggedKVCache
from engine.text.prompting import end_of_text_ids
from engine.types import FINISH_BUDGET, FINISH_STOP

pytestmark = pytest.mark.bundled

HUMANEVAL_LIKE = (
    "from typing import List\n\n\n"
    "def has_close_elements(numbers: List[float], threshold: float) -> bool:\n"
    '    """ Check if in given list of numbers, are any two numbers closer to each other than\n'
    "    given threshold.\n"
    "    >>> has_close_elements([1.0, 2.0, 3.0], 0.5)\n"
    "    False\n"
    '    """\n'
)

# HumanEval's usual stop sequences: what a function's end looks like in text. The engine ends a function by
# indentation (engine/text/blocks.py); its candidates must not run past one into the next top-level statement.
FUNCTION_END_STOPS = ("\ndef ", "\nclass ", "\nif __name__", "\nif ", "\nprint(", "\n#", "\n@", "\nassert ")


@pytest.fixture(scope="module")
def bundled():
    """(model, tokenizer) of the bundled 0.5B, loaded once for the module."""
    return engine.load_any("bundled:qwen2.5-coder-0.5b", progress=False)


def make(bundled, drafter="auto"):
    model, tokenizer = bundled
    return engine.Engine(model, tokenizer, settings=EngineSettings(drafter=drafter))


def test_greedy_rows_equal_transformers_greedy(bundled):
    model, tokenizer = bundled
    built = make(bundled)
    request = GenerationRequest(
        HUMANEVAL_LIKE, k=3, max_new_tokens=24, temperature=0, budget_s=600, stop=(), stop_at_body_end=False
    )
    ids = torch.tensor([built.prompts.prompt_ids(request)])  # the prompt as the engine reads it (the chat form: auto)
    assert built.prompts.chat is not None and ids.shape[1] > 2 * len(tokenizer(HUMANEVAL_LIKE).input_ids)
    with torch.inference_mode():
        out = model.generate(
            ids,
            attention_mask=torch.ones_like(ids),
            do_sample=False,
            max_new_tokens=24,
            pad_token_id=tokenizer.eos_token_id,
        )
    expected = out[0, ids.shape[1] :].tolist()
    result = built.generate(request)
    assert len(expected) == 24
    for candidate in result.candidates:
        assert candidate.token_ids == expected
        assert candidate.text == tokenizer.decode(expected, skip_special_tokens=True)


def test_a_fixed_seed_reproduces_samples(bundled):
    """Exactly, for the same computation. Speculation keeps a seed's tokens in exact arithmetic (tested on fp32
    tiny models), but bf16 rounds differently for other batch shapes: measured, 3 of 24 rows of 32 tokens
    differed somewhere between drafter "none" and "sibling", so this pins the plain path."""
    built = make(bundled, drafter="none")

    def sample(seed):
        result = built.generate(
            GenerationRequest(
                HUMANEVAL_LIKE,
                k=2,
                max_new_tokens=10,
                temperature=0.8,
                seed=seed,
                budget_s=600,
                stop=(),
                stop_at_body_end=False,
            )
        )
        return [c.token_ids for c in result.candidates]

    first = sample(7)
    assert all(len(row) == 10 for row in first)
    assert sample(7) == first


def test_the_deadline_is_honoured(bundled):
    model, _ = bundled
    cache = RaggedKVCache(model.config.num_hidden_layers, 2, torch.device("cpu"))
    forward(model, cache, torch.zeros(2, 64, dtype=torch.long))
    cache.commit(torch.full((2,), 64))
    started = time.perf_counter()
    forward(model, cache, torch.zeros(2, 9, dtype=torch.long))  # the widest verify: pending + an 8-token lookup
    forward_s = time.perf_counter() - started
    budget = 1.5
    started = time.perf_counter()
    result = make(bundled).generate(
        GenerationRequest(HUMANEVAL_LIKE, k=2, max_new_tokens=1024, temperature=0.8, seed=0, budget_s=budget, stop=())
    )
    wall = time.perf_counter() - started
    assert wall <= budget + forward_s + 0.5, (wall, forward_s)
    unfinished = [c for c in result.candidates if c.finish_reason == FINISH_BUDGET]
    assert unfinished and all(len(c.token_ids) > 0 for c in unfinished)


def test_a_new_top_level_def_ends_the_candidate(bundled):
    prompt = (
        'def add(a: int, b: int) -> int:\n    """Return a plus b."""\n    return a + b\n\n\n'
        'def subtract(a: int, b: int) -> int:\n    """Return a minus b."""\n'
    )
    result = make(bundled).generate(GenerationRequest(prompt, k=2, max_new_tokens=48, temperature=0, budget_s=600))
    for candidate in result.candidates:
        assert candidate.finish_reason == FINISH_STOP
        assert "return a - b" in candidate.text
        assert not any(stop in candidate.text for stop in FUNCTION_END_STOPS)


def test_qwens_end_of_text_tokens_end_a_row(bundled):
    """Regression (issue 10): the converted config names only <|im_end|> (151645) as EOS, but the model ends a
    completion with <|endoftext|> (151643); both, and every other special token, must end a row."""
    model, tokenizer = bundled
    ids = end_of_text_ids(model, tokenizer)
    assert {151643, 151645} <= ids
    assert tokenizer.convert_tokens_to_ids("<|fim_middle|>") in ids


def test_a_method_stops_before_the_next_method(bundled):
    """Regression (issue 10): methods never stopped (every candidate went on to invent push/peek)."""
    prompt = (
        "class Stack:\n    def __init__(self):\n        self.items = []\n\n    def pop(self):\n"
        '        """Remove and return the top item."""\n'
    )
    result = make(bundled).generate(
        GenerationRequest(prompt, k=3, max_new_tokens=96, temperature=0.8, seed=1, budget_s=600)
    )
    for candidate in result.candidates:
        assert candidate.finish_reason == FINISH_STOP, candidate
        assert "def " not in candidate.text and len(candidate.token_ids) < 96


GGUF_TO_HF = {
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}


def projections_of(name: str) -> list[str]:
    """The projections a layer computes: a stacked one's parts (lean layers: `self_attn.q_k_v_proj` is q, k and v)."""
    owner, _, last = name.rpartition(".")
    if not last.endswith("_proj"):
        return [name]
    return [f"{owner}.{stem}_proj" for stem in last.removesuffix("_proj").split("_")]


def test_int4_weights_go_exactly_to_the_layers_the_gguf_stores_in_4_bits():
    """--weights int4 on the bundled 0.5B: Int4Linear for each tensor the GGUF holds as Q4_K (and no other), each
    computing its layer as the loaded weights do; the rest (Q5_0, Q6_K, Q8_0) int8."""
    from gguf import GGUFReader

    from engine.models.loading import BUNDLED, bundled_gguf, default_cache_dir
    from engine.quant.weights import Int4Linear, Int8Linear, quantize_int4

    gguf = bundled_gguf(BUNDLED["qwen2.5-coder-0.5b"], default_cache_dir(), progress=False)
    four_bit = set()
    for tensor in GGUFReader(str(gguf)).tensors:
        parts = tensor.name.split(".")  # blk.<i>.<kind>.weight
        if tensor.tensor_type.name == "Q4_K" and parts[0] == "blk" and parts[2] in GGUF_TO_HF:
            four_bit.add(f"model.layers.{parts[1]}.{GGUF_TO_HF[parts[2]]}")
    model = quantize_int4(engine.load_any("bundled:qwen2.5-coder-0.5b", progress=False)[0])
    names = {kind: [n for n, m in model.named_modules() if isinstance(m, kind)] for kind in (Int4Linear, Int8Linear)}
    int4, int8 = ({part for name in names[kind] for part in projections_of(name)} for kind in (Int4Linear, Int8Linear))
    assert four_bit and int4 == four_bit  # 12 of the 24 ffn_down tensors
    assert len(int4) + len(int8) == 24 * 7 + 1
    torch.manual_seed(0)
    layer = dict(model.named_modules())[sorted(names[Int4Linear])[0]]
    x = torch.randn(4, layer.in_features, dtype=layer.dense_weight().dtype)
    with torch.inference_mode():
        dense, small = torch.nn.functional.linear(x, layer.dense_weight()).float(), layer._small(x).float()
    assert (small - dense).abs().max() <= 2**-6 * dense.abs().max()  # the same layer, up to bf16 rounding


def test_w8a8_and_int4_rank_the_next_token_of_real_code_first_as_the_loaded_weights_do(bundled):
    """--weights w8a8 (what the app's default int4-w8a8 reads beyond one row) and int4 on the bundled 0.5B,
    teacher-forced over real code in calls of 8 tokens (the shapes of decoding and verification): the token each
    ranks first is the loaded weights' first at nearly every position (measured: int4 99.7%, whose int8 layers,
    most of this model's, read the bf16 weights in calls of 8 rows; w8a8 93.4%: its 8-bit activations cost more
    here than on the 1.5B, whose HumanEval pass@1 they do not lower: docs/MEASUREMENTS.md)."""
    from pathlib import Path

    from engine.quant.weights import apply_weight_format

    model, tokenizer = bundled
    ids = tokenizer(Path(engine.kv_cache.__file__).read_text(), return_tensors="pt").input_ids[:, :320]

    def first_choices(target) -> torch.Tensor:
        cache = RaggedKVCache(target.config.num_hidden_layers, 1, torch.device("cpu"), ids.shape[1])
        picks = []
        for chunk in ids.split(8, dim=1):
            picks.append(forward(target, cache, chunk).argmax(-1))
            cache.commit(torch.tensor([chunk.shape[1]]))
        return torch.cat(picks, dim=1)

    loaded = first_choices(model)
    agreement = {
        fmt: float(
            (
                first_choices(
                    apply_weight_format(engine.load_any("bundled:qwen2.5-coder-0.5b", progress=False)[0], fmt)
                )
                == loaded
            )
            .float()
            .mean()
        )
        for fmt in ("int4", "w8a8")
    }
    assert agreement["int4"] >= 0.97 and agreement["w8a8"] >= 0.9, agreement


def test_a_half_typed_word_is_finished_by_a_healed_first_token(bundled):
    """The bundled model, a cursor inside `ret`: the backed-over token is " ret", every token allowed first begins
    with it, and the greedy middle finishes the word ("urn ...") instead of starting a new one."""
    model, tokenizer = bundled
    built = make(bundled, drafter="none")
    prefix = "def total(xs):\n    s = 0\n    for x in xs:\n        s += x\n    ret"
    request = GenerationRequest(prefix, suffix="\n\n\nprint(total([1, 2]))\n", k=1, max_new_tokens=8, temperature=0)
    healing = built.prompts.healing(request, built.prompts.prompt_ids(request))
    assert healing is not None and healing.text == " ret"
    allowed = healing.allowed.nonzero().flatten().tolist()
    assert tokenizer.convert_tokens_to_ids("Ġreturn") in allowed and len(allowed) < 100
    assert all(tokenizer.decode([i]).startswith(" ret") for i in allowed)
    assert not set(allowed) & set(tokenizer.get_added_vocab().values())  # no special token may come first
    middle = built.generate(request).candidates[0].text
    assert middle.startswith("urn s"), middle


def test_a_word_typed_over_two_tokens_is_backed_over_whole(bundled):
    """`rai` is read as " r" + "ai": both are backed over, so that the first token may be " raise" (after " r"
    alone nothing begins with "ai" that the word holds); the middle finishes the word."""
    model, tokenizer = bundled
    built = make(bundled, drafter="none")
    prefix = "def check(value):\n    if value < 0:\n        rai"
    request = GenerationRequest(prefix, suffix="\n    return value\n", k=1, max_new_tokens=8, temperature=0)
    prompt_ids = built.prompts.prompt_ids(request)
    assert [tokenizer.decode([i]) for i in prompt_ids[-2:]] == [" r", "ai"]
    healing = built.prompts.healing(request, prompt_ids)
    assert healing is not None and healing.text == " rai" and healing.tokens == 2
    assert tokenizer.convert_tokens_to_ids("Ġraise") in healing.allowed.nonzero().flatten().tolist()
    middle = built.generate(request).candidates[0].text
    assert middle.startswith("se "), middle
