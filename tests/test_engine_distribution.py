"""Sampled output has the target's distribution, with and without speculation.

Regular sampling and the "residual" rule (min(1, p/q), resampling from the residual) are tested by chi-square
goodness of fit. The "coupled" rule (every drafter but the residual one) draws each token with the number
regular sampling uses at that (row, position), so with a seed it must give regular decoding's tokens exactly:
those drafters are tested for token-for-token equality, which a wrong acceptance rule fails at once (a
distribution test there would only compare a sample with itself).

The 2nd generated token is the first one a drafter can influence. Its exact marginal is
sum_t1 w(t1) w(t2 | t1), with w the target's temperature/top-p distribution, computed here with plain model
forwards; the engine's empirical marginal over many seeded rows must fit it. Seeds are fixed, so each test is
deterministic: at ALPHA a correct engine would fail one of these (fixed) draws with probability ALPHA.
"""

import pytest
import torch
from conftest import TINY_EOS
from scipy import stats

from engine import GenerationRequest
from engine.speculation.drafters import Draft

ALPHA = 1e-3  # significance of each goodness-of-fit test
K, CALLS = 32, 60  # 1920 samples per drafter
ENDED = -1  # category: EOS came first or second, so there is no 2nd token


def prompt_with_every_byte() -> str:
    """About 240 characters whose UTF-8 bytes cover 245 of the 256 byte values: whatever the 1st token is, the
    prompt-lookup and sibling drafters find it in the prompt and propose (point-mass drafts at the 2nd token)."""
    chars = [chr(i) for i in range(1, 128)]  # ASCII
    chars += [chr(0x80 + i) for i in range(64)]  # lead C2 with every continuation byte 80..BF
    chars += [chr((lead - 0xC0) * 64) for lead in range(0xC3, 0xE0)]  # the other 2-byte leads
    chars += [chr(0x1000 * j + 0x800 * (j == 0)) for j in range(16)]  # 3-byte leads E0..EF
    chars += [chr(max(0x10000, 0x40000 * j)) for j in range(5)]  # 4-byte leads F0..F4
    return "".join(chars)


PROMPT = prompt_with_every_byte()


def warp(logits: torch.Tensor, temperature: float, top_p: float) -> torch.Tensor:
    """The sampling distribution, written independently of engine.sampling: softmax(l / T), then the smallest set
    of most likely tokens whose mass reaches top_p, renormalized."""
    probs = torch.softmax(logits.double() / temperature, -1)
    if top_p >= 1:
        return probs
    sorted_probs, order = probs.sort(-1, descending=True)
    reached_before = torch.cat([torch.zeros_like(sorted_probs[:, :1]), sorted_probs.cumsum(-1)[:, :-1]], -1) >= top_p
    out = torch.zeros_like(probs).scatter(-1, order, sorted_probs.masked_fill(reached_before, 0))
    return out / out.sum(-1, keepdim=True)


def exact_second_token(model, tokenizer, temperature, top_p) -> dict[int, float]:
    """{token: P(2nd token = token)} plus {ENDED: P(no 2nd token)}."""
    ids = tokenizer(PROMPT, add_special_tokens=False)["input_ids"]
    with torch.inference_mode():  # transformers' own DynamicCache, fanned out to every possible 1st token
        out = model(torch.tensor([ids]), use_cache=True)
        first = warp(out.logits[0, -1:], temperature, top_p)[0]  # [V]
        vocab = first.shape[0]
        out.cache.batch_repeat_interleave(vocab)
        logits = model(torch.arange(vocab)[:, None], cache=out.cache).logits[:, -1]  # [V(t1), V]
        second = warp(logits, temperature, top_p)  # [V(t1), V(t2)]
    joint = first[:, None] * second  # [t1, t2]
    joint[TINY_EOS] = 0
    marginal = joint.sum(0)
    exact = {t: p for t, p in enumerate(marginal.tolist()) if t != TINY_EOS and p > 0}
    exact[ENDED] = first[TINY_EOS].item() + marginal[TINY_EOS].item()
    return exact


