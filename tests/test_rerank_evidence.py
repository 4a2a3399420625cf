"""Evidence as data: rank compares each piece in list order by its role, and reports every piece by name."""

import pytest

from rerank import TIE_BREAK, Evidence, rank

# two copies agree, so consistency alone puts "a * b" first
TEXTS = ["    return a * b\n", "    return a * b\n", "    return a + b\n", "    return a - b\n"]


def test_a_tier_orders_before_the_score_and_reports_its_values():
    ranked = rank(TEXTS, evidence=[Evidence("passed", [0, 0, 1, 0])])
    assert ranked[0].text == TEXTS[2]
    assert [r.evidence["passed"] for r in ranked] == [1, 0, 0]


def test_tiers_compare_in_list_order():
    first = Evidence("first", [0, 0, 1, 1])
    second = Evidence("second", [5, 5, 0, 2])
    ranked = rank(TEXTS, evidence=[first, second])
    assert [r.text for r in ranked] == [TEXTS[3], TEXTS[2], TEXTS[0]]  # first decides, second breaks its tie
    swapped = rank(TEXTS, evidence=[second, first])
    assert swapped[0].text == TEXTS[0]  # the same values in the other order give the other answer


def test_a_tie_break_orders_only_equal_scores():
    texts = ["    return x + 1\n", "    return y + 2\n"]
    plain = rank(texts)
    assert plain[0].score == pytest.approx(plain[1].score)  # two distinct texts score alike
    favour_second = Evidence("prior", [0, 1], role=TIE_BREAK)
    assert rank(texts, evidence=[favour_second])[0].text == texts[1]
    # it does not outweigh the score: the majority text keeps first place
    assert rank(TEXTS, evidence=[Evidence("prior", [0, 0, 9, 9], role=TIE_BREAK)])[0].text == TEXTS[0]


def test_evidence_not_gathered_moves_nothing_and_reads_none():
    plain = [r.text for r in rank(TEXTS)]
    ranked = rank(TEXTS, evidence=[Evidence("agreement", None)])
    assert [r.text for r in ranked] == plain and all(r.evidence == {"agreement": None} for r in ranked)


def test_bad_evidence_is_named():
    with pytest.raises(ValueError, match="'passed' has 2 values for 4 texts"):
        rank(TEXTS, evidence=[Evidence("passed", [1, 0])])
    with pytest.raises(ValueError, match="role='score'"):
        rank(TEXTS, evidence=[Evidence("passed", [1, 0, 0, 0], role="score")])
    with pytest.raises(ValueError, match="repeat"):
        rank(TEXTS, evidence=[Evidence("x", None), Evidence("x", None)])
