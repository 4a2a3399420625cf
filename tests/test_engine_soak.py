"""The differential soak (benchmarks/soak.py) on the bundled 0.5B, as target and as draft model, in fp32: real prompts
(HumanEval, a method inside a class, a script, a prompt ending mid-line), every drafter, both acceptance rules, a
short budget, one group on a busy CPU; every promise the engine makes must hold (0 violations)."""

import pytest

import engine
from benchmarks import soak
from engine import GenerationRequest
from engine.types import Candidate

STACK = soak.METHOD_PROMPTS[0]


def test_the_checks_catch_what_they_look_for(tokenizer):
    """Each invariant fires on a candidate that breaks it (so 0 violations means something)."""
    request = GenerationRequest(STACK, k=1, max_new_tokens=5, budget_s=10)
    body, special = soak.BodyEnd.of(STACK), frozenset({256})

    def candidate(text, finish, extra=()):
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        ids = ids[:1] + list(extra) + ids[1:]
        return Candidate(text, ids, [0.0] * len(ids), finish)

    cases = {
        "special": candidate("ab", "stop", extra=[256]),
        "text": Candidate("xyz", tokenizer("ab", add_special_tokens=False)["input_ids"], [0.0] * 2, "stop"),
        "stop": candidate("        return 1\n    def push(self):", "stop"),
        "length": candidate("ab", "length"),
        "budget": candidate("ab", "budget"),
    }
    for kind, bad in cases.items():
        found = soak.check_candidate(request, bad, 1.0, body, special, tokenizer.decode)
        assert kind in [k for k, _ in found], (kind, found)
    good = candidate("        return 1", "stop")
    assert soak.check_candidate(request, good, 1.0, body, special, tokenizer.decode) == []
    assert soak.differ(good, candidate("        return 2", "stop"))
    assert not soak.differ(candidate("        ret", "budget"), good)  # a budget cut: a prefix is enough


@pytest.fixture(scope="module")
def fp32_pair():
    model, tokenizer = engine.load_any("bundled:qwen2.5-coder-0.5b", progress=False, dtype="float32")
    draft, _ = engine.load_any("bundled:qwen2.5-coder-0.5b", progress=False, dtype="float32")
    return model, tokenizer, draft


@pytest.mark.bundled
def test_soak_finds_no_broken_promise(fp32_pair):
    model, tokenizer, draft = fp32_pair
    prompts = soak.soak_prompts(2)
    picked = prompts[:5]  # round-robin order: HumanEval, a method, a script, a mid-line prompt, HumanEval
    settings = soak.SoakSettings(
        model="bundled:qwen2.5-coder-0.5b",
        draft="bundled:qwen2.5-coder-0.5b",
        k=4,
        max_new_tokens=40,
        humaneval=2,
        busy_every=4,
    )
    tallies = soak.run_soak(model, tokenizer, draft, settings, picked, log=lambda line: None)
    summary = soak.report(tallies, settings)
    assert summary["requests"] == len(picked) * (1 + len(soak.VARIANTS))
    assert summary["total_violations"] == 0, summary["examples"]
    assert tallies["auto short-budget"].tokens < tallies["auto"].tokens  # the deadline really cut rows