def sampled_second_token(engine, temperature, top_p):
    tokens, proposed, accepted = [], 0, 0
    for seed in range(CALLS):
        result = engine.generate(
            GenerationRequest(
                PROMPT, k=K, max_new_tokens=2, temperature=temperature, top_p=top_p, seed=seed, budget_s=60, stop=()
            )
        )
        tokens += [c.token_ids[1] if len(c.token_ids) == 2 else ENDED for c in result.candidates]
        proposed, accepted = proposed + result.stats.proposed_tokens, accepted + result.stats.accepted_tokens
    return tokens, proposed, accepted


def goodness_of_fit(samples: list[int], exact: dict[int, float]) -> float:
    """Chi-square p-value; categories with expected count < 5 are lumped together (and with the smallest if needed)."""
    n = len(samples)
    counts = {t: 0 for t in exact}
    for token in samples:
        assert token in counts, f"sampled token {token} has probability 0 under the target"
        counts[token] += 1
    big = [t for t in exact if exact[t] * n >= 5]
    observed = [counts[t] for t in big] + [sum(counts[t] for t in exact if t not in big)]
    expected = [exact[t] * n for t in big] + [sum(exact[t] for t in exact if t not in big) * n]
    if expected[-1] < 5:  # fold the lump into the smallest big category
        smallest = min(range(len(big)), key=lambda i: expected[i])
        observed[smallest] += observed.pop()
        expected[smallest] += expected.pop()
    expected = [e * sum(observed) / sum(expected) for e in expected]  # exact sums to 1 up to float rounding
    return stats.chisquare(observed, expected).pvalue


DRAFTERS = [  # (name, drafter, draft fixture, acceptance rule): those whose tokens are not regular decoding's
    ("none", "none", None, "coupled"),
    ("model residual, different weights", "model", "other_draft", "residual"),
    ("model residual, same weights", "model", "same_draft", "residual"),
]
COUPLED = [  # (name, drafter, draft fixture): seeded, they must give regular decoding's tokens
    ("model, different weights", "model", "other_draft"),
    ("model, same weights", "model", "same_draft"),
    ("sibling", "sibling", None),
    ("prompt", "prompt", None),
    ("auto", "auto", "other_draft"),
]
WARPS = [(1.0, 1.0), (0.5, 0.9)]


@pytest.fixture(scope="module")
def exact(target, tokenizer):
    return {warp_: exact_second_token(target, tokenizer, *warp_) for warp_ in WARPS}


@pytest.mark.parametrize(("temperature", "top_p"), WARPS, ids=[f"T{t}-top_p{p}" for t, p in WARPS])
@pytest.mark.parametrize(("name", "drafter", "draft", "acceptance"), DRAFTERS, ids=[d[0] for d in DRAFTERS])
def test_second_token_marginal_is_the_targets(
    request, make_engine, exact, name, drafter, draft, acceptance, temperature, top_p
):
    draft_model = request.getfixturevalue(draft) if draft else None
    engine = make_engine(drafter, draft_model, cost_aware=False, acceptance=acceptance)
    samples, proposed, accepted = sampled_second_token(engine, temperature, top_p)
    if drafter != "none":  # speculation really happened, with rejections (except a same-weights draft)
        assert proposed > len(samples) // 2
        assert 0 < accepted < proposed or "same weights" in name
    p_value = goodness_of_fit(samples, exact[(temperature, top_p)])
    assert p_value > ALPHA, f"{name}: chi-square p = {p_value:.2e}"


