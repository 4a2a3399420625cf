"""Tiny random-weight models with a byte-level tokenizer, for fast tests and load checks (spec "tiny:<seed>", or
"tiny:<seed>:fim" with fill-in-the-middle tokens)."""

from __future__ import annotations

import torch

TINY_PREFIX = "tiny:"
EOS_TOKEN = "<|endoftext|>"


FIM_TOKENS = ("<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>")


def byte_tokenizer(fim: bool = False):
    """A 257-token byte-level tokenizer (256 bytes + EOS), built locally with no download; with fim, Qwen2.5-Coder's
    six fill-in-the-middle tokens follow (ids 257..262)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = pre_tokenizers.ByteLevel.alphabet()
    vocab = {symbol: index for index, symbol in enumerate(sorted(alphabet))}
    vocab[EOS_TOKEN] = len(vocab)
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    backend.decoder = decoders.ByteLevel()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, eos_token=EOS_TOKEN)
    if fim:
        tokenizer.add_special_tokens({"additional_special_tokens": list(FIM_TOKENS)})
    return tokenizer


def tiny_model(seed: int = 0, vocab_size: int = 257, hidden: int = 64, layers: int = 2, eos_token_id: int = 256):
    """A Qwen2 causal LM with random weights (deterministic per seed)."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(
        vocab_size=vocab_size,
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        eos_token_id=eos_token_id,
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config)
    with torch.no_grad():  # sharper logits than the default init, so greedy choices are not near-ties
        model.lm_head.weight.mul_(8.0)
    return model.eval()


def load_tiny(spec: str):
    """(model, tokenizer) for "tiny:<seed>" or "tiny:<seed>:fim"."""
    seed_text, _, variant = (spec[len(TINY_PREFIX) :] or "0").partition(":")
    if not seed_text.isdigit() or variant not in ("", "fim"):
        raise ValueError(
            f"tiny model spec {spec!r} is invalid: use tiny:<seed> or tiny:<seed>:fim, seed an integer >= 0"
        )
    if variant == "fim":
        return tiny_model(int(seed_text), vocab_size=256 + 1 + len(FIM_TOKENS)), byte_tokenizer(fim=True)
    return tiny_model(int(seed_text)), byte_tokenizer()
