"""Shared fixtures of the tests: tiny random-weight Qwen2 models, the byte tokenizer, a reference greedy decoder,
and the real sandbox's check runner."""

from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path

import pytest
import torch

from checks import CheckRunner
from engine import Engine, EngineSettings, release_freed_memory
from engine.models.tiny import byte_tokenizer, tiny_model
from engine.speculation.controller import ControllerSettings

TINY_EOS = 256  # the byte tokenizer's EOS id, also the tiny models' eos_token_id


@pytest.fixture(autouse=True)
def _one_torch_thread(request):
    """Engine tests run tiny models on a shared 2-core machine: one thread is faster there (no spin-waiting on
    busy cores) and leaves the other core to whoever shares it. Other test files are left alone."""
    if not request.module.__name__.startswith("test_engine_"):
        yield
        return
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


@pytest.fixture(autouse=True, scope="module")
def _memory_back_after_each_module():
    """The whole suite runs in one process on a 24 GiB machine: what a module's bundled models held goes back to the
    system when the module ends (without it the suite was killed for memory at its third bundled module)."""
    yield
    release_freed_memory()


@pytest.fixture(scope="session")
def tokenizer():
    """257 tokens: the 256 bytes and EOS (id 256)."""
    return byte_tokenizer()


@pytest.fixture(scope="session")
def target():
    """The tiny target model (seed 0)."""
    return tiny_model(0)


@pytest.fixture(scope="session")
def same_draft():
    """A draft with the target's weights (a separate object): it proposes what the target would."""
    return tiny_model(0)


@pytest.fixture(scope="session")
def other_draft():
    """A draft with different random weights: it rarely agrees with the target."""
    return tiny_model(1)


@pytest.fixture(scope="session")
def make_engine(target, tokenizer):
    """Engine factory: make_engine(drafter, draft_model=None, cost_aware=True, model=target, acceptance="coupled",
    **controller)."""

    def make(
        drafter: str = "none",
        draft_model=None,
        cost_aware: bool = True,
        model=None,
        acceptance: str = "coupled",
        **controller,
    ) -> Engine:
        # Random-weight drafts are never confident, so the confidence stop would cut every model draft to one
        # token; it is off here unless a test asks for it (test_engine_greedy tests it on its own).
        controller.setdefault("min_draft_confidence", 0.0)
        settings = EngineSettings(
            drafter=drafter, acceptance=acceptance, controller=ControllerSettings(cost_aware=cost_aware, **controller)
        )
        return Engine(model if model is not None else target, tokenizer, draft_model, settings)

    return make


@pytest.fixture(scope="session")
def hf_greedy(tokenizer):
    """Reference: transformers' own greedy generate, cut before the first EOS. Returns new token ids. The prompt is a
    text or its token ids."""

    def greedy(model, prompt: str | list[int], max_new_tokens: int) -> list[int]:
        if isinstance(prompt, list):
            ids = torch.tensor([prompt])
        else:
            ids = tokenizer(prompt, add_special_tokens=False, return_tensors="pt").input_ids
        with torch.inference_mode():
            out = model.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                do_sample=False,
                max_new_tokens=max_new_tokens,
                pad_token_id=TINY_EOS,
            )
        new = out[0, ids.shape[1] :].tolist()
        return new[: new.index(TINY_EOS)] if TINY_EOS in new else new

    return greedy


@pytest.fixture(scope="session")
def teacher_forced_logprobs(tokenizer):
    """log p(token | prompt, earlier tokens) at temperature 1, from one plain forward without any cache."""

    def logprobs(model, prompt: str, token_ids: list[int]) -> list[float]:
        prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        ids = torch.tensor([prompt_ids + token_ids])
        with torch.inference_mode():
            logits = model(ids).logits[0, len(prompt_ids) - 1 : -1].float()  # [n, V]
        return torch.log_softmax(logits, -1).gather(-1, torch.tensor(token_ids)[:, None]).squeeze(-1).tolist()

    return logprobs


@pytest.fixture
def slow_down():
    """slow_down(model, seconds): every forward of `model` takes `seconds` longer (a pre-hook removed after the test),
    so a tiny model behaves like a big one whose forward time is known."""
    handles = []

    def slow(model, seconds: float) -> None:
        handles.append(model.register_forward_pre_hook(lambda module, args: time.sleep(seconds)))

    yield slow
    for handle in handles:
        handle.remove()


@pytest.fixture(scope="session")
def entry_point():
    """The module app.py (beside the package app/, which `import app` would find instead)."""
    spec = importlib.util.spec_from_file_location("entry_point", Path(__file__).parent.parent / "app.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # as importlib's recipe does: a dataclass of the module looks itself up there
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def checker():
    """The real sandbox's check runner (every test that runs checks needs the sandbox here)."""
    made = CheckRunner.create()
    assert made.available, made.reason
    return made
