"""draw: the token inverse_cdf(warp_probs(...)) gives, without the whole distribution."""

import pytest
import torch

from engine.sampling import BLOCKS, _head, _nucleus_head, argmax, draw, inverse_cdf, warp_probs

VOCAB = 151_936  # the bundled Qwen2.5 models' vocabulary, so the head is a small part of it


def logits_of(kind: str, rows: int, seed: int, vocab: int = VOCAB) -> torch.Tensor:
    """[rows, VOCAB]: 'peaked' (40 likely tokens spread over the vocabulary, as code usually is: the blocks of
    largest maxima hold the nucleus), 'spread' (300 likely tokens: more blocks than are taken, the top-k of the
    row holds it), 'wide' (every token about as likely: the nucleus is far wider than the head), or rows of each
    in turn ('mixed')."""
    gen = torch.Generator().manual_seed(seed)
    logits = torch.randn(rows, vocab, generator=gen)
    if kind == "mixed":
        return torch.stack([logits_of(("peaked", "spread", "wide")[i % 3], 1, seed + i, vocab)[0] for i in range(rows)])
    if kind in ("peaked", "spread"):
        likely = torch.randperm(vocab, generator=gen)[: 40 if kind == "peaked" else 300]
        logits[:, likely] += 12.0
    return logits


WARPS = [(0.8, 0.95), (0.2, 0.9), (1.5, 0.5), (0.0, 0.95)]


@pytest.mark.parametrize("kind", ["peaked", "spread", "wide", "mixed"])
@pytest.mark.parametrize(("temperature", "top_p"), WARPS, ids=[f"T{t}-top_p{p}" for t, p in WARPS])
def test_draw_gives_the_token_of_the_whole_distribution(kind, temperature, top_p):
    logits = logits_of(kind, 12, seed=3)
    for seed in range(4):
        uniform = torch.rand(12, generator=torch.Generator().manual_seed(seed))
        expected = inverse_cdf(warp_probs(logits, temperature, top_p), uniform)
        assert draw(logits, temperature, top_p, uniform).tolist() == expected.tolist()


SHAPES = [(VOCAB, False), (VOCAB, True), (151_900, False), (5_000, False)]  # the last two: no whole last block,
# and too few blocks to look among (a plain top-k); True: half the vocabulary masked to -inf, as a chat form's first
# token or a typed word's healing masks it


