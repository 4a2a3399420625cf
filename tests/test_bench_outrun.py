"""benchmarks/eval_outrun: the replay of the outrun rule on stored rows (pure logic, no model)."""

from benchmarks.eval_outrun import OutrunRule, cut_lengths, cut_record


def test_a_row_is_cut_once_half_the_rows_ended_and_it_ran_past_the_limit():
    rule = OutrunRule(quorum=0.5, factor=1.5)
    # the quorum (2 of 4) is met at step 20 (limit 30); row 2 ends at 25 first, so the limit is 38 by then
    assert cut_lengths([10, 20, 25, 90], [True, True, True, True], rule) == [10, 20, 25, 38]
    assert cut_lengths([10, 20, 90, 95], [True, True, True, True], rule) == [10, 20, 30, 30]
    assert cut_lengths([10, 20, 25, 90], [True, True, True, True], rule, spared=3) == [10, 20, 25, 90]
    # rows cut by their token limit do not count towards the quorum
    assert cut_lengths([10, 20, 25, 90], [True, False, False, True], rule) == [10, 20, 25, 90]
    assert cut_lengths([50], [True], rule) == [50]  # one row: nothing to wait for


def test_a_cut_record_keeps_the_first_tokens_and_their_text_and_says_it_was_cut():
    def row(tokens: int) -> dict:
        return {
            "text": "x" * tokens,
            "token_ids": list(range(tokens)),
            "logprobs": [0.0] * tokens,
            "token_texts": ["x"] * tokens,
            "finish_reason": "stop",
        }

    record = {"task_id": "t", "greedy": row(4), "candidates": [row(9), row(6), row(40)]}
    cut, before, after, changed = cut_record(record, OutrunRule(0.5, 1.5), spare_greedy=True)
    assert (before, after, changed) == (40, 9, 1)
    assert cut["candidates"][0] == record["greedy"] and cut["greedy"] == record["greedy"]
    last = cut["candidates"][2]
    assert last["token_ids"] == list(range(9)) and last["text"] == "x" * 9 and last["finish_reason"] == "length"
