"""Tails (GenerationRequest.tail): a row that ends by itself goes on, in the batch, past its code into one line after
the request's text; the row itself stays as it was and the line is what the model writes after reading the row's
code and that text."""

from dataclasses import replace

import pytest

from engine import GenerationRequest, InvalidRequest
from engine.types import FINISH_STOP

PROMPT = "for i in range(10):\n    total = total + i\n"
TAIL = "\n\n\nassert h("  # the tiny target's greedy line after it ends within 32 tokens (after `assert f(` it does not)
STOPS = tuple("abcdefghijklmnop")  # random bytes hit one of these now and then: rows end by themselves
# (name, drafter, draft fixture): plain decoding, drafts from a draft model (its cache follows the cut-back rows),
# point-mass lookups from siblings (whose histories hold the tails)
DRAFTERS = [("none", "none", None), ("model", "model", "same_draft"), ("sibling", "sibling", None)]


def _request(**fields) -> GenerationRequest:
    base = GenerationRequest(
        PROMPT, k=4, max_new_tokens=40, temperature=1.0, seed=0, budget_s=60, stop=STOPS, stop_at_body_end=False
    )
    return replace(base, **fields)


@pytest.mark.parametrize(("name", "drafter", "draft"), DRAFTERS, ids=[d[0] for d in DRAFTERS])
def test_rows_stay_as_they_were_and_the_ended_ones_write_a_tail(make_engine, request, name, drafter, draft):
    engine = make_engine(drafter, request.getfixturevalue(draft) if draft else None, cost_aware=False)
    plain = engine.generate(_request()).candidates
    tailed = engine.generate(_request(tail=TAIL)).candidates
    assert [(c.text, c.token_ids, c.finish_reason) for c in tailed] == [
        (c.text, c.token_ids, c.finish_reason) for c in plain
    ]
    ended = [c for c in tailed if c.finish_reason == FINISH_STOP and c.text.strip()]
    assert ended, "the seed gives no row that ends by itself: pick another"
    assert all(c.tail is None or "\n" not in c.tail for c in ended)  # None: cut at its 32 tokens
    assert all(c.tail is None for c in tailed if c.finish_reason != FINISH_STOP)
    assert all(c.tail is None for c in plain)


# the tiny target's greedy text repeats itself: lookups draft many tokens a round, so rows commit tokens past this stop
# string, which the tail's row must drop from its cache
REPEATED = "\x11\ufffd:\ufffdw\x11\ufffd:\ufffdw\x11\ufffd:"
GREEDY_DRAFTERS = DRAFTERS + [("prompt", "prompt", None)]


@pytest.mark.parametrize(("name", "drafter", "draft"), GREEDY_DRAFTERS, ids=[d[0] for d in GREEDY_DRAFTERS])
def test_a_greedy_rows_tail_is_what_greedy_decoding_writes_after_its_tokens_and_the_text(
    make_engine, request, hf_greedy, tokenizer, target, name, drafter, draft
):
    """The row's cache is cut back to its tokens (those committed past its stop string dropped) and the text read
    whole: the tail is transformers' greedy answer to the prompt, the row's tokens and the tail's text, up to its
    first newline; a line cut at its 32 tokens is not returned."""
    engine = make_engine(drafter, request.getfixturevalue(draft) if draft else None, cost_aware=False)
    asked = _request(tail=TAIL, k=3, greedy_first=True, max_new_tokens=120, stop=(REPEATED,))
    row = engine.generate(asked).candidates[0]
    assert row.finish_reason == FINISH_STOP and row.text == row.text.rstrip()
    read = tokenizer.encode(PROMPT, add_special_tokens=False) + row.token_ids
    expected = tokenizer.decode(hf_greedy(target, read + tokenizer.encode(TAIL, add_special_tokens=False), 32))
    assert "\n" in expected and row.tail == expected.split("\n")[0]
    cut = engine.generate(replace(asked, tail="\n\n\nassert f(")).candidates[0]
    assert cut.text == row.text and cut.tail is None


def test_a_tail_is_refused_for_a_middle(make_engine):
    with pytest.raises(InvalidRequest, match="tail="):
        make_engine().generate(_request(tail=TAIL, suffix="x = 1\n"))