def shaped_logits(vocab: int, masked: bool, seed: int) -> torch.Tensor:
    logits = logits_of("mixed", 12, seed, vocab)
    if masked:
        logits[:, torch.randperm(vocab, generator=torch.Generator().manual_seed(seed))[: vocab // 2]] = float("-inf")
    return logits


def nucleus64(logits: torch.Tensor, temperature: float, top_p: float) -> tuple[torch.Tensor, torch.Tensor]:
    """The nucleus in float64 from a sort of the whole vocabulary (no code shared with engine.sampling): [N, V]
    probabilities, and [N, V] each token's mass of the tokens sorted before it."""
    probs = torch.softmax(logits.double() / temperature, dim=-1)
    sorted_probs, ids = probs.sort(dim=-1, descending=True)
    mass_before = torch.zeros_like(probs).scatter_(-1, ids, sorted_probs.cumsum(-1) - sorted_probs)
    nucleus = probs.masked_fill(mass_before >= top_p, 0.0)
    return nucleus / nucleus.sum(-1, keepdim=True), mass_before


@pytest.mark.parametrize(("vocab", "masked"), SHAPES, ids=[f"V{v}{'-masked' if m else ''}" for v, m in SHAPES])
@pytest.mark.parametrize(("temperature", "top_p"), [(0.8, 0.95), (0.2, 0.9), (1.5, 0.5)])
def test_warp_probs_is_the_nucleus_of_the_whole_sorted_distribution(vocab, masked, temperature, top_p):
    """The head found through blocks and the top-k, against the float64 sort: the same tokens, but where the mass of
    the more likely ones is within 1e-4 of top_p (float32 sums over the vocabulary are off by about 3e-5: torch's
    own softmax of these rows sums to 1 +- 3e-5, so either side is right there), and the same probabilities on the
    tokens both keep."""
    logits = shaped_logits(vocab, masked, seed=5)
    expected, mass_before = nucleus64(logits, temperature, top_p)
    warped = warp_probs(logits, temperature, top_p).double()
    differ = (warped > 0) != (expected > 0)
    assert ((mass_before[differ] - top_p).abs() < 1e-4).all()
    both = (warped > 0) & (expected > 0)
    torch.testing.assert_close(warped[both], expected[both], atol=1e-7, rtol=5e-3)  # one token more or less
    assert int(differ.sum()) <= int(both.sum()) // 100


@pytest.mark.parametrize(("vocab", "masked"), SHAPES, ids=[f"V{v}{'-masked' if m else ''}" for v, m in SHAPES])
def test_draw_is_the_inverse_cdf_of_the_whole_sorted_distribution(vocab, masked):
    """draw against the float64 nucleus's cumulative sum in vocabulary order, on rows whose cut is clear of top_p by
    1e-4 and numbers clear of an interval's edge by 1e-4 (float32 rounding decides there)."""
    logits = shaped_logits(vocab, masked, seed=7)
    expected, mass_before = nucleus64(logits, 0.8, 0.95)
    cumulative = expected.cumsum(-1)  # [N, V]
    clear_cut = ((mass_before - 0.95).abs() > 1e-4).all(-1) | (expected > 0).sum(-1).lt(2)  # [N]
    compared = 0
    for seed in range(8):
        uniform = torch.rand(12, generator=torch.Generator().manual_seed(seed))
        reference = torch.searchsorted(cumulative, uniform.double()[:, None], right=True)[:, 0]  # [N]
        clear = clear_cut & ((cumulative - uniform.double()[:, None]).abs() > 1e-4).all(-1)
        tokens = draw(logits, 0.8, 0.95, uniform)
        assert tokens[clear].tolist() == reference[clear].tolist()
        compared += int(clear.sum())
    assert compared >= 24  # the peaked and spread rows at least


def test_a_likely_token_in_a_block_left_out_is_not_passed_over():
    """A nucleus of more tokens than blocks are taken, where the taken blocks also hold less likely tokens: those
    must not stand in for the likely tokens of the blocks left out (the candidates count only above the largest
    maximum left out)."""
    logits = torch.zeros(1, VOCAB)
    logits[0, 5] = 16.3  # p about 0.9
    upper = torch.arange(200) * 700 + 1_000  # 200 tokens of about 3.4e-4 each, one a block
    logits[0, upper] = 10.0 + 0.001 * torch.arange(200, 0, -1)
    logits[0, upper[:100] + 1] = 9.9  # a less likely partner beside each of the first 100
    warped = warp_probs(logits, 0.8, 0.95)[0]
    probs, ids = torch.softmax(logits.double() / 0.8, dim=-1)[0].sort(descending=True)
    nucleus = ids[(probs.cumsum(-1) - probs) < 0.95]
    assert len(nucleus) > BLOCKS
    assert set(warped.nonzero()[:, 0].tolist()) == set(nucleus.tolist())


def test_the_three_kinds_take_the_three_ways_to_the_nucleus():
    """Peaked rows are answered by the blocks alone, spread rows by the top-k of the row, wide rows whole (else the
    tests above would check one way only)."""
    logits = logits_of("mixed", 6, seed=3)
    head_logits, _ = _head(logits)
    blocks_mass = (head_logits / 0.8 - torch.logsumexp(logits / 0.8, dim=-1, keepdim=True)).exp().sum(-1)
    _, _, wide = _nucleus_head(logits, 0.8, 0.95)
    assert (blocks_mass >= 0.95).tolist() == [True, False, False] * 2
    assert wide.tolist() == [False, False, True] * 2


def test_draw_picks_every_token_of_the_nucleus_in_vocabulary_order():
    """Numbers from 0 to 1 walk the nucleus's tokens in increasing id, each for a share of the numbers equal to
    its probability, and never a token past the nucleus."""
    logits = torch.full((1, VOCAB), -20.0)
    ids = torch.tensor([151_935, 7, 90_000, 3_000])  # most likely first: not vocabulary order
    logits[0, ids] = torch.tensor([2.0, 1.0, 0.0, -3.0]).log_softmax(-1) * 0.8  # at T=0.8: p ∝ e^(2,1,0,-3)
    uniform = torch.linspace(0, 1 - 2**-24, 2_001)
    tokens = torch.stack([draw(logits, 0.8, 0.95, u[None])[0] for u in uniform])
    probs = warp_probs(logits, 0.8, 0.95)[0]
    assert set(tokens.tolist()) == {7, 90_000, 151_935}  # 3,000 lies past it: 0.662 + 0.244 + 0.090 >= 0.95
    assert tokens.tolist() == sorted(tokens.tolist())
    for token in (7, 90_000, 151_935):
        assert abs(float((tokens == token).float().mean()) - float(probs[token])) < 1e-3


def test_greedy_first_takes_the_argmax_at_row_0s_positions_only():
    from engine.generate import _target_samples
    from engine.types import GenerationRequest

    logits = logits_of("peaked", 5, seed=9)
    numbers = torch.rand(5, generator=torch.Generator().manual_seed(9))
    request = GenerationRequest(prompt="def f():\n", k=3, temperature=0.8, top_p=0.95, greedy_first=True)
    tokens = _target_samples(request, logits, [0, 0, 1, 2, 2], numbers)
    sampled = draw(logits, 0.8, 0.95, numbers)
    assert (sampled[:2] != logits[:2].argmax(-1)).any()  # else the greedy positions would not be told apart
    assert tokens[:2].tolist() == logits[:2].argmax(-1).tolist()
    assert tokens[2:].tolist() == sampled[2:].tolist()


@pytest.mark.parametrize("vocab", [VOCAB, 151_900, 130, 64, 5])
def test_argmax_is_torchs_first_largest_entry(vocab):
    """Through the blocks' maxima, ties included (integers from -3 to 3: every row has many equal maxima), a largest
    entry among the ids past the last whole block, and vocabularies of one block or less."""
    gen = torch.Generator().manual_seed(vocab)
    for _ in range(20):
        logits = torch.randint(-3, 4, (7, vocab), generator=gen).float()
        logits[0, -1] = 9.0  # the last id, past the last whole block where the vocabulary has one
        logits[1, 0] = logits[1, -1] = 9.0  # equal maxima at both ends: the first
        assert argmax(logits).tolist() == logits.argmax(-1).tolist()
