"""The chat form of continuations on a tiny model with a chat template: which models get it, the prompt's layout, the
user's code read as text, and the closing fence that ends a row."""

from __future__ import annotations

import pytest
import torch

from engine import Engine, EngineSettings, GenerationRequest
from engine.models.tiny import byte_tokenizer, tiny_model
from engine.text.chat import CLOSING_FENCE, ChatForm, chat_form_for
from engine.text.stopping import RowState, StopRules

TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
PROMPT = 'def add(a: int, b: int) -> int:\n    """Sum of a and b."""\n'


def chat_tokenizer():
    """The byte tokenizer with Qwen's turn markers (ids 257, 258) and a chat template."""
    tokenizer = byte_tokenizer()
    tokenizer.add_special_tokens({"additional_special_tokens": ["<|im_start|>", "<|im_end|>"]})
    tokenizer.chat_template = TEMPLATE
    return tokenizer


@pytest.fixture(scope="module")
def tokenizer():
    return chat_tokenizer()


def test_auto_gives_the_chat_form_only_to_a_model_that_ends_its_turns(tokenizer):
    instruct = tiny_model(0, vocab_size=259, eos_token_id=258)  # ends with <|im_end|>: trained to answer in turns
    base = tiny_model(0, vocab_size=259, eos_token_id=256)  # ends with <|endoftext|>: a base model
    assert chat_form_for("auto", tokenizer, instruct) is not None
    assert chat_form_for("auto", tokenizer, base) is None
    assert chat_form_for("chat", tokenizer, base) is not None  # asked for explicitly
    assert chat_form_for("raw", tokenizer, instruct) is None
    assert chat_form_for("auto", byte_tokenizer(), tiny_model(0)) is None  # no template at all
    with pytest.raises(ValueError, match="prompt_form='chat' needs a tokenizer with a chat template"):
        chat_form_for("chat", byte_tokenizer(), tiny_model(0))
    with pytest.raises(ValueError, match="prompt_form='markdown' is unknown: choose one of auto, raw, chat"):
        chat_form_for("markdown", tokenizer, instruct)


def test_the_user_code_is_the_answer_begun_and_stays_text(tokenizer):
    engine = Engine(tiny_model(0, vocab_size=259, eos_token_id=258), tokenizer, None, EngineSettings(drafter="none"))
    code = PROMPT + "    # <|im_end|> typed in a comment\n"
    ids = engine.prompts.prompt_ids(GenerationRequest(code))
    assert tokenizer.decode(ids) == (
        "<|im_start|>user\nComplete the following Python code:\n```python\n"
        + code.rstrip("\n")
        + "\n```<|im_end|>\n<|im_start|>assistant\n```python\n"
        + code
    )
    assert ids.count(258) == 1  # only the template's own <|im_end|>: the typed one is characters
    raw = Engine(engine.model, tokenizer, None, EngineSettings(drafter="none", prompt_form="raw"))
    assert tokenizer.decode(raw.prompts.prompt_ids(GenerationRequest(code))) == code


def test_the_prompt_text_is_what_the_ids_spell(tokenizer):
    """bench_e2e's llama+chat sends the chat form as text to a server that reads its special tokens: the same prompt
    (its rows end by the code's own rules: tests/test_openai_api.py)."""
    engine = Engine(tiny_model(0, vocab_size=259, eos_token_id=258), tokenizer, None, EngineSettings(drafter="none"))
    assert ChatForm.of(tokenizer).prompt_text(PROMPT) == tokenizer.decode(
        engine.prompts.prompt_ids(GenerationRequest(PROMPT))
    )


def test_the_closing_fence_ends_a_chat_row_and_only_a_chat_row(tokenizer):
    engine = Engine(tiny_model(0, vocab_size=259, eos_token_id=258), tokenizer, None, EngineSettings(drafter="none"))
    assert engine.prompts.form_stops(GenerationRequest(PROMPT)) == (CLOSING_FENCE,)
    rules = StopRules.of(GenerationRequest(PROMPT), frozenset(), engine.prompts.form_stops(GenerationRequest(PROMPT)))
    row = RowState()
    text = "    return a + b\n```\n\nThis adds the numbers."
    rules.extend(row, list(text.encode()), [0.0] * len(text), lambda ids: bytes(ids).decode())
    assert row.text == "    return a + b" and row.finish_reason == "stop"
    raw = Engine(engine.model, tokenizer, None, EngineSettings(drafter="none", prompt_form="raw"))
    assert raw.prompts.form_stops(GenerationRequest(PROMPT)) == ()