def test_the_check_has_power(exact):
    """The same check rejects a sampler that is off by a little: the 1st token's distribution instead of the 2nd's
    would be far off; here, a mild distortion (each sample replaced by the most likely token with prob. 0.1)."""
    dist = exact[WARPS[0]]
    tokens = torch.tensor(list(dist))
    probs = torch.tensor([dist[t] for t in dist]).float()
    generator = torch.Generator().manual_seed(0)
    samples = tokens[torch.multinomial(probs, K * CALLS, replacement=True, generator=generator)]
    distorted = torch.rand(K * CALLS, generator=generator) < 0.1
    samples[distorted] = tokens[probs.argmax()]
    assert goodness_of_fit(samples.tolist(), dist) < ALPHA


class ArgmaxOracleDrafter:
    """A point-mass drafter that proposes the target's own most likely next token (one plain forward per step).

    Real lookups mostly propose tokens the tiny random model finds unlikely, so a wrong rejection rule barely shows
    in their samples. This drafter's guesses carry much of the target's mass, so the point-mass path of the engine
    (keep x while it equals the target's own draw, else take that draw) is tested with power: it caught
    resampling from p_target instead of the residual in the earlier accept-with-p(x) rule (p = 1e-38)."""

    name, uses_model = "prompt", False

    def __init__(self, model):
        self.model = model

    def propose(self, context):
        with torch.inference_mode():  # row by row: rows hold different numbers of tokens
            guess = torch.stack(
                [
                    self.model(torch.tensor([context.prompt_ids + context.generated[r]])).logits[0, -1].argmax()
                    for r in context.active_rows
                ]
            )  # [B]
        return Draft(guess[:, None], torch.ones(len(guess), dtype=torch.long))


LATER_PROMPT = "abcabcabcabc abc abcabc"  # repetitive: lookups find drafts at every position


def tokens_of(engine, prompt: str, seeds, max_new_tokens: int, **fields):
    """Every row's tokens over seeded calls, and the draft tokens proposed and accepted."""
    tokens, proposed, accepted = [], 0, 0
    for seed in seeds:
        result = engine.generate(
            GenerationRequest(prompt, k=K, max_new_tokens=max_new_tokens, seed=seed, budget_s=60, stop=(), **fields)
        )
        tokens += [c.token_ids for c in result.candidates]
        proposed, accepted = proposed + result.stats.proposed_tokens, accepted + result.stats.accepted_tokens
    return tokens, proposed, accepted


@pytest.mark.parametrize(("temperature", "top_p"), WARPS, ids=[f"T{t}-top_p{p}" for t, p in WARPS])
@pytest.mark.parametrize(("name", "drafter", "draft"), COUPLED, ids=[d[0] for d in COUPLED])
def test_coupled_drafts_give_regular_decodings_tokens(request, make_engine, name, drafter, draft, temperature, top_p):
    draft_model = request.getfixturevalue(draft) if draft else None
    fields = dict(temperature=temperature, top_p=top_p)
    expected, _, _ = tokens_of(make_engine("none"), LATER_PROMPT, range(8), 12, **fields)
    engine = make_engine(drafter, draft_model, cost_aware=False)
    got, proposed, accepted = tokens_of(engine, LATER_PROMPT, range(8), 12, **fields)
    assert proposed > 0 and (accepted < proposed or "same weights" in name)  # drafts were made and judged
    assert got == expected


def test_likely_point_mass_drafts_give_regular_decodings_tokens(monkeypatch, make_engine, target):
    """Drafts that carry much of the target's mass are accepted often and rejected often: the point-mass path
    (keep x while it equals the target's own draw, else take that draw) is exercised both ways."""
    temperature, top_p = WARPS[1]
    expected, _, _ = tokens_of(make_engine("none"), PROMPT, range(6), 8, temperature=temperature, top_p=top_p)
    monkeypatch.setattr("engine.generate.prompt_lookup_drafter", lambda: ArgmaxOracleDrafter(target))
    got, proposed, accepted = tokens_of(
        make_engine("prompt", cost_aware=False), PROMPT, range(6), 8, temperature=temperature, top_p=top_p
    )
    assert 0.2 * proposed < accepted < proposed
    assert got == expected