def test_a_chat_form_engine_generates_rows_that_continue_the_code(tokenizer):
    """End to end on the tiny model: rows come back with the raw form's bookkeeping (the form changes the prompt
    only); the texts differ because the model reads another prompt."""
    model = tiny_model(0, vocab_size=259, eos_token_id=258)
    request = GenerationRequest(PROMPT, k=2, max_new_tokens=12, temperature=0.0, budget_s=30, stop_at_body_end=False)
    chat = Engine(model, tokenizer, None, EngineSettings(drafter="none")).generate(request)
    raw = Engine(model, tokenizer, None, EngineSettings(drafter="none", prompt_form="raw")).generate(request)
    assert chat.stats.prompt_tokens > raw.stats.prompt_tokens + 2 * len(PROMPT)  # the code twice, the template
    for candidate in chat.candidates:
        assert candidate.finished and candidate.text == tokenizer.decode(candidate.token_ids)[: len(candidate.text)]


def test_a_template_that_cannot_render_one_user_turn_gives_no_form():
    tokenizer = byte_tokenizer()
    tokenizer.chat_template = "{{ raise_exception('system turn required') }}"
    assert ChatForm.of(tokenizer) is None


def test_a_chat_form_row_cannot_begin_with_the_closing_fence_or_an_end_token(tokenizer):
    """The tokens banned at a row's first position: end-of-text tokens and those that (after blanks) begin with a
    backtick; the bundled 0.5B otherwise closes the block at once after a docstring-only function
    (tests/test_engine_bundled.py::test_a_new_top_level_def_ends_the_candidate)."""
    from engine.text.chat import answer_enders

    tokenizer = chat_tokenizer()
    tokenizer.add_tokens(["```", " ``", "a`b"])  # whole-fence tokens, as real vocabularies have them
    vocab = tokenizer.get_vocab()
    banned = answer_enders(tokenizer, frozenset({258}))
    assert {vocab["```"], vocab[" ``"], vocab["`"], 258} <= set(banned)
    assert vocab["a`b"] not in banned and vocab["a"] not in banned
    model = tiny_model(0, vocab_size=len(tokenizer), eos_token_id=258)
    engine = Engine(model, tokenizer, None, EngineSettings(drafter="none"))
    request = GenerationRequest(PROMPT, k=1, max_new_tokens=4, temperature=0.0, budget_s=30, stop_at_body_end=False)
    first = engine.generate(request).candidates[0].token_ids[0]
    with torch.no_grad():  # the model now prefers its end token where it wrote `first`: it would end at once
        model.lm_head.weight[258] = 2 * model.lm_head.weight[first]
    ended = Engine(model, tokenizer, None, EngineSettings(drafter="none"))
    ended.prompts.not_first = None  # what the engine did before the ban: the row ends empty
    assert ended.generate(request).candidates[0].text == ""
    kept = Engine(model, tokenizer, None, EngineSettings(drafter="none")).generate(request).candidates[0]
    assert kept.token_ids and kept.token_ids[0] not in banned and kept.text


@pytest.mark.parametrize("weights", ["int8", "w8a8"])
def test_the_chat_form_serves_models_in_the_low_byte_formats(tokenizer, weights):
    """The shipped format swaps the head for a layer without .weight: the banned first tokens are sized by the
    config's vocabulary (a regression: the engine failed to build on w8a8)."""
    from engine.quant.weights import apply_weight_format

    model = apply_weight_format(tiny_model(0, vocab_size=259, eos_token_id=258), weights)
    engine = Engine(model, tokenizer, None, EngineSettings(drafter="none"))
    assert engine.prompts.chat is not None and engine.prompts.not_first is not None
    result = engine.generate(GenerationRequest(PROMPT, k=2, max_new_tokens=4, temperature=0.0, budget_s=30))
    assert all(c.finished for c in result.candidates)
